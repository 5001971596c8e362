"""The task history pages of the admin through the test client: the tasks' last day, a
task's charts (inline SVG) and recent jobs (from the task's index: a rarely run task's among
busy ones, those no longer kept counted), an unreadable history or index skipped rather than
a 500, Redis away shown as such. On fakeredis, a real redis-server and a Cluster."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest
from django.test import Client

from django_redislock.history import recording
from django_redislock.history.keys import RECENT, SPAN_MINUTES, HistoryKeys
from django_redislock.history.recording import OTHER, Recorder
from django_redislock.queue.queue import Queue
from django_redislock.queue.worker.loop import Worker
from tests.support.fixtures import Backend
from tests.support.history_checks import assert_kept_a_day, assert_under_hash_tag
from tests.support.servers import free_port

from .test_admin import QUEUES, html, staff_client, url

pytestmark = pytest.mark.django_db

TASK = "tests.tasks.record"


def run_worker() -> None:
    """A burst worker, in a thread of its own: it closes its own database connections,
    never the test's."""
    worker = threading.Thread(target=Worker(["default"], burst=True).run)
    worker.start()
    worker.join()


def task_page(client: Client, queue: str, task: str, **query: str) -> Any:
    return client.get(url("task_history", queue), {"task": task, **query})


def paths(page: str, chart: str) -> list[str]:
    svg = page.split(f'id="chart-{chart}"', 1)[1].split("</svg>", 1)[0]
    return re.findall(r'<path class="(\w+)" d="([^"]*)"', svg)


def test_the_tasks_and_a_task_page_show_what_the_worker_ran(
    queue: Queue, admin_client: Client
) -> None:
    queue.enqueue_many([{"task": TASK, "args": [n]} for n in range(6)])
    queue.enqueue("tests.tasks.boom")
    queue.enqueue("tests.nowhere.task")
    run_worker()
    recording.RECORDER.flush()
    page = html(admin_client.get(url("tasks")))
    row = page.split(f'data-task="{TASK}"', 1)[1].split("</tr>", 1)[0]
    assert '<td class="num" data-field="runs">6</td>' in row
    assert '<td class="num" data-field="failures">0</td>' in row
    assert re.search(r'<svg class="sparkline"[^>]*><path d="M[^"]+"', row)
    assert f'data-task="{OTHER}"' in page
    assert 'data-task="tests.tasks.boom"' in page
    assert "Tasks</a>" in page  # the tab

    response = task_page(admin_client, "default", TASK, hours="1")
    assert response.status_code == 200
    page = html(response)
    assert "6 runs, 0 failed, in the last 1 h" in page
    counts, durations = dict(paths(page, "counts")), dict(paths(page, "durations"))
    assert counts["runs"].startswith("M")
    assert durations["p50"].startswith("M")
    assert durations["p95"].startswith("M")
    assert page.count('<tr data-job="') == 6  # the recent jobs, from the task's index
    assert page.count("<td>done</td><td>ended ") == 6
    boom = html(task_page(admin_client, "default", "tests.tasks.boom"))
    assert "1 run, 1 failed" in boom
    assert boom.count('<tr data-job="') == 1
    other = html(task_page(admin_client, "default", OTHER))
    assert other.count('<tr data-job="') == 1


def test_a_task_without_history_and_bad_requests(queue: Queue, admin_client: Client) -> None:
    page = html(task_page(admin_client, "default", "tests.tasks.slow", hours="999"))
    assert "0 runs, 0 failed, in the last 24 h" in page
    assert dict(paths(page, "durations")) == {"p50": "", "p95": ""}
    assert task_page(admin_client, "nope", TASK).status_code == 404
    assert task_page(admin_client, "default", "").status_code == 404
    assert task_page(admin_client, "default", "x" * 1001).status_code == 404
    assert "No job has run in the last day" in html(admin_client.get(url("tasks")))


def test_the_tasks_page_says_when_history_is_off(
    queue: Queue, admin_client: Client, settings: Any
) -> None:
    note = 'REDISLOCK["HISTORY"]</code> is False'
    assert note not in html(admin_client.get(url("tasks")))
    settings.REDISLOCK = {**settings.REDISLOCK, "HISTORY": False}
    assert note in html(admin_client.get(url("tasks")))


def test_the_pages_need_the_view_permission(queue: Queue, django_user_model: Any) -> None:
    nobody = staff_client(django_user_model, "release_lock")
    assert nobody.get(url("tasks")).status_code == 403
    assert task_page(nobody, "default", TASK).status_code == 403


