"""Workflows (issue 28) run by real worker processes, on a real server and a real Cluster: a
step's progress and metadata are seen live from outside while it runs, a chain's join
returns once its last step ended, and a group on two queues (two Cluster slots) hands its
results to the step after it."""

from __future__ import annotations

from typing import Any

import pytest

from django_redislock import get_queue, get_redis
from django_redislock.queue.worker.loop import Worker
from django_redislock.workflows import chain, group, step
from tests import workflow_tasks as t
from tests.support.fixtures import Processes
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]


def run_worker(queues: list[str]) -> None:
    Worker(queues, concurrency=2).run()


@pytest.fixture
def queues(real_backend: Any, settings: Any) -> Any:
    options = {"LEASE": 5, "MAX_ATTEMPTS": 1}
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": options, "other": options}}
    settings.TASKS = {
        "default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend", "QUEUES": []}
    }
    get_redis().delete(t.RUNS, t.PROCEED)
    return get_queue("default"), get_queue("other")


def test_progress_is_seen_live(queues: Any, processes: Processes) -> None:
    wf = chain(step(t.step, "before"), step(t.progressing, 3, wait=True)).enqueue()
    processes.start(run_worker, ["default"])
    running = wf.results()[1]
    # (the task publishes its progress, then its metadata: two writes, waited for both)
    wait_for(
        lambda: (running.progress, running.metadata) == ((1, 3), {"last": 1}),
        what="the first step of three published, with its metadata",
    )
    assert wf.status == "running"
    assert wf.progress()["running"] == 1
    get_redis().rpush(t.PROCEED, 1)
    assert wf.join(timeout=30) is wf
    assert (running.progress, running.metadata) == ((3, 3), {"last": 3})
    assert wf.status == "succeeded"


def test_a_group_on_two_queues_hands_its_results_on(queues: Any, processes: Processes) -> None:
    there = t.step.using(queue_name="other")
    wf = group([step(t.step, "here"), step(there, "there")]).then(step(t.gather, "both"))
    handle = wf.enqueue()
    processes.start(run_worker, ["other"])
    processes.start(run_worker, ["default"])
    handle.join(timeout=60)
    assert handle.results()[-1].return_value == ["here", "there"]
    # (the delivery that released the last step removes its entry just after)
    wait_for(lambda: [q.client.llen(q.keys.outbox) for q in queues] == [0, 0])
