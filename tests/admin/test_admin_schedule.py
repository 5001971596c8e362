"""The admin's SCHEDULE page: each entry with its last tick (as claimed in Redis), its next
one and its last run; an invalid entry is shown as such, never an error page. Pause, Resume
and Run now: permission, POST, CSRF, the admin log, and a run now's form sent twice
enqueueing one job."""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.test import Client
from django.utils.timezone import localtime

from django_redislock import get_queue, get_redis
from django_redislock.queue.worker.schedule import Scheduler
from django_redislock.queue.worker.schedule_keys import entry_keys
from django_redislock.queue.worker.schedule_state import entry_named, entry_states
from tests.support.fixtures import Backend
from tests.support.servers import free_port

from .test_admin import QUEUES, html, staff_client, url

pytestmark = pytest.mark.django_db

SCHEDULE = {
    "sweep-unpaid": {"task": "tests.tasks.record", "every": 60, "args": [1]},
    "nightly": {"task": "tests.tasks.record", "cron": "0 3 * * *", "queue": "emails"},
    "<b>broken</b>": {"task": "tests.tasks.record"},
    "elsewhere": {"task": "tests.tasks.record", "every": 5, "queue": "not-configured"},
}


def entry_row(page: str, name: str) -> str:
    row = re.search(rf'<tr data-entry="{re.escape(name)}">(.*?)</tr>', page, re.S)
    assert row, page
    return row.group(1)