def test_an_unreadable_history_is_skipped_never_a_500(
    queue: Queue, backend: Backend, admin_client: Client
) -> None:
    now = time.time()
    recorder = Recorder()
    recorder.add(queue, TASK, 0.02, failed=False, now=now)
    recorder.flush()
    keys = HistoryKeys(queue.keys)
    minute = int(now // 60)
    span, offset = divmod(minute, SPAN_MINUTES)
    backend.client.hset(keys.span(TASK, span), mapping={f"{offset}:h4": "NaN", "?": "x"})
    backend.client.hset(keys.hour(TASK, minute // 60), "f", "<script>")
    backend.client.zadd(keys.tasks, {"<b>planted</b>": now * 1000})
    backend.client.set(keys.hour("<b>planted</b>", minute // 60), "a string")
    tasks = admin_client.get(url("tasks"))
    assert tasks.status_code == 200
    page = html(tasks)
    assert "2 unreadable values in the history were skipped" in page
    assert "&lt;b&gt;planted&lt;/b&gt;" in page
    assert "<b>planted" not in page
    one = task_page(admin_client, "default", TASK)
    assert one.status_code == 200
    assert "2 unreadable values in this task's history were skipped" in html(one)
    assert "1 run, 0 failed" in html(one)
    # the index itself of another type: that queue's row says so, the others show
    backend.client.delete(keys.tasks)
    backend.client.set(keys.tasks, "x")
    page = html(admin_client.get(url("tasks")))
    assert "Its history in Redis is unreadable" in page
    assert "WRONGTYPE" in page


def test_a_rarely_run_task_shows_its_jobs_among_many_busy_ones(
    queue: Queue, backend: Backend, admin_client: Client
) -> None:
    rare = queue.enqueue("tests.tasks.tracked", args=[0])
    run_worker()
    queue.enqueue_many([{"task": TASK, "args": [n]} for n in range(300)])  # all finish later
    run_worker()
    recording.RECORDER.flush()
    page = html(task_page(admin_client, "default", "tests.tasks.tracked"))
    assert page.count('<tr data-job="') == 1
    assert f'<tr data-job="{rare.id}">' in page
    assert "<td>done</td>" in page
    busy = html(task_page(admin_client, "default", TASK))
    assert busy.count('<tr data-job="') == RECENT
    assert f"The last {RECENT} jobs of this task to start or end a run" in busy
    keys = HistoryKeys(queue.keys)
    for task in (TASK, "tests.tasks.tracked"):
        assert_kept_a_day(backend.client, keys.recent(task))
        assert_under_hash_tag(queue, keys.recent(task))
    assert backend.client.zcard(keys.recent(TASK)) == RECENT


def test_recent_jobs_no_longer_kept_are_counted_not_shown(
    queue: Queue, admin_client: Client
) -> None:
    failed = queue.enqueue("tests.tasks.boom")  # retried in a minute: scheduled
    kept = queue.enqueue("tests.tasks.boom")
    run_worker()
    recording.RECORDER.flush()
    page = html(task_page(admin_client, "default", "tests.tasks.boom"))
    assert page.count("<td>scheduled</td><td>ended ") == 2
    assert queue.delete(failed.id)
    page = html(task_page(admin_client, "default", "tests.tasks.boom"))
    assert page.count('<tr data-job="') == 1
    assert f'<tr data-job="{kept.id}">' in page
    assert "1 of its recent jobs is no longer kept" in page
    assert queue.delete(kept.id)
    page = html(task_page(admin_client, "default", "tests.tasks.boom"))
    assert "2 of its recent jobs are no longer kept" in page
    assert '<tr><td colspan="5">None.</td></tr>' in page


def test_an_unreadable_recent_jobs_index_is_skipped_never_a_500(
    queue: Queue, backend: Backend, admin_client: Client
) -> None:
    job = queue.enqueue(TASK, args=[1])
    run_worker()
    recording.RECORDER.flush()
    keys = HistoryKeys(queue.keys)
    planted = {b"\xff<b>": 1, b"<script>{x}": 2, b"": 3}
    backend.client.zadd(keys.recent(TASK), planted)
    response = task_page(admin_client, "default", TASK)
    assert response.status_code == 200
    page = html(response)
    assert "3 unreadable entries in this task's recent jobs were skipped" in page
    assert f'<tr data-job="{job.id}">' in page
    assert "<script>" not in page
    backend.client.delete(keys.recent(TASK))
    backend.client.hset(keys.recent(TASK), "a", "b")
    response = task_page(admin_client, "default", TASK)
    assert response.status_code == 200
    page = html(response)
    assert "1 unreadable entry in this task's recent jobs was skipped" in page
    assert "1 run, 0 failed" in page  # the rest of the page shows
    assert '<tr><td colspan="5">None.</td></tr>' in page


def test_redis_unreachable_is_shown_not_a_500(admin_client: Client, settings: Any) -> None:
    settings.REDISLOCK = {"URL": f"redis://127.0.0.1:{free_port()}/0", "QUEUES": QUEUES}
    for response in (admin_client.get(url("tasks")), task_page(admin_client, "default", TASK)):
        assert response.status_code == 503
        assert "Redis could not be read" in html(response)
