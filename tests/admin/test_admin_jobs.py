"""The admin's fuller job pages (issue 16): finished jobs and their index, a job in full,
running jobs left by their worker and "Requeue now", bulk actions on dead jobs."""

from __future__ import annotations

import html as html_lib
import os
import re
import signal
import time
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.test import Client

from django_redislock import get_queue
from django_redislock.queue.queue import Queue
from django_redislock.queue.worker.loop import Worker
from django_redislock.queue.worker.registry import Heartbeat
from tests.support.fixtures import Backend, Processes

from .test_admin import QUEUES, confirm_and_post, dead_job, html, rows, staff_client, url

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(backend: Backend, settings: Any) -> Queue:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    return get_queue("default")


@pytest.fixture
def viewer(django_user_model: Any) -> Client:
    return staff_client(django_user_model, "view_dashboard")


def finish(queue: Queue, job_id: str, result: str, **options: Any) -> None:
    queue.enqueue("tests.tasks.record", job_id=job_id, priority=100, **options)
    [job] = queue.pop(worker="w")
    assert job.id == job_id
    assert queue.ack(job, result)


def wait_for(predicate: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


# --- finished jobs ------------------------------------------------------------------------


def test_finished_jobs_are_listed_newest_first_with_their_result(
    queue: Queue, admin_client: Client
) -> None:
    finish(queue, "first", '{"total": 1}', args=[1])
    finish(queue, "second", '"ok"', kwargs={"order": 7})
    queue.enqueue("tests.tasks.record", job_id="no-result")
    [job] = queue.pop()
    assert queue.ack(job)  # no result kept: not listed
    assert queue.counts(done=True)["done"] == 2
    assert [j.id for j in queue.jobs("done")] == ["second", "first"]
    assert queue.jobs("done", 1, 1)[0].result == '{"total": 1}'
    page = admin_client.get(url("jobs", "default", "done"))
    assert page.status_code == 200
    assert "Finished (2)" in html(page)
    assert "2 finished jobs" in html(page)
    assert rows(page, "jobs") == 2
    assert "{&quot;total&quot;: 1}" in html(page)
    dashboard = html(admin_client.get(url("dashboard_changelist")))
    assert re.search(r'data-state="done"><a href="[^"]*">2<', dashboard)


def test_the_done_index_is_trimmed_of_what_result_ttl_no_longer_keeps(
    redis_backend: Backend, settings: Any
) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"RESULT_TTL": 1}}}
    queue = get_queue()
    finish(queue, "old", "1")
    index = queue.keys.done
    assert redis_backend.client.zcard(index) == 1
    # Entries left from long ago (a server restored, a TTL shortened): at most a thousand
    # more than are added go per call, so one call stays short.
    redis_backend.client.zadd(index, {f"stale-{i}": 1000 + i for i in range(1500)})
    time.sleep(1.05)  # "old" expired too
    assert queue.counts(done=True)["done"] == 0
    finish(queue, "new", "2")
    assert redis_backend.client.zcard(index) == 1501 - 1001 + 1
    finish(queue, "newer", "3")
    assert sorted(redis_backend.client.zrange(index, 0, -1)) == [b"new", b"newer"]
    assert [job.id for job in queue.jobs("done")] == ["newer", "new"]


# --- one job in full ----------------------------------------------------------------------


