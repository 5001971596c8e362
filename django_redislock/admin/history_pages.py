"""The admin's task history pages: every task's last day (runs, failures, p50, p95 and a
sparkline), and one task's charts over the last hours with its recent jobs.

A task's recent jobs come from its index (``history.recent``): the latest ``RECENT`` to
start or end a run, each shown in its current state; the page says how many of them are no
longer kept, and how many entries of the index were unreadable."""

from __future__ import annotations

import math
import time
from typing import Any
from urllib.parse import urlencode

import redis
from django.http import Http404, HttpRequest, HttpResponse

from ..conf import conf
from ..history.durations import RELATIVE_ERROR
from ..history.keys import RECENT
from ..history.reading import MAX_HOURS, Minute, merged_minutes, series, summaries
from ..history.recent import RecentJob, recent_jobs
from ..history.recording import OTHER
from ..queue.jobs import JobState
from ..queue.queue import Job, get_queue
from .charts import Chart, chart, sparkline
from .rendering import Rendering, corrupt

HOURS = (1, 6, 24)
MAX_TASK = 1000  # the longest task path a URL may ask for
POINTS = 240  # a chart's most points: minutes are merged above that


def shown_duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 0.001:
        return "< 1 ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.1f} s" if seconds < 60 else f"{seconds / 60:.1f} min"


class HistoryPages(Rendering):
    def task_url(self, queue: str, task: str, hours: int | None = None) -> str:
        query = {"task": task, **({"hours": str(hours)} if hours else {})}
        return f"{self._url('task_history', queue)}?{urlencode(query)}"

    def tasks_view(self, request: HttpRequest) -> HttpResponse:
        def load() -> dict[str, Any]:
            rows: list[dict[str, Any]] = []
            for name in conf.QUEUES:
                try:
                    found = summaries(get_queue(name))
                except redis.ResponseError as exc:
                    if not corrupt(exc):
                        raise
                    rows.append({"queue": name, "error": str(exc)})  # the others still show
                    continue
                for summary in found:
                    rows.append(
                        {
                            "queue": name,
                            "summary": summary,
                            "p50": shown_duration(summary.p50),
                            "p95": shown_duration(summary.p95),
                            "sparkline": sparkline(summary.hourly),
                            "url": self.task_url(name, summary.task),
                        }
                    )
            skipped = sum(row["summary"].skipped for row in rows if "summary" in row)
            return {"rows": rows, "skipped": skipped}

        extra = {
            "tab": "tasks",
            "error_percent": round(RELATIVE_ERROR * 100),
            "other": OTHER,
            "recording": conf.HISTORY,
        }
        return self._page(request, "tasks.html", "Tasks", load, extra)

    def task_history_view(self, request: HttpRequest, queue: str) -> HttpResponse:
        task = request.GET.get("task", "")
        if queue not in conf.QUEUES or not task or len(task) > MAX_TASK:
            raise Http404(f"No queue {queue!r}, or no task.")
        asked = request.GET.get("hours", "")
        hours = int(asked) if asked in {str(h) for h in HOURS} else MAX_HOURS

        def load() -> dict[str, Any]:
            q = get_queue(queue)
            read = series(q, task, hours)
            width = math.ceil(len(read.minutes) / POINTS)
            points = merged_minutes(read.minutes, width)
            runs = sum(m.runs for m in read.minutes)
            return {
                "charts": [
                    ("Runs and failures", "counts", _counts_chart(points)),
                    ("Duration", "durations", _durations_chart(points)),
                ],
                "width_minutes": width,
                "runs": runs,
                "failures": sum(m.failures for m in read.minutes),
                "skipped": read.skipped,
                **self._recent_jobs(q, task),
            }

        extra = {
            "tab": "tasks",
            "queue": queue,
            "task": task,
            "hours": hours,
            "choices": [(h, self.task_url(queue, task, h)) for h in HOURS],
            "recent": RECENT,
            "running_url": self._url("jobs", queue, JobState.RUNNING.value),
            "error_percent": round(RELATIVE_ERROR * 100),
        }
        title = f"Task “{task[:120]}” of queue “{queue}”"
        return self._page(request, "task.html", title, load, extra)

    def _recent_jobs(self, q: Any, task: str) -> dict[str, Any]:
        found = recent_jobs(q, task)
        now = time.time()
        rows = [self._job_row(q.name, recent, now) for recent in found.jobs]
        return {"jobs": rows, "gone": found.gone, "index_skipped": found.skipped}

    def _job_row(self, queue: str, recent: RecentJob, now: float) -> dict[str, Any]:
        job = recent.job
        return {
            "job": job,
            "url": self.job_url(queue, job.id),
            "took": _took(job),
            "ago": max(0.0, now - recent.at / 1000),
            "running": job.state == JobState.RUNNING,  # (its last start, else its last end)
        }


def _took(job: Job) -> str:
    if job.started and job.finished:
        return shown_duration(max(0, job.finished - job.started) / 1000)
    return "—"


def _counts_chart(points: list[Minute]) -> Chart:
    return chart(
        [
            ("Runs", "runs", [float(p.runs) for p in points]),
            ("Failures", "failures", [float(p.failures) for p in points]),
        ],
        [p.start for p in points],
    )


def _durations_chart(points: list[Minute]) -> Chart:
    return chart(
        [("p50", "p50", [p.p50 for p in points]), ("p95", "p95", [p.p95 for p in points])],
        [p.start for p in points],
    )
