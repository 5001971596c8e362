"""The admin pages through the test client, on fakeredis, a real redis-server and a Cluster."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from django_redislock import Lock, get_queue
from django_redislock.locks import listing
from django_redislock.locks.listing import describe_lock, list_locks
from django_redislock.queue.queue import Queue
from django_redislock.queue.worker.loop import Worker
from django_redislock.templatetags.redislock_admin import duration
from tests.support.counts import job_counts
from tests.support.fixtures import Backend
from tests.support.servers import free_port

pytestmark = pytest.mark.django_db

QUEUES = {
    "default": {"LEASE": 30, "MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 60},
    "emails": {"LEASE": 30},
    # A worker of this queue heartbeats every 0.1 s, so its registry entry lasts 1 s.
    "fast": {"LEASE": 0.3, "MAX_ATTEMPTS": 1},
}
PAGES = ["dashboard_changelist", "locks", "workers", "stocks", "semaphores", "schedule"]


def url(name: str, *args: str) -> str:
    return reverse(f"admin:django_redislock_{name}", args=args)


def page_urls() -> list[str]:
    return [url(name) for name in PAGES] + [
        url("jobs", "default", "dead"),
        url("jobs", "default", "done"),
        url("job", "default") + "?id=some-job",
    ]


def staff_client(django_user_model: Any, *codenames: str, **client_options: Any) -> Client:
    user = django_user_model.objects.create_user(f"staff-{'-'.join(codenames)}", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="django_redislock", codename__in=codenames
        )
    )
    client = Client(**client_options)
    client.force_login(user)
    return client


@pytest.fixture
def viewer(django_user_model: Any) -> Client:
    return staff_client(django_user_model, "view_dashboard")


@pytest.fixture
def operator(django_user_model: Any) -> Client:
    return staff_client(django_user_model, "view_dashboard", "release_lock", "manage_queues")


@pytest.fixture
def held(backend: Backend) -> Iterator[Lock]:
    lock = Lock("flash-sale:42", ttl=60, fencing=True)
    assert lock.acquire()
    yield lock
    if lock.owned():
        lock.release()


def html(response: Any) -> str:
    return str(response.content.decode())


def cell(response: Any, queue: str, state: str) -> str:
    row = re.search(rf'<tr data-queue="{queue}">(.*?)</tr>', html(response), re.S)
    assert row, html(response)
    found = re.search(rf'data-state="{state}">(?:<a href="[^"]*">)?([^<]*)<', row.group(1))
    assert found
    return found.group(1)


def rows(response: Any, table: str) -> int:
    body = re.search(rf'<table id="{table}".*?<tbody>(.*?)</tbody>', html(response), re.S)
    assert body
    return body.group(1).count('<th scope="row">')


def dead_job(queue: Queue, job_id: str) -> None:
    queue.enqueue("tests.tasks.boom", job_id=job_id, priority=100)  # popped first
    [popped] = queue.pop()
    assert popped.id == job_id
    queue.bury(popped, ValueError("card declined"), "Traceback (most recent call last):\n  …")


def confirm_and_post(client: Client, action: str, **fields: str) -> Any:
    """GET the confirmation page like a browser, then submit its form (with its token)."""
    page = client.get(url("confirm", action), {**fields, "next": url("dashboard_changelist")})
    assert page.status_code == 200, html(page)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html(page))
    assert token
    post = {**fields, "next": url("dashboard_changelist"), "csrfmiddlewaretoken": token.group(1)}
    return client.post(url("action", action), post, follow=True)


# --- access -------------------------------------------------------------------------------


def test_anonymous_is_sent_to_the_admin_login(client: Client) -> None:
    for target in [*page_urls(), url("confirm", "release") + "?name=x"]:
        response = client.get(target)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))
    response = client.post(url("action", "release"), {"name": "x"})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_admin_index_links_the_dashboard_only_for_those_allowed(
    viewer: Client, django_user_model: Any
) -> None:
    assert url("dashboard_changelist") in html(viewer.get(reverse("admin:index")))
    other = staff_client(django_user_model)
    assert url("dashboard_changelist") not in html(other.get(reverse("admin:index")))


def test_staff_without_the_permission_gets_403(django_user_model: Any) -> None:
    client = staff_client(django_user_model)
    for target in page_urls():
        assert client.get(target).status_code == 403
    assert client.get(url("confirm", "purge"), {"queue": "default"}).status_code == 403
    assert client.post(url("action", "purge"), {"queue": "default"}).status_code == 403


def test_viewer_sees_the_pages_without_buttons_and_cannot_act(
    queue: Queue, held: Lock, viewer: Client
) -> None:
    queue.enqueue("tests.tasks.record", job_id="later", delay=600)
    dead_job(queue, "failed")
    locks = viewer.get(url("locks"))
    assert locks.status_code == 200
    assert "flash-sale:42" in html(locks)
    assert "Force release" not in html(locks)
    for state, job_id in [("scheduled", "later"), ("dead", "failed")]:
        page = viewer.get(url("jobs", "default", state))
        assert job_id in html(page)
        for label in ["Run now", "Retry", "Delete", "Purge dead jobs"]:
            assert label not in html(page)
    assert viewer.get(url("confirm", "release"), {"name": held.name}).status_code == 403
    for action, fields in [
        ("release", {"name": held.name}),
        ("run", {"queue": "default", "job": "later"}),
        ("retry", {"queue": "default", "job": "failed"}),
        ("delete", {"queue": "default", "job": "failed"}),
        ("purge", {"queue": "default"}),
    ]:
        assert viewer.post(url("action", action), fields).status_code == 403
    assert held.owned()
    assert queue.counts() == job_counts(scheduled=1, dead=1)
    assert not LogEntry.objects.exists()


def test_get_on_an_action_url_is_405(admin_client: Client) -> None:
    for action in ["release", "run", "retry", "delete", "purge"]:
        assert admin_client.get(url("action", action)).status_code == 405


def test_post_without_csrf_token_is_403(backend: Backend, held: Lock, admin_user: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    response = client.post(url("action", "release"), {"name": held.name})
    assert response.status_code == 403
    assert held.owned()
    assert not LogEntry.objects.exists()


def test_unknown_action_queue_or_state_is_404(admin_client: Client) -> None:
    assert admin_client.get(url("confirm", "flush")).status_code == 404
    assert admin_client.post(url("action", "purge"), {"queue": "nope"}).status_code == 404
    assert admin_client.get(url("jobs", "nope", "dead")).status_code == 404
    assert admin_client.get(url("jobs", "default", "finished")).status_code == 404


# --- actions ------------------------------------------------------------------------------


def test_force_release_frees_the_lock_and_is_logged(
    backend: Backend, held: Lock, admin_user: Any
) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    confirm = client.get(url("confirm", "release"), {"name": held.name})
    assert "flash-sale:42" in html(confirm)
    assert "Yes, force release" in html(confirm)
    crumbs = html(confirm).split('class="breadcrumbs"')[1].split("</div>")[0]
    assert f'<a href="{url("locks")}">Locks</a>' in crumbs  # back where it came from
    assert held.owned()  # the confirmation page changed nothing
    done = confirm_and_post(client, "release", name=held.name)
    assert done.status_code == 200
    assert "was force-released" in html(done)
    assert describe_lock(held.name) is None
    assert not held.owned()
    entry = LogEntry.objects.get()
    assert (entry.user, entry.action_flag, entry.object_repr) == (
        admin_user,
        DELETION,
        "lock flash-sale:42",
    )
    assert "force-released" in entry.get_change_message()
    assert "lock flash-sale:42" in html(client.get(reverse("admin:index")))  # recent actions


def test_force_release_of_a_lock_no_longer_held_does_nothing(
    backend: Backend, admin_client: Client
) -> None:
    page = admin_client.get(url("confirm", "release"), {"name": "gone"}, follow=True)
    assert "is not held any more" in html(page)
    done = admin_client.post(url("action", "release"), {"name": "gone"}, follow=True)
    assert "nothing was done" in html(done)
    assert not LogEntry.objects.exists()


def test_run_now_makes_a_scheduled_job_ready(queue: Queue, admin_user: Any) -> None:
    queue.enqueue("tests.tasks.record", args=[5], job_id="close:7", delay=3600)
    client = Client()
    client.force_login(admin_user)
    page = client.get(url("jobs", "default", "scheduled"))
    assert "close:7" in html(page)
    assert "in 59 min" in html(page)
    assert "Run now" in html(page)
    done = confirm_and_post(client, "run", queue="default", job="close:7")
    assert "made ready to run now" in html(done)
    assert queue.get("close:7").state == "ready"
    entry = LogEntry.objects.get()
    assert (entry.action_flag, entry.object_id) == (CHANGE, "default:close:7")


def test_retry_requeues_a_dead_job_with_attempts_reset(queue: Queue, admin_client: Client) -> None:
    dead_job(queue, "failed")
    page = admin_client.get(url("jobs", "default", "dead"))
    assert "ValueError: card declined" in html(page)
    detail = admin_client.get(url("job", "default"), {"id": "failed"})  # the traceback's page
    assert "Traceback (most recent call last)" in html(detail)
    done = confirm_and_post(admin_client, "retry", queue="default", job="failed")
    assert "was requeued" in html(done)
    job = queue.get("failed")
    assert (job.state, job.attempts) == ("ready", 0)
    assert LogEntry.objects.get().action_flag == CHANGE


@pytest.mark.parametrize("state", ["ready", "scheduled", "dead"])
def test_delete_removes_a_job(queue: Queue, admin_client: Client, state: str) -> None:
    if state == "dead":
        dead_job(queue, "doomed")
    else:
        queue.enqueue(
            "tests.tasks.record", job_id="doomed", delay=600 if state == "scheduled" else 0
        )
    assert queue.get("doomed").state == state
    done = confirm_and_post(admin_client, "delete", queue="default", job="doomed")
    assert "was deleted" in html(done)
    assert queue.counts() == job_counts()
    assert "doomed" not in html(admin_client.get(url("jobs", "default", state)))
    assert LogEntry.objects.get().action_flag == DELETION


def test_a_running_job_is_not_deleted(queue: Queue, admin_client: Client) -> None:
    queue.enqueue("tests.tasks.record", job_id="busy")
    queue.pop(worker="w1")
    page = admin_client.get(url("jobs", "default", "running"))
    assert "busy" in html(page)
    assert "Delete" not in html(page)
    confirm = admin_client.get(
        url("confirm", "delete"), {"queue": "default", "job": "busy"}, follow=True
    )
    assert "is running now" in html(confirm)
    done = admin_client.post(
        url("action", "delete"), {"queue": "default", "job": "busy"}, follow=True
    )
    assert "nothing was deleted" in html(done)
    assert queue.get("busy").state == "running"
    assert not LogEntry.objects.exists()


def test_stop_asks_a_running_job_to_stop_and_names_the_admin(
    queue: Queue, admin_client: Client
) -> None:
    queue.enqueue("tests.tasks.record", job_id="busy")
    [job] = queue.pop(worker="w1")
    page = admin_client.get(url("jobs", "default", "running"))
    assert "Stop" in html(page)
    done = confirm_and_post(admin_client, "cancel", queue="default", job="busy")
    assert "was asked to stop" in html(done)
    assert LogEntry.objects.get().action_flag == CHANGE
    assert queue.renew_leases([job])[1] == ["busy"]  # its worker is told at its renewal
    queue.fail(job, "JobCancelled: stopped")
    dead = queue.get("busy")
    assert dead.state == "dead"
    assert dead.error.startswith("Cancelled by admin ")
    again = admin_client.post(
        url("action", "cancel"), {"queue": "default", "job": "busy"}, follow=True
    )
    assert "is dead now" in html(again)  # nothing more to stop


def test_purge_deletes_every_dead_job(queue: Queue, admin_client: Client) -> None:
    for i in range(3):
        dead_job(queue, f"dead-{i}")
    queue.enqueue("tests.tasks.record", job_id="alive", delay=600)
    page = admin_client.get(url("jobs", "default", "dead"))
    assert "Purge dead jobs" in html(page)
    confirm = admin_client.get(url("confirm", "purge"), {"queue": "default"})
    assert "Delete all 3 dead jobs" in html(confirm)
    done = confirm_and_post(admin_client, "purge", queue="default")
    assert "3 dead jobs of queue “default” deleted" in html(done)
    assert queue.counts() == job_counts(scheduled=1)
    entry = LogEntry.objects.get()
    assert (entry.action_flag, entry.object_repr) == (DELETION, "dead jobs of queue default")


def test_after_an_action_only_a_local_next_is_followed(queue: Queue, admin_client: Client) -> None:
    queue.enqueue("tests.tasks.record", job_id="a", delay=600)
    fields = {"queue": "default", "job": "a"}
    evil = admin_client.post(url("action", "delete"), {**fields, "next": "https://evil.example/"})
    assert evil["Location"] == url("dashboard_changelist")
    queue.enqueue("tests.tasks.record", job_id="a", delay=600)
    back = url("jobs", "default", "scheduled") + "?p=1"
    local = admin_client.post(url("action", "delete"), {**fields, "next": back})
    assert local["Location"] == back


# --- pages --------------------------------------------------------------------------------


def test_locks_page_paginates_and_searches_by_prefix(
    backend: Backend, admin_client: Client
) -> None:
    locks = [Lock(f"shop:{i}", ttl=60) for i in range(55)] + [
        Lock(f"cart:{i}", ttl=60) for i in range(3)
    ]
    for lock in locks:
        assert lock.acquire()
    try:
        first = admin_client.get(url("locks"))
        assert "58 locks held" in html(first)
        assert "page 1 of 2" in html(first)
        assert rows(first, "locks") == 50
        assert "Force release" in html(first)
        second = admin_client.get(url("locks"), {"p": "2"})
        assert rows(second, "locks") == 8
        beyond = admin_client.get(url("locks"), {"p": "9"})
        assert "page 2 of 2" in html(beyond)
        assert rows(beyond, "locks") == 8
        carts = admin_client.get(url("locks"), {"q": "cart:"})
        assert "3 locks held" in html(carts)
        assert rows(carts, "locks") == 3
        assert "shop:" not in re.sub(r'value="[^"]*"', "", html(carts).split("<tbody>")[1])
        assert "pid" in html(carts)
        none = admin_client.get(url("locks"), {"q": "nothing:"})
        assert "No held lock" in html(none)
    finally:
        for lock in locks:
            lock.release()


def test_lock_pages_follow_one_another_at_any_depth(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Deep pages on Cluster are found by counting; make every page past the first deep.
    monkeypatch.setattr(listing, "DEEP_OFFSET", 0)
    locks = [Lock(f"page:{i}", ttl=30 + i % 7) for i in range(130)]
    for lock in locks:
        assert lock.acquire()
    try:
        everything = [info.name for info in list_locks(limit=1000).locks]
        assert sorted(everything) == sorted(lock.name for lock in locks)
        pages = [list_locks(offset=offset, limit=25) for offset in range(0, 150, 25)]
        assert [info.name for page in pages for info in page.locks] == everything
        assert {page.total for page in pages} == {130}
    finally:
        for lock in locks:
            lock.release()


def test_locks_page_shows_owner_ttl_fence_and_waiters(
    backend: Backend, admin_client: Client, held: Lock
) -> None:
    # The lock is taken after the login (and the test database's setup, when this test runs
    # first), so the page shows it with nearly all of its 60 s.
    page = html(admin_client.get(url("locks")))
    assert f"(pid {os.getpid()})" in page
    assert str(held.fence) in page
    assert re.search(r"\b(59|60)\.?\d* s|1 min", page)


def test_queues_page_shows_counts_and_the_oldest_ready_age(
    queue: Queue, admin_client: Client
) -> None:
    now = datetime.now(timezone.utc)
    # The oldest ready job has a low priority, so it is not the head of the ready set.
    queue.enqueue("tests.tasks.record", job_id="old", at=now - timedelta(seconds=150), priority=-5)
    queue.enqueue(
        "tests.tasks.record", job_id="urgent", at=now - timedelta(seconds=20), priority=50
    )
    queue.enqueue("tests.tasks.record", job_id="soon", priority=0)
    queue.enqueue("tests.tasks.record", job_id="later", delay=600)
    dead_job(queue, "failed")
    assert [job.id for job in queue.pop()] == ["urgent"]
    assert queue.counts() == job_counts(ready=2, scheduled=1, running=1, dead=1)
    page = admin_client.get(url("dashboard_changelist"))
    assert page.status_code == 200
    counts = {s: cell(page, "default", s) for s in ["ready", "scheduled", "running", "dead"]}
    assert counts == {"ready": "2", "scheduled": "1", "running": "1", "dead": "1"}
    assert cell(page, "default", "oldest") == "2 min 30 s"
    assert cell(page, "emails", "ready") == "0"
    assert cell(page, "emails", "oldest") == "—"


def test_jobs_page_paginates(queue: Queue, admin_client: Client) -> None:
    queue.enqueue_many(
        [
            {"task": "tests.tasks.record", "args": [i], "job_id": f"j{i}", "delay": 60 + i}
            for i in range(60)
        ]
    )
    first = admin_client.get(url("jobs", "default", "scheduled"))
    assert "60 scheduled jobs" in html(first)
    assert rows(first, "jobs") == 50
    assert 'data-job="j0"' in html(first)
    second = admin_client.get(url("jobs", "default", "scheduled"), {"p": "2"})
    assert rows(second, "jobs") == 10
    assert 'data-job="j59"' in html(second)
    assert 'data-job="j0"' not in html(second)


def test_workers_page_shows_live_workers_only(queue: Queue, admin_client: Client) -> None:
    fast = get_queue("fast")
    gone = Worker(["fast"])
    gone.heartbeat()  # and never again, as if it had been killed
    assert gone.id in html(admin_client.get(url("workers")))
    live = Worker(["fast", "emails"], concurrency=2)
    thread = threading.Thread(target=live.run)
    thread.start()
    try:
        fast.enqueue_many(
            [
                {"task": "tests.tasks.record", "args": [1]},
                {"task": "tests.tasks.boom"},
                {"task": "tests.tasks.slow", "args": [2, 2.0], "job_id": "in-hand"},
            ]
        )
        deadline = time.monotonic() + 10
        while True:
            page = html(admin_client.get(url("workers")))
            row = re.search(rf'<tr data-worker="{re.escape(live.id)}">(.*?)</tr>', page, re.S)
            counts = row and re.findall(r'<td class="num">(\d+)</td>', row.group(1))[-2:]
            if row and "in-hand" in row.group(1) and counts == ["1", "1"] and gone.id not in page:
                break  # processed 1, failed 1
            assert time.monotonic() < deadline, page
            time.sleep(0.05)
        assert "fast, emails" in row.group(1)
        assert re.search(r"\d+ ms ago", row.group(1))
        assert "1 live worker." in page
    finally:
        live.stop()
        thread.join(10)


def test_pages_refresh_themselves_until_paused(backend: Backend, admin_client: Client) -> None:
    live = html(admin_client.get(url("locks")))
    assert '<meta http-equiv="refresh" content="5">' in live
    assert "Pause auto-refresh" in live
    paused = html(admin_client.get(url("locks"), {"refresh": "off"}))
    assert 'http-equiv="refresh"' not in paused
    assert "Resume auto-refresh" in paused


def test_redis_unreachable_is_shown_not_a_500(admin_client: Client, settings: Any) -> None:
    settings.REDISLOCK = {
        "URL": f"redis://127.0.0.1:{free_port()}/0",
        "QUEUES": QUEUES,
        "SCHEDULE": {"s": {"task": "tests.tasks.record", "every": 60}},
    }
    for target in page_urls():
        response = admin_client.get(target)
        assert response.status_code == 503
        assert "Redis could not be read" in html(response)
        assert "Connection refused" in html(response)
    confirm = admin_client.get(url("confirm", "release"), {"name": "x"})
    assert confirm.status_code == 503
    done = admin_client.post(url("action", "purge"), {"queue": "default"}, follow=True)
    assert "Nothing was done: Redis failed" in html(done)
    assert not LogEntry.objects.exists()


def test_durations_read_like_a_person_would_say_them() -> None:
    assert [duration(s) for s in [None, 0.25, 4.56, 59, 75, 3600, 3720, 90000]] == [
        "—",
        "250 ms",
        "4.6 s",
        "59 s",
        "1 min 15 s",
        "1 h",
        "1 h 2 min",
        "1 d 1 h",
    ]


# --- the queue operations the pages rely on -----------------------------------------------


def test_queue_delete_removes_ready_scheduled_and_dead_jobs_but_not_running(queue: Queue) -> None:
    queue.enqueue("t", job_id="x")
    queue.pop()
    queue.enqueue("t", job_id="r")
    queue.enqueue("t", job_id="s", delay=60)
    dead_job(queue, "d")
    assert not queue.delete("x")  # running
    assert queue.delete("r")
    assert queue.delete("s")
    assert queue.delete("d")
    assert not queue.delete("d")
    assert not queue.delete("missing")
    assert queue.counts() == job_counts(running=1)


def test_queue_oldest_ready_age(queue: Queue) -> None:
    assert queue.oldest_ready_age() is None
    now = datetime.now(timezone.utc)
    for priority, seconds in [(100, 5), (-100, 40), (0, 10), (-100, 1)]:
        queue.enqueue("t", at=now - timedelta(seconds=seconds), priority=priority)
    age = queue.oldest_ready_age()
    assert age is not None
    assert 39.5 < age < 45