def test_the_job_page_shows_everything_a_job_keeps(
    queue: Queue, admin_client: Client, viewer: Client
) -> None:
    queue.enqueue(
        "tests.tasks.boom", args=[1, "two"], kwargs={"order": 7}, job_id="twice", priority=100
    )
    [job] = queue.pop(worker="worker-a")
    queue.fail(job, ValueError("first failure"), "Traceback (first)")
    queue.requeue("twice")  # scheduled by the backoff: run it now
    [job] = queue.pop(worker="worker-b")
    queue.fail(job, KeyError("second failure"), "Traceback (second)")
    page = admin_client.get(url("job", "default"), {"id": "twice"})
    assert page.status_code == 200
    text = html(page)
    for shown in [
        "tests.tasks.boom",
        "[1, &quot;two&quot;]",
        "{&quot;order&quot;: 7}",
        "ValueError: first failure",
        "Traceback (first)",
        "KeyError: ",
        "Traceback (second)",
        "worker-a",
        "worker-b",
        "Failed attempts (2)",
        "builtins.ValueError",
    ]:
        assert shown in text, shown
    assert re.search(r'data-field="state"><strong>dead<', text)
    assert re.search(r'data-field="attempts">2<', text)
    seen = html(viewer.get(url("job", "default"), {"id": "twice"}))
    assert "Traceback (second)" in seen
    for label in ["Retry", "Delete"]:
        assert f">{label}</a>" in text
        assert f">{label}</a>" not in seen
    finish(queue, "paid", '{"receipt": "r-1"}')
    done = html(admin_client.get(url("job", "default"), {"id": "paid"}))
    assert "{&quot;receipt&quot;: &quot;r-1&quot;}" in done
    assert re.search(r'data-field="state"><strong>finished<', done)
    assert 'http-equiv="refresh"' not in done  # it cannot change: not reloaded under its reader
    assert "auto-refresh" not in done
    queue.enqueue("tests.tasks.record", job_id="pending", delay=60)
    pending = html(admin_client.get(url("job", "default"), {"id": "pending"}))
    assert 'http-equiv="refresh"' in pending
    missing = admin_client.get(url("job", "default"), {"id": "never"})
    assert missing.status_code == 200
    assert "No job <code>never</code>" in html(missing)
    assert admin_client.get(url("job", "default")).status_code == 404
    assert admin_client.get(url("job", "nope"), {"id": "x"}).status_code == 404


HOSTILE_IDS = [
    "a/b/../../c",
    "x?y=1#frag&z=%2F%00",
    '"><script>alert(1)</script>',
    "' onmouseover='alert(1)",
    "é" * 200,
]


def test_hostile_ids_neither_break_the_links_nor_inject_html(
    queue: Queue, admin_client: Client
) -> None:
    for job_id in HOSTILE_IDS:
        dead_job(queue, job_id)
    listing = html(admin_client.get(url("jobs", "default", "dead")))
    assert "<script>alert" not in listing
    assert "onmouseover='alert" not in listing
    links = re.findall(r'<th scope="row"><a href="([^"]+)"', listing)
    assert len(links) == len(HOSTILE_IDS)
    for link in links:
        page = admin_client.get(html_lib.unescape(link))
        assert page.status_code == 200
        text = html(page)
        assert "No job" not in text
        assert "<script>alert" not in text
        assert re.search(r'data-field="state"><strong>dead<', text)
    # A 10 kB id (longer than any job id) in the query: a clear "no job", not an error.
    long = admin_client.get(url("job", "default"), {"id": "<b>" * 3400})
    assert long.status_code == 200
    assert "<b><b>" not in html(long)


# --- running jobs left behind -------------------------------------------------------------


