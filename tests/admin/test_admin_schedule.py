"""The admin's SCHEDULE page: each entry with its last tick (as claimed in Redis) and its
next one; an invalid entry is shown as such, never an error page."""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from typing import Any

import pytest
from django.test import Client
from django.utils.timezone import localtime

from django_redislock.queue.worker.schedule import Scheduler
from tests.support.fixtures import Backend

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
