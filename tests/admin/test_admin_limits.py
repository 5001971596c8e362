"""The admin and issue 27: parked jobs listed with what holds them back (a concurrency key
with its running count against its limit, or their task's pause), and the queue's Pause
and Resume buttons, logged in the admin log. On fakeredis, a real server and a Cluster."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.test import Client

from django_redislock.queue.queue import Queue

from .test_admin import confirm_and_post, html, staff_client, url

pytestmark = pytest.mark.django_db
TASK, OTHER = "tests.tasks.record", "tests.tasks.slow"


def test_the_parked_tab_says_what_holds_each_job_back(admin_client: Client, queue: Queue) -> None:
    for n in range(3):
        queue.enqueue(TASK, [n], concurrency_key="export:{0}" if n else "solo", job_id=f"k{n}")
    queue.enqueue(TASK, [9], concurrency_key="solo", job_id="k9")
    queue.enqueue(OTHER, [1, 0], job_id="paused-one")
    queue.pause(task=OTHER)
    queue.fetch(10, worker="w")  # k0, k1, k2 start; k9 waits for "solo"; the other is paused
    page = html(admin_client.get(url("dashboard_changelist")))
    assert re.search(r'data-state="parked"><a href="[^"]*">2<', page)
    listing = html(admin_client.get(url("jobs", "default", "parked")))
    assert "Parked (2)" in listing
    assert re.search(r'data-job="k9".*?concurrency key solo: 1 of 1 running', listing, re.S)
    assert re.search(r'data-job="paused-one".*?its task is paused', listing, re.S)
    assert "Delete" in listing  # a parked job can be deleted
    done = confirm_and_post(admin_client, "delete", queue="default", job="k9", state="parked")
    assert "was deleted" in html(done)
    assert queue.counts()["parked"] == 1


def test_pause_and_resume_buttons_are_logged(admin_client: Client, queue: Queue) -> None:
    page = html(admin_client.get(url("dashboard_changelist")))
    assert "action=pause" not in page  # (a confirmation URL, not the action's name)
    assert "/confirm/pause/" in page
    done = confirm_and_post(admin_client, "pause", queue="default")
    assert "The queue “default” was paused." in html(done)
    assert queue.paused() == {"*"}
    page = html(admin_client.get(url("dashboard_changelist")))
    assert "the whole queue" in page
    assert "/confirm/resume/" in page
    again = admin_client.get(url("confirm", "pause"), {"queue": "default"}, follow=True)
    assert "is paused already" in html(again)
    done = confirm_and_post(admin_client, "resume", queue="default")
    assert "The queue “default” was resumed." in html(done)
    assert queue.paused() == set()
    entries = [(e.action_flag, e.object_repr) for e in LogEntry.objects.order_by("pk")]
    assert entries == [(CHANGE, "queue default"), (CHANGE, "queue default")]


def test_a_paused_task_is_resumed_from_its_own_button(admin_client: Client, queue: Queue) -> None:
    queue.pause(task=TASK, by="ops")
    page = html(admin_client.get(url("dashboard_changelist")))
    assert TASK in page
    done = confirm_and_post(admin_client, "resume", queue="default", task=TASK)
    assert f"The task “{TASK}” of queue “default” was resumed." in html(done)
    assert queue.paused() == set()
    assert LogEntry.objects.get().object_repr == f"task {TASK} of queue default"


@pytest.mark.parametrize("task", ["a b", "*", "x\x00y", "<script>", "é" * 2000])
def test_a_hostile_task_in_a_pause_url_is_not_found(admin_client: Client, queue: Queue, task: str):
    response = admin_client.get(url("confirm", "pause"), {"queue": "default", "task": task})
    assert response.status_code == 404
    assert queue.paused() == set()


def test_a_viewer_sees_no_buttons_and_cannot_pause(django_user_model: Any, queue: Queue) -> None:
    viewer = staff_client(django_user_model, "view_dashboard")
    queue.pause(task=TASK)
    page = html(viewer.get(url("dashboard_changelist")))
    assert "/confirm/pause/" not in page
    assert "/confirm/resume/" not in page
    assert viewer.get(url("confirm", "pause"), {"queue": "default"}).status_code == 403


def test_a_job_over_its_rate_is_listed_with_its_rate(admin_client: Client, queue: Queue) -> None:
    for n in range(2):
        queue.enqueue(TASK, [n], rate_key="api", rate="1/m", job_id=f"r{n}")
    queue.fetch(5, worker="w")
    listing = html(admin_client.get(url("jobs", "default", "parked")))
    assert re.search(r'data-job="r1".*?rate key api: 1 starts per 60 s', listing, re.S)