def test_a_job_whose_worker_is_gone_is_flagged_and_requeued_but_never_a_live_ones(
    queue: Queue, admin_client: Client, viewer: Client
) -> None:
    live = Heartbeat(queue.client, "live-worker", 60, lambda: {"id": "live-worker"})
    live.beat()
    queue.enqueue("tests.tasks.record", job_id="alive", priority=100)
    queue.pop(worker="live-worker")
    queue.enqueue("tests.tasks.record", job_id="orphan", priority=100)
    queue.pop(worker="ghost")  # a worker id with no registry entry: killed, or gone...
    now_ms = queue.client.time()[0] * 1000
    # ... and its lease last renewed 20 s ago (of 30 s): a live worker renews every 5 s.
    queue.client.zadd(queue.keys.run, {"orphan": now_ms - 20_000 + 30_000}, xx=True)
    queue.enqueue("tests.tasks.record", job_id="renewed", priority=100)
    [renewed] = queue.pop(worker="unlisted")  # no registry entry, but renewed just now
    queue.enqueue("tests.tasks.record", job_id="popped")
    queue.pop()  # by plain code, no worker: only its lease could say
    page = html(admin_client.get(url("jobs", "default", "running")))
    flagged = re.findall(r'<tr data-job="([^"]+)" class="left-behind">', page)
    assert flagged == ["orphan"]
    assert not queue.requeue_running(renewed, lease_ran_out=False)  # Redis checks it too
    assert not queue.requeue_running(renewed, lease_ran_out=True)
    assert "its worker ghost is gone" in page
    assert page.count(">Requeue now</a>") == 1
    assert ">Requeue now</a>" not in html(viewer.get(url("jobs", "default", "running")))
    fields = {"queue": "default", "job": "orphan"}
    assert viewer.post(url("action", "requeue_running"), fields).status_code == 403
    refused = confirm_and_post_anyway(admin_client, "requeue_running", "alive")
    assert "runs under a live worker that renews its lease" in html(refused)
    assert queue.get("alive").state == "running"
    done = confirm_and_post(admin_client, "requeue_running", **fields)
    assert "was made ready again" in html(done)
    job = queue.get("orphan")
    assert (job.state, job.lease, job.attempts) == ("ready", None, 1)
    assert "its worker is gone; requeued from the admin" in job.errors[-1].error
    assert (job.failures, job.reason) == (1, "retry 1 (requeued from the admin)")
    assert LogEntry.objects.get().action_flag == CHANGE
    assert {j.id for j in queue.jobs("running")} == {"alive", "renewed", "popped"}


def confirm_and_post_anyway(client: Client, action: str, job_id: str) -> Any:
    """POST an action on a job the page did not offer it for (a forged or stale form)."""
    confirm = client.get(url("confirm", action), {"queue": "default", "job": job_id}, follow=True)
    assert "not requeued" in html(confirm)  # the confirmation is refused too
    return client.post(url("action", action), {"queue": "default", "job": job_id}, follow=True)


def run_worker() -> None:
    Worker(["default"]).run()


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)  # a fork closes the parent's database connection
def test_a_killed_workers_job_is_flagged_once_its_lease_runs_out_and_requeued(
    real_backend: Backend, settings: Any, processes: Processes, admin_client: Client
) -> None:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": 1, "MAX_ATTEMPTS": 3}},
    }
    queue = get_queue()
    victim = processes.start(run_worker)
    # (its own max_attempts, which the error names: not the queue's)
    queue.enqueue("tests.tasks.slow", args=[1, 30], job_id="in-hand", max_attempts=5)
    wait_for(lambda: queue.counts()["running"] == 1 and queue.get("in-hand").attempts == 1)
    running = html(admin_client.get(url("jobs", "default", "running")))
    assert "left-behind" not in running  # its worker is alive and renews its lease
    assert ">Requeue now</a>" not in running
    assert victim.pid
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(5)
    wait_for(
        lambda: "its lease ran out" in html(admin_client.get(url("jobs", "default", "running")))
    )
    done = confirm_and_post(admin_client, "requeue_running", queue="default", job="in-hand")
    assert "was made ready again" in html(done)
    job = queue.get("in-hand")
    assert (job.state, job.attempts) == ("ready", 1)
    assert "Attempt 1 of 5 ended without an outcome" in job.error
    assert queue.counts()["running"] == 0


# --- dead jobs in bulk --------------------------------------------------------------------


def post_bulk(client: Client, action: str, ids: list[str], **extra: str) -> Any:
    data = {"queue": "default", "job": ids, "next": url("jobs", "default", "dead"), **extra}
    return client.post(url("bulk", action), data, follow=True)