def test_schedule_page_shows_each_entry_its_last_and_next_tick(
    backend: Backend, settings: Any, django_user_model: Any
) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES, "SCHEDULE": SCHEDULE}
    viewer = staff_client(django_user_model, "view_dashboard")
    if time.time() % 60 > 57:  # the page must be read within the minute of ``now``
        time.sleep(60 - time.time() % 60 + 0.05)
    now = time.time()
    before = html(viewer.get(url("schedule")))
    assert "none yet" in entry_row(before, "sweep-unpaid")
    scheduler = Scheduler()
    scheduler.run_pending(now - 120)  # a new entry claims its current tick, runs the next
    scheduler.run_pending(now)
    page = viewer.get(url("schedule"))
    assert page.status_code == 200
    text = html(page)
    sweep = entry_row(text, "sweep-unpaid")
    last = localtime(datetime.fromtimestamp(now // 60 * 60, tz=timezone.utc))  # as shown
    assert f"{last:%Y-%m-%d %H:%M:00}" in sweep
    assert "every 60 s" in sweep
    assert "is not enqueued" not in sweep
    following = localtime(datetime.fromtimestamp(now // 60 * 60 + 60, tz=timezone.utc))
    assert re.search(rf'data-field="next">{following:%Y-%m-%d %H:%M:00}<br>', sweep)
    nightly = entry_row(text, "nightly")
    assert "0 3 * * *" in nightly
    assert re.search(r'data-field="next">\d{4}-\d\d-\d\d 03:00:00<br>', nightly)
    assert "Invalid, it does not run: give exactly one of" in entry_row(
        text, "&lt;b&gt;broken&lt;/b&gt;"
    )
    assert "<b>broken" not in text
    assert "its queue &#x27;not-configured&#x27; is not in QUEUES" in entry_row(text, "elsewhere")
    # No scheduler looked since a tick passed: the page says so.
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "SCHEDULE": {"often": {"task": "tests.tasks.record", "every": 1}},
    }
    Scheduler().run_pending(now - 5)
    behind = html(viewer.get(url("schedule")))
    assert "is not enqueued: is a worker running the scheduler?" in entry_row(behind, "often")


def test_schedule_page_without_entries(backend: Backend, admin_client: Client) -> None:
    page = admin_client.get(url("schedule"))
    assert page.status_code == 200
    assert "No periodic job is configured" in html(page)
    assert 'class="current">Schedule</a>' in html(page)


# --- operating an entry: pause, resume, run now (issue 30) ---------------------------------

OPERATED = {
    "sweep-unpaid": {"task": "tests.tasks.record", "every": 60, "args": [1]},
    "nightly": {"task": "tests.tasks.record", "cron": "0 3 * * *", "queue": "emails"},
}


@pytest.fixture
def operated(backend: Backend, settings: Any) -> Backend:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES, "SCHEDULE": OPERATED}
    return backend


def manager(django_user_model: Any) -> Client:
    return staff_client(
        django_user_model, "view_dashboard", "manage_queues", enforce_csrf_checks=True
    )


def action_link(page: str, entry: str, label: str) -> str:
    """The confirmation link of button ``label`` in ``entry``'s row, unescaped."""
    found = re.search(rf'<a class="button" href="([^"]+)">{label}</a>', entry_row(page, entry))
    assert found, entry_row(page, entry)
    return found.group(1).replace("&amp;", "&")


def confirmed_form(client: Client, link: str) -> tuple[str, dict[str, str]]:
    """The confirmation page's form, as a browser would send it: its action and fields."""
    page = client.get(link)
    assert page.status_code == 200, html(page)
    action = re.search(r'<form method="post" action="([^"]+)">', html(page))
    assert action
    assert f'<a href="{url("schedule")}">Schedule</a>' in html(page)  # the way back
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', html(page)))
    return action.group(1), fields


def schedule_jobs(queue: str = "default") -> list[str]:
    return sorted(
        job.id for job in get_queue(queue).jobs("ready", 0, 100) if job.id.startswith("schedule:")
    )


def test_an_entry_is_paused_and_resumed_from_its_buttons_and_the_admin_log(
    operated: Backend, django_user_model: Any
) -> None:
    client = manager(django_user_model)
    Scheduler().run_pending(time.time() - 60)
    page = html(client.get(url("schedule")))
    assert 'data-field="state">Active' in entry_row(page, "sweep-unpaid")
    action, fields = confirmed_form(client, action_link(page, "sweep-unpaid", "Pause"))
    assert action == url("action", "schedule_pause")
    assert fields["entry"] == "sweep-unpaid"
    assert not entry_states([entry_named("sweep-unpaid")])[0].paused  # confirming changed nothing
    done = client.post(action, fields, follow=True)
    assert "Schedule entry “sweep-unpaid” was paused." in html(done)
    row = entry_row(html(done), "sweep-unpaid")
    assert '<strong class="flag">Paused</strong>' in row
    assert "by admin staff-view_dashboard-manage_queues" in row
    assert "none while paused" in row
    assert "Resume" in row
    assert 'data-field="state">Active' in entry_row(html(done), "nightly")  # the other runs on
    Scheduler().run_pending(time.time() + 120)  # its next ticks pass: none is enqueued
    assert schedule_jobs() == []
    logged = LogEntry.objects.get()
    assert (logged.object_id, logged.object_repr) == (
        "schedule:sweep-unpaid",
        "schedule entry sweep-unpaid",
    )
    assert logged.action_flag == CHANGE
    assert logged.change_message == "Schedule entry “sweep-unpaid” was paused."
    # The same form sent again changes nothing, and says so.
    again = client.post(action, fields, follow=True)
    assert "was paused already; nothing was done" in html(again)
    assert LogEntry.objects.count() == 1
    page = html(client.get(url("schedule")))
    action, fields = confirmed_form(client, action_link(page, "sweep-unpaid", "Resume"))
    done = client.post(action, fields, follow=True)
    assert "Schedule entry “sweep-unpaid” was resumed." in html(done)
    assert 'data-field="state">Active' in entry_row(html(done), "sweep-unpaid")
    assert LogEntry.objects.count() == 2


def test_run_now_enqueues_one_job_however_often_its_form_is_sent(
    operated: Backend, django_user_model: Any
) -> None:
    client = manager(django_user_model)
    page = html(client.get(url("schedule")))
    action, fields = confirmed_form(client, action_link(page, "sweep-unpaid", "Run now"))
    assert action == url("action", "schedule_run")
    assert fields["nonce"].isdigit()
    assert schedule_jobs() == []
    first = client.post(action, fields, follow=True)
    assert "was run now: job “schedule:sweep-unpaid:now:" in html(first)
    twice = client.post(action, fields, follow=True)  # a double click, a reload
    assert "was enqueued already (the form was sent twice)" in html(twice)
    assert schedule_jobs() == [f"schedule:sweep-unpaid:now:{fields['nonce']}"]
    job = get_queue().get(schedule_jobs()[0])
    assert (job.task, job.args) == ("tests.tasks.record", [1])
    logged = LogEntry.objects.get()
    assert logged.action_flag == ADDITION
    # The page shows it as the last run, pending, with a link to the job.
    row = entry_row(html(client.get(url("schedule"))), "sweep-unpaid")
    assert 'data-outcome="pending">pending</a> <span class="quiet">(run now)</span>' in row
    assert "schedule%3Asweep-unpaid%3Anow%3A" in row
    # A fresh page gives a fresh nonce: another click is another job.
    page = html(client.get(url("schedule")))
    action, fields = confirmed_form(client, action_link(page, "sweep-unpaid", "Run now"))
    client.post(action, fields)
    assert len(schedule_jobs()) == 2


def test_the_last_run_shows_how_it_ended(operated: Backend, django_user_model: Any) -> None:
    client = manager(django_user_model)
    Scheduler().run_pending(time.time() - 60)
    Scheduler().run_pending(time.time())
    assert 'data-outcome="pending"' in entry_row(html(client.get(url("schedule"))), "sweep-unpaid")
    queue = get_queue()
    [job] = queue.pop()
    row = entry_row(html(client.get(url("schedule"))), "sweep-unpaid")
    assert 'data-outcome="running"' in row
    queue.ack(job, "1")  # with its result: kept for RESULT_TTL
    row = entry_row(html(client.get(url("schedule"))), "sweep-unpaid")
    assert 'data-outcome="succeeded"' in row


def test_schedule_actions_need_the_permission_post_and_csrf(
    operated: Backend, django_user_model: Any, admin_user: Any
) -> None:
    viewer = staff_client(django_user_model, "view_dashboard")
    page = html(viewer.get(url("schedule")))
    for label in ("Pause", "Resume", "Run now"):
        assert f">{label}</a>" not in page
    entry = {"entry": "sweep-unpaid"}
    for action, fields in [
        ("schedule_pause", entry),
        ("schedule_resume", entry),
        ("schedule_run", {**entry, "nonce": "1"}),
    ]:
        assert viewer.get(url("confirm", action), fields).status_code == 403
        assert viewer.post(url("action", action), fields).status_code == 403
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.get(url("action", "schedule_pause"), entry).status_code == 405
    assert client.post(url("action", "schedule_pause"), entry).status_code == 403  # no token
    assert client.get(url("confirm", "schedule_pause"), {"entry": "nope"}).status_code == 404
    assert client.get(url("confirm", "schedule_run"), entry).status_code == 404  # no nonce
    bad_nonce = {**entry, "nonce": "-1"}
    assert client.get(url("confirm", "schedule_run"), bad_nonce).status_code == 404
    assert not entry_states([entry_named("sweep-unpaid")])[0].paused
    assert schedule_jobs() == []
    assert not LogEntry.objects.exists()


def test_redis_down_on_a_schedule_action_is_a_message(admin_client: Client, settings: Any) -> None:
    settings.REDISLOCK = {
        "URL": f"redis://127.0.0.1:{free_port()}/0",
        "QUEUES": QUEUES,
        "SCHEDULE": OPERATED,
    }
    assert admin_client.get(url("schedule")).status_code == 503
    confirm = admin_client.get(url("confirm", "schedule_pause"), {"entry": "sweep-unpaid"})
    assert confirm.status_code == 503
    for action, fields in [
        ("schedule_pause", {"entry": "sweep-unpaid"}),
        ("schedule_run", {"entry": "sweep-unpaid", "nonce": "5"}),
    ]:
        done = admin_client.post(url("action", action), fields, follow=True)
        assert "Nothing was done: Redis failed" in html(done)
    assert not LogEntry.objects.exists()


def test_an_unreadable_pause_record_is_shown_in_its_row_only(
    operated: Backend, admin_client: Client
) -> None:
    queue = get_queue()
    get_redis().rpush(entry_keys(queue.keys, "sweep-unpaid").paused, "planted")
    page = admin_client.get(url("schedule"))
    assert page.status_code == 200
    row = entry_row(html(page), "sweep-unpaid")
    assert "Unreadable: its pause record is unreadable" in row
    assert 'data-field="state">Active' in entry_row(html(page), "nightly")
    action, fields = confirmed_form(admin_client, action_link(html(page), "sweep-unpaid", "Resume"))
    admin_client.post(action, fields)
    assert "Unreadable" not in entry_row(html(admin_client.get(url("schedule"))), "sweep-unpaid")
