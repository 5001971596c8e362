"""The admin and issue 28: waiting jobs listed and counted, a job's page linking what it
waits for and what waits for it, its published progress; a workflow's page with its steps'
states, what each waits for and a progress bar, and its Cancel button (logged). On
fakeredis, a real server and a Cluster."""

from __future__ import annotations

import dataclasses
import re

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.test import Client

from django_redislock.queue.queue import Queue
from django_redislock.workflows import chain, group, step
from tests import workflow_tasks as t

from .test_admin import confirm_and_post, html, url

pytestmark = pytest.mark.django_db
TASK = "tests.tasks.record"


def test_waiting_jobs_are_counted_listed_and_linked(admin_client: Client, queue: Queue) -> None:
    parent = queue.enqueue(TASK, [1], job_id="parent")
    queue.enqueue(TASK, [2], job_id="child", depends_on=[parent])
    page = html(admin_client.get(url("dashboard_changelist")))
    assert re.search(r'data-state="waiting"><a href="[^"]*">1<', page)
    listing = html(admin_client.get(url("jobs", "default", "waiting")))
    assert "Waiting (1)" in listing
    assert 'data-job="child"' in listing
    child = html(admin_client.get(url("job", "default"), {"id": "child"}))
    assert re.search(r'data-field="depends-on"><a href="[^"]*id=parent"><code>parent<', child)
    assert "runs once they succeeded" in child
    mother = html(admin_client.get(url("job", "default"), {"id": "parent"}))
    assert re.search(r'data-field="dependants"><a href="[^"]*id=child"><code>child<', mother)
    done = confirm_and_post(admin_client, "delete", queue="default", job="child", state="waiting")
    assert "was deleted" in html(done)
    assert queue.counts()["waiting"] == 0


def test_a_jobs_published_progress_is_shown(admin_client: Client, queue: Queue) -> None:
    queue.enqueue(TASK, [1], job_id="p")
    [job] = queue.pop()
    assert queue.publish(job, '{"phase": "copying"}', "3/10")
    page = html(admin_client.get(url("job", "default"), {"id": "p"}))
    assert '<progress value="3" max="10">' in page
    assert "copying" in page
    assert not queue.publish(dataclasses.replace(job, lease="stale"), "{}", "1/1")


def test_a_workflows_page_shows_its_steps_and_cancels(admin_client: Client, queue: Queue) -> None:
    wf = (
        chain(step(t.step, "a"), group([step(t.step, "b"), step(t.step, "c")]))
        .then(step(t.gather, "d"))
        .enqueue()
    )
    listing = html(admin_client.get(url("workflows", "default")))
    assert wf.id in listing
    page = html(admin_client.get(url("workflow", "default"), {"id": wf.id}))
    assert "<strong>pending</strong>" in page
    assert '<progress value="0" max="4">' in page
    steps = re.findall(r'data-step="(\d)" data-state="(\w+)"', page)
    assert steps == [("1", "ready"), ("2", "waiting"), ("3", "waiting"), ("4", "waiting")]
    assert re.search(r'data-step="4".*?#2, #3', page, re.S)
    assert "/confirm/cancel_workflow/" in page
    done = confirm_and_post(admin_client, "cancel_workflow", queue="default", workflow=wf.id)
    assert "4 step(s) were cancelled" in html(done)
    page = html(admin_client.get(url("workflow", "default"), {"id": wf.id}))
    assert "<strong>failed</strong>" in page
    assert "/confirm/cancel_workflow/" not in page
    fields = {"queue": "default", "workflow": wf.id}
    again = admin_client.get(url("confirm", "cancel_workflow"), fields, follow=True)
    assert "nothing to cancel" in html(again)
    entries = [(e.action_flag, e.object_repr) for e in LogEntry.objects.order_by("pk")]
    assert entries == [(CHANGE, f"workflow {wf.id} of queue default")]


def test_a_missing_workflow_says_so(admin_client: Client, queue: Queue) -> None:
    page = html(admin_client.get(url("workflow", "default"), {"id": "nope"}))
    assert "No workflow “nope”" in page
    assert admin_client.get(url("workflow", "nowhere"), {"id": "x"}).status_code == 404
    assert admin_client.get(url("workflow", "default")).status_code == 404