def test_dead_jobs_checked_are_retried_or_deleted_after_a_confirmation(
    queue: Queue, admin_client: Client, viewer: Client
) -> None:
    for job_id in ["d1", "d2", "d3", "d4"]:
        dead_job(queue, job_id)
    page = html(admin_client.get(url("jobs", "default", "dead")))
    assert page.count('name="job" value=') == 4
    assert "Retry all dead jobs" in page
    assert 'name="job"' not in html(viewer.get(url("jobs", "default", "dead")))
    assert post_bulk(viewer, "retry_dead", ["d1"]).status_code == 403
    confirm = html(post_bulk(admin_client, "retry_dead", ["d1", "d2", "gone"]))
    assert "Run the 2 dead jobs of queue “default” checked again now" in confirm
    assert queue.counts()["dead"] == 4  # not yet: only asked
    done = html(post_bulk(admin_client, "retry_dead", ["d1", "d2"], confirmed="1"))
    assert "2 dead jobs of queue “default” requeued." in done
    assert {j.id for j in queue.jobs("ready")} == {"d1", "d2"}
    assert queue.get("d1").attempts == 0
    done = html(post_bulk(admin_client, "delete_dead", ["d3", "d1"], confirmed="1"))
    assert "1 dead job of queue “default” deleted." in done
    assert [j.id for j in queue.jobs("dead")] == ["d4"]
    assert [e.action_flag for e in LogEntry.objects.order_by("pk")] == [CHANGE, DELETION]
    assert post_bulk(admin_client, "retry_dead", [f"x{i}" for i in range(101)]).status_code == 400
    assert post_bulk(admin_client, "explode", ["d4"]).status_code == 404
    done = confirm_and_post(admin_client, "retry_all", queue="default")
    assert "1 dead job of queue “default” requeued." in html(done)
    assert queue.counts()["dead"] == 0


def test_a_bulk_post_without_csrf_token_is_403(queue: Queue, admin_user: Any) -> None:
    dead_job(queue, "d1")
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    response = client.post(
        url("bulk", "delete_dead"), {"queue": "default", "job": ["d1"], "confirmed": "1"}
    )
    assert response.status_code == 403
    assert queue.counts()["dead"] == 1


def test_retry_all_dead_steps_over_what_is_no_job(queue: Queue) -> None:
    for job_id in ["d1", "d2", "d3"]:
        dead_job(queue, job_id)
    queue.client.zadd(queue.keys.dead, {"not-a-hash": 0})
    queue.client.set(queue.keys.job("not-a-hash"), "x")
    assert queue.retry_all_dead(batch=2) == 3
    assert [j.id for j in queue.jobs("dead")] == ["not-a-hash"]


def test_the_job_page_shows_its_options_and_why_it_runs_next(
    queue: Queue, admin_client: Client
) -> None:
    queue.enqueue(
        "tests.retry_tasks.once", args=["k", 9], job_id="opts", max_attempts=5, retry_backoff=60
    )
    [job] = queue.pop(worker="worker-a")
    queue.fail(job, ValueError("first failure"), "Traceback (first)")
    text = html(admin_client.get(url("job", "default"), {"id": "opts"}))
    assert re.search(r'data-field="reason">retry 1<', text)
    assert re.search(r'data-field="failures">1 ', text)
    options = re.search(r'data-field="options">(.*?)</table>', text, re.S)
    assert options is not None
    rows_shown = re.findall(
        r"<tr><td><code>(\w+)</code></td><td>(.*?)</td><td class=\"quiet\">([\w ()]+)</td></tr>",
        options[1],
    )
    assert [(name, source) for name, _, source in rows_shown] == [
        ("max_attempts", "job"),
        ("retry_backoff", "job"),
        ("retry_backoff_max", "queue"),
        ("retry_on", "queue"),
        ("time_limit", "queue"),
    ]
    assert "<code>5</code>" in rows_shown[0][1]
    queue.enqueue("tests.retry_tasks.snoozing", args=["s", 1, 60], job_id="snoozed")
    [job] = queue.pop(worker="worker-a")
    queue.snooze(job, 60)
    snoozed = html(admin_client.get(url("job", "default"), {"id": "snoozed"}))
    assert re.search(r'data-field="reason">RetryLater<', snoozed)
    assert re.search(r'data-field="failures">0 ', snoozed)
    fresh = queue.enqueue("tests.retry_tasks.once", args=["f", 0])
    first = html(admin_client.get(url("job", "default"), {"id": fresh.id}))
    assert re.search(r'data-field="reason">its first run<', first)
    # a task's own option is shown as the task's
    assert re.search(
        r"<code>max_attempts</code></td><td><code>1</code></td><td class=\"quiet\">task<", first
    )
