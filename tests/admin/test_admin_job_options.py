"""The job page shows what issue 26's enqueue-decided options left with a job: its expiry,
its unique_for window, its debounce, and "debounced" as the reason of its next run."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from django_redislock.queue.queue import Queue
from tests.support.waiting import wait_for

from .test_admin import html, url

pytestmark = pytest.mark.django_db

TASK = "tests.tasks.record"


def field(page: str, name: str) -> str:
    found = re.search(rf'data-field="{name}">(.*?)</td>', page)
    return found[1] if found else ""


def test_a_debounced_job_shows_its_options_and_why_it_waits(
    queue: Queue, admin_client: Client
) -> None:
    queue.enqueue(TASK, args=[1], job_id="d", debounce=30, expires=75)
    page = html(admin_client.get(url("job", "default"), {"id": "d"}))
    assert field(page, "enqueue-options") == "expires 1 min 15 s after it is due; debounce 30 s"
    assert field(page, "reason") == "debounced"


def test_a_unique_job_shows_its_window_even_once_finished(
    queue: Queue, admin_client: Client
) -> None:
    queue.enqueue(TASK, args=[1], job_id="u", unique_for=3600)
    [job] = queue.pop()
    assert queue.ack(job, "1")
    page = html(admin_client.get(url("job", "default"), {"id": "u"}))
    assert re.fullmatch(
        r"unique: its window holds (59 min \d+ s|1 h) more", field(page, "enqueue-options")
    )
    assert "—" in field(page, "reason")  # finished: no next run


def test_a_plain_job_shows_no_options(queue: Queue, admin_client: Client) -> None:
    queue.enqueue(TASK, args=[1], job_id="p", delay=30)
    page = html(admin_client.get(url("job", "default"), {"id": "p"}))
    assert "—" in field(page, "enqueue-options")
    assert field(page, "reason") == "its first run"


def test_a_debounced_job_retried_waits_for_its_retry_not_its_debounce(
    queue: Queue, admin_client: Client
) -> None:
    queue.enqueue(TASK, args=[1], job_id="r", debounce=0.01)
    popped: list[Any] = []
    wait_for(lambda: popped.extend(queue.pop()) or popped, 10)
    assert queue.retry(popped[0], delay=60)
    page = html(admin_client.get(url("job", "default"), {"id": "r"}))
    assert field(page, "reason") == "retry 1"
    assert "debounce 10 ms" in field(page, "enqueue-options")


@pytest.mark.parametrize(
    ("again", "reason"), [({"debounce": 30}, "debounced"), ({}, "its first run")]
)
def test_a_follow_up_run_says_whether_a_debounce_set_its_time(
    queue: Queue, admin_client: Client, again: dict[str, Any], reason: str
) -> None:
    """Enqueued while its id runs, the follow-up run becomes the job when that run ends: a
    debounce that set its due time is shown as its reason; a plain replace after it, not."""
    queue.enqueue(TASK, args=[1], job_id="f")
    [running] = queue.pop()
    queue.enqueue(TASK, args=[2], job_id="f", debounce=30)
    if not again:
        queue.enqueue(TASK, args=[3], job_id="f", replace=True)
    assert queue.ack(running)
    page = html(admin_client.get(url("job", "default"), {"id": "f"}))
    assert field(page, "reason") == reason
    assert ("debounce 30 s" in field(page, "enqueue-options")) == bool(again)
