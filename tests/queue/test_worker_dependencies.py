"""Jobs that wait for others (issue 28), run by real worker processes on a real server and a
real Cluster: steps run in order and never early, a step that dies ends those after it,
"finished" steps run after a death, steps on two queues (two Cluster slots) hand over
through the outbox, and workers SIGKILLed at random moments lose no step and start none
early."""

from __future__ import annotations

import itertools
import os
import random
import signal
import time
from typing import Any

import pytest

from django_redislock import get_queue, get_redis
from django_redislock.queue.queue import Queue
from django_redislock.queue.worker.loop import Worker
from tests.support.fixtures import Processes
from tests.support.waiting import wait_for
from tests.workflow_tasks import RUNS, runs

pytestmark = [pytest.mark.processes, pytest.mark.django_db(transaction=True)]

STEP = "tests.workflow_tasks.step"


def run_worker(queues: list[str], concurrency: int) -> None:
    Worker(queues, concurrency=concurrency).run()


@pytest.fixture
def queues(real_backend: Any, settings: Any) -> tuple[Queue, Queue]:
    options = {"LEASE": 2, "MAX_ATTEMPTS": 5, "RETRY_BACKOFF": 0.01}
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": options, "other": options}}
    get_redis().delete(RUNS)
    return get_queue("default"), get_queue("other")


def chain(queues: tuple[Queue, ...], names: list[str], **step: Any) -> list[Any]:
    """Enqueue steps ``names`` one after another, on ``queues`` in turn."""
    jobs: list[Any] = []
    for n, name in enumerate(names):
        queue = queues[n % len(queues)]
        depends = [jobs[-1]] if jobs else []
        jobs.append(queue.enqueue(STEP, [name], kwargs=step or None, depends_on=depends))
    return jobs


def in_order(names: list[str]) -> None:
    """Each step's first start came after the previous step's last end (no early step)."""
    seen = runs()
    for before, after in itertools.pairwise(names):
        ends = [r["end"] for r in seen if r["name"] == before and r["ok"]]
        starts = [r["start"] for r in seen if r["name"] == after]
        assert ends, f"{before} did not succeed: {seen}"
        assert starts, f"{after} did not run: {seen}"
        assert min(starts) >= max(ends), f"{after} started before {before} ended"


def test_a_chain_runs_in_order_across_workers(queues: tuple[Queue, Queue], processes: Processes):
    names = [f"s{n}" for n in range(8)]
    chain(queues[:1], names, seconds=0.01)
    for _ in range(2):
        processes.start(run_worker, ["default"], 4)
    wait_for(lambda: len(runs()) == len(names), what="every step ran")
    in_order(names)
    assert [r["name"] for r in runs()] == names


def test_a_death_ends_the_steps_after_it_and_finished_steps_run_anyway(
    queues: tuple[Queue, Queue], processes: Processes
):
    default = queues[0]
    first = default.enqueue(STEP, ["first"])
    dying = default.enqueue(
        STEP, ["dying"], kwargs={"fail": True}, depends_on=[first], max_attempts=1
    )
    after = default.enqueue(STEP, ["after"], depends_on=[dying])
    after_after = default.enqueue(STEP, ["after-after"], depends_on=[after])
    report = default.enqueue(STEP, ["report"], depends_on=[dying], run_when="finished")
    processes.start(run_worker, ["default"], 2)
    wait_for(lambda: {r["name"] for r in runs()} == {"first", "dying", "report"})
    wait_for(lambda: default.get(after_after.id).state == "dead", what="the cascade")
    assert default.get(after.id).error_class.endswith("DependencyFailed")
    assert default.counts()["waiting"] == 0
    assert default.get(report.id).state == "done"
    assert {r["name"] for r in runs()} == {"first", "dying", "report"}


def test_steps_on_two_queues_hand_over_through_the_outbox(
    queues: tuple[Queue, Queue], processes: Processes
):
    names = [f"x{n}" for n in range(6)]
    chain(queues, names)
    processes.start(run_worker, ["default"], 2)  # each queue its own worker
    processes.start(run_worker, ["other"], 2)
    wait_for(lambda: len(runs()) == len(names), what="every step ran")
    in_order(names)
    # (the delivery that released the last step removes its entry just after)
    wait_for(lambda: [q.client.llen(q.keys.outbox) for q in queues] == [0, 0])


def test_workers_killed_at_random_lose_no_step_and_start_none_early(
    queues: tuple[Queue, Queue], processes: Processes
):
    """SIGKILL, at random moments, of the workers that end steps and deliver the outbox:
    a step whose worker died runs again (at least once), none is lost, none starts before
    the step it waits for ended."""
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "0")) or None)
    names = [f"k{n}" for n in range(12)]
    jobs = chain(queues, names, seconds=0.02)
    workers = [processes.start(run_worker, [q], 2) for q in ("default", "other", "default")]
    deadline = time.monotonic() + 90
    last = queues[(len(names) - 1) % 2]
    while last.get(jobs[-1].id).state != "done":
        assert time.monotonic() < deadline, f"the chain did not finish: {runs()}"
        time.sleep(rng.uniform(0.0, 0.15))
        victim = rng.randrange(len(workers))
        pid = workers[victim].pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        workers[victim].join(5)
        workers[victim] = processes.start(run_worker, [("default", "other")[victim % 2]], 2)
    in_order(names)
    assert {r["name"] for r in runs() if r["ok"]} == set(names)
    for queue in queues:
        assert queue.counts()["waiting"] == 0
        assert queue.counts()["dead"] == 0
