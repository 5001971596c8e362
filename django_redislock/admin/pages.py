"""The admin's read-only pages: queues, locks, semaphores, stocks and workers, each read live
from Redis at a cost in proportion to the rows shown (the job pages are in ``job_pages``)."""

from __future__ import annotations

import logging
import time
from typing import Any

import redis
from django.http import HttpRequest, HttpResponse

from ..conf import conf
from ..exceptions import StockError
from ..locks.listing import list_locks
from ..names import validate_name
from ..queue.queue import get_queue
from ..queue.worker.registry import live_workers
from ..semaphores.listing import list_semaphores
from ..stock.listing import count_stocks, expiring, stock_names
from ..stock.stock import Stock
from .actions import MANAGE, RELEASE
from .history_pages import HistoryPages
from .job_pages import STATES
from .paging import paginate
from .rendering import can, corrupt, seconds_since
from .shown import shown_name

logger = logging.getLogger("django_redislock.admin")


def _semaphore_name(name: str) -> str:
    return validate_name(name, "Semaphore")


class Pages(HistoryPages):  # (the task history pages are HistoryPages')
    def queues_view(self, request: HttpRequest) -> HttpResponse:
        def load() -> dict[str, Any]:
            rows: list[dict[str, Any]] = []
            manage = can(request, MANAGE)
            for name in conf.QUEUES:
                queue = get_queue(name)
                try:
                    counts, oldest = queue.counts(done=True), queue.oldest_ready_age()
                    paused = sorted(queue.paused())
                except redis.ResponseError as exc:
                    if not corrupt(exc):
                        raise
                    rows.append({"name": name, "error": str(exc)})  # the others still show
                    continue
                rows.append(
                    {
                        "name": name,
                        "states": [(s, counts[s], self._url("jobs", name, s)) for s in STATES],
                        "oldest": oldest,
                        "workflows_url": self._url("workflows", name),
                        "paused": [
                            (
                                "the whole queue" if what == "*" else what,
                                self._resume_url(request, name, what) if manage else "",
                            )
                            for what in paused
                        ],
                        "pause_url": self._confirm(request, "pause", queue=name)
                        if manage and "*" not in paused
                        else "",
                    }
                )
            return {"queues": rows}

        return self._page(request, "queues.html", "Queues", load, {"tab": "queues"})

    def _resume_url(self, request: HttpRequest, queue: str, what: str) -> str:
        if what == "*":
            return self._confirm(request, "resume", queue=queue)
        return self._confirm(request, "resume", queue=queue, task=what)

    def locks_view(self, request: HttpRequest) -> HttpResponse:
        prefix = request.GET.get("q", "")

        def load() -> dict[str, Any]:
            locks, pager = paginate(
                request, lambda offset, limit: list_locks(prefix, offset=offset, limit=limit)
            )
            can_release = can(request, RELEASE)
            rows = []
            for lock in locks:
                shown = shown_name(lock.name, validate_name)
                # A planted name is no lock this app can release (the action would refuse it)
                action = "release_read_write" if lock.read_write else "release"
                release = can_release and shown.valid
                url = self._confirm(request, action, name=lock.name) if release else ""
                rows.append((lock, shown, url))
            return {"locks": rows, "pager": pager}

        extra = {"tab": "locks", "prefix": prefix, "prefix_shown": shown_name(prefix)}
        return self._page(request, "locks.html", "Locks", load, extra)

    def stocks_view(self, request: HttpRequest) -> HttpResponse:
        prefix = request.GET.get("q", "")

        def load() -> dict[str, Any]:
            total = count_stocks(prefix)
            names, pager = paginate(
                request, lambda offset, limit: (stock_names(prefix, offset, limit), total), total
            )
            rows: list[dict[str, Any]] = []
            now = time.time()
            for name in names:
                shown = shown_name(name, validate_name)
                if not shown.valid:  # Stock() would refuse it: no counts to read
                    rows.append({"name": shown, "error": "Set aside: its counts are not read."})
                    continue
                try:
                    stock = Stock(name)
                    counts = stock.counts()  # also gives back what expired
                    soonest = expiring(stock, 1)
                except (StockError, ValueError) as exc:  # this one is unreadable; not the rest
                    rows.append({"name": shown, "error": str(exc)})
                    continue
                expires_in = soonest[0].expires_at.timestamp() - now if soonest else None
                rows.append({"name": shown, "counts": counts, "expires_in": expires_in})
            return {"stocks": rows, "pager": pager}

        extra = {"tab": "stocks", "prefix": prefix, "prefix_shown": shown_name(prefix)}
        return self._page(request, "stocks.html", "Stocks", load, extra)

    def semaphores_view(self, request: HttpRequest) -> HttpResponse:
        def load() -> dict[str, Any]:
            semaphores, pager = paginate(request, list_semaphores)
            can_release = can(request, RELEASE)
            rows = []
            for info in semaphores:
                shown = shown_name(info.name, _semaphore_name)
                release = can_release and info.held and shown.valid and not info.problem
                url = self._confirm(request, "release_semaphore", name=info.name) if release else ""
                rows.append((info, shown, url))
            return {"semaphores": rows, "pager": pager}

        return self._page(request, "semaphores.html", "Semaphores", load, {"tab": "semaphores"})

    def workers_view(self, request: HttpRequest) -> HttpResponse:
        def load() -> dict[str, Any]:
            try:
                entries = live_workers()
            except ValueError as exc:  # an entry that is no JSON: the others cannot be read
                logger.warning("Admin workers page: a registry entry is unreadable: %s", exc)
                note = f"A worker's registry entry in Redis is unreadable ({exc})."
                return {"note": note, "workers": []}
            now = time.time()
            rows = [self._worker_row(info, now) for info in entries]
            return {"workers": sorted(rows, key=lambda row: row["id"])}

        return self._page(request, "workers.html", "Workers", load, {"tab": "workers"})

    def _worker_row(self, info: Any, now: float) -> dict[str, Any]:
        """A registry entry as shown: whatever it holds, never an error (it is written by
        workers of any version, or by something else entirely)."""
        if not isinstance(info, dict) or "unreadable" in info:
            what = info.get("unreadable") if isinstance(info, dict) else info
            ident = info.get("id", "?") if isinstance(info, dict) else "?"
            host = f"(this registry entry in Redis is unreadable: {str(what)[:200]})"
            return {
                "id": str(ident),
                "shown": shown_name(str(ident)),
                "host": host,
                "queues": [],
                "current": [],
                "beat_age": None,
                "up": None,
            }
        queues, jobs = info.get("queues"), info.get("jobs")
        current = []
        for job in jobs if isinstance(jobs, list) else [jobs]:
            queue, _, job_id = str(job).partition(":")
            # Only a configured queue has a page (and a name a URL can carry).
            link = self.job_url(queue, job_id) if queue in conf.QUEUES else ""
            shown = shown_name(job_id)
            current.append((shown_name(queue).text, shown, link if shown.linkable else ""))
        return {
            **{key: info.get(key) for key in ("host", "pid", "concurrency", "processed", "failed")},
            "id": str(info.get("id", "?")),
            "shown": shown_name(str(info.get("id", "?"))),
            "queues": [str(q) for q in queues] if isinstance(queues, list) else [str(queues)],
            "beat_age": seconds_since(info.get("beat"), now),
            "up": seconds_since(info.get("started"), now),
            "current": current if jobs else [],
        }
