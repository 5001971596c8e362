"""Jobs that wait for others (issue 28): ``enqueue(..., depends_on=[...], run_when=...)`` as
the queue's own calls see them (pop, ack, bury), on fakeredis, a real server and Cluster
(where two queues sit on two slots, so a dependency in another queue goes through the
outbox). The real workers' tests are in ``test_worker_dependencies``."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import pytest

from django_redislock import get_queue
from django_redislock.exceptions import JobNotFound
from django_redislock.queue.jobs import Job
from django_redislock.queue.outbox import UNKNOWN_GRACE_MS, deliver
from django_redislock.queue.queue import Queue
from tests.support.fixtures import Backend

TASK = "tests.tasks.record"


@pytest.fixture
def queues(backend: Backend, settings: Any) -> tuple[Queue, Queue]:
    options = {"LEASE": 30, "MAX_ATTEMPTS": 1, "RETRY_BACKOFF": 0}
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": options, "other": options}}
    return get_queue("default"), get_queue("other")


@pytest.fixture
def queue(queues: tuple[Queue, Queue]) -> Queue:
    return queues[0]


def state(queue: Queue, job: Any) -> str:
    return str(queue.get(job.id).state)


def run_one(queue: Queue, expect: Any = None, *, fail: bool = False, result: Any = "ok") -> Any:
    """Pop the next job (``expect``: it must be that one) and end it: done (with
    ``result``), or dead."""
    [job] = queue.pop()
    if expect is not None:
        assert job.id == expect.id
    if fail:
        assert queue.bury(job, RuntimeError("boom"))
    else:
        assert queue.ack(job, json.dumps(result))
    return job


# --- the primitive --------------------------------------------------------------------------


def test_a_dependant_waits_then_is_ready_in_the_script_that_ended_its_dependency(queue: Queue):
    parent = queue.enqueue(TASK, [1])
    child = queue.enqueue(TASK, [2], depends_on=[parent.id])
    assert child.state == "waiting"
    assert state(queue, child) == "waiting"
    assert queue.counts()["waiting"] == 1
    assert [job.id for job in queue.jobs("waiting")] == [child.id]
    run_one(queue, parent)
    assert state(queue, child) == "ready"
    assert queue.counts()["waiting"] == 0
    run_one(queue, child)
    assert queue.pop() == []


def test_a_job_waits_for_every_dependency(queue: Queue):
    parents = [queue.enqueue(TASK, [n]) for n in range(3)]
    child = queue.enqueue(TASK, [9], depends_on=parents)
    for parent in parents[:2]:
        run_one(queue, parent)
        assert state(queue, child) == "waiting"
    run_one(queue, parents[2])
    assert state(queue, child) == "ready"
    assert queue.get(child.id).depends_on == tuple(p.id for p in parents)


def test_a_dependency_ending_dead_ends_its_dependants_dead_cascading(queue: Queue):
    parent = queue.enqueue(TASK, [1])
    child = queue.enqueue(TASK, [2], depends_on=[parent])
    grandchild = queue.enqueue(TASK, [3], depends_on=[child])
    run_one(queue, parent, fail=True)
    for job in (child, grandchild):
        ended = queue.get(job.id)
        assert ended.state == "dead"
        assert ended.error_class == "django_redislock.exceptions.DependencyFailed"
        assert ended.attempts == 0  # never ran
    assert parent.id in queue.get(child.id).error
    assert child.id in queue.get(grandchild.id).error
    assert queue.counts()["waiting"] == 0
    assert queue.pop() == []


def test_run_when_finished_runs_however_the_dependency_ended(queue: Queue):
    parent = queue.enqueue(TASK, [1])
    child = queue.enqueue(TASK, [2], depends_on=[parent], run_when="finished")
    run_one(queue, parent, fail=True)
    assert state(queue, child) == "ready"
    assert queue.get(child.id).run_when == "finished"


def test_a_dependency_that_ended_already_counts_as_it_ended(queue: Queue):
    done, dead = queue.enqueue(TASK, [1]), queue.enqueue(TASK, [2])
    run_one(queue, done)
    run_one(queue, dead, fail=True)
    assert state(queue, queue.enqueue(TASK, [3], depends_on=[done.id])) == "ready"
    failed = queue.enqueue(TASK, [4], depends_on=[done.id, dead.id])
    assert failed.state == "dead"
    assert "DependencyFailed" in queue.get(failed.id).error_class
    anyway = queue.enqueue(TASK, [5], depends_on=[dead.id], run_when="finished")
    assert anyway.state == "ready"


def test_a_dependant_with_a_delay_is_scheduled_when_released_early(queue: Queue):
    parent = queue.enqueue(TASK, [1])
    child = queue.enqueue(TASK, [2], depends_on=[parent], delay=3600)
    run_one(queue, parent)
    assert state(queue, child) == "scheduled"


def test_a_dependant_enqueued_while_its_dependency_runs_is_told_through_the_outbox(queue: Queue):
    parent = queue.enqueue(TASK, [1])
    [leased] = queue.pop()  # leased before it had a dependant: its worker does not know it
    child = queue.enqueue(TASK, [2], depends_on=[parent])
    assert leased.dependants == ()
    assert queue.ack(leased, "1")  # the ack delivers the outbox
    assert state(queue, child) == "ready"
    assert queue.client.llen(queue.keys.outbox) == 0


def test_enqueue_many_orders_a_batch_by_its_dependencies(queue: Queue):
    jobs = queue.enqueue_many(
        [
            {"task": TASK, "args": [3], "job_id": "c", "depends_on": ["b"]},
            {"task": TASK, "args": [2], "job_id": "b", "depends_on": ["a"]},
            {"task": TASK, "args": [1], "job_id": "a"},
        ]
    )
    assert [job.id for job in jobs] == ["c", "b", "a"]  # as given
    assert [job.state for job in jobs] == ["waiting", "waiting", "ready"]
    order = [run_one(queue).args[0] for _ in range(3)]
    assert order == [1, 2, 3]


# --- across queues --------------------------------------------------------------------------


def test_a_dependency_in_another_queue(queues: tuple[Queue, Queue]):
    default, other = queues
    parent = other.enqueue(TASK, [1])
    child = default.enqueue(TASK, [2], depends_on=[parent])
    assert child.depends_on == (f"other\t{parent.id}",)
    assert default.client.llen(default.keys.outbox) == 0  # the registration was delivered
    assert other.get(parent.id).dependants == (f"default\t{child.id}",)
    run_one(other, parent)
    assert state(default, child) == "ready"


def test_a_dead_dependency_in_another_queue_cascades(queues: tuple[Queue, Queue]):
    default, other = queues
    parent = other.enqueue(TASK, [1])
    child = default.enqueue(TASK, [2], depends_on=[parent])
    grandchild = other.enqueue(TASK, [3], depends_on=[child])
    run_one(other, parent, fail=True)
    assert state(default, child) == "dead"
    assert state(other, grandchild) == "dead"
    assert [q.client.llen(q.keys.outbox) for q in queues] == [0, 0]


def test_a_registration_whose_dependency_ended_meanwhile_tells_at_once(
    queues: tuple[Queue, Queue],
):
    default, other = queues
    parent, dying = other.enqueue(TASK, [1]), other.enqueue(TASK, [2])
    run_one(other, parent)
    run_one(other, dying, fail=True)
    child = default.enqueue(TASK, [3], depends_on=[parent])
    assert child.state == state(default, child) == "ready"  # as returned, too
    orphan = default.enqueue(TASK, [4], depends_on=[dying])
    assert orphan.state == state(default, orphan) == "dead"


# --- what is refused, and nothing written ---------------------------------------------------


def nothing_written(queue: Queue) -> bool:
    return sum(queue.counts().values()) == 0


def test_an_unknown_dependency_is_a_value_error_and_nothing_is_written(
    queues: tuple[Queue, Queue],
):
    default, other = queues
    with pytest.raises(ValueError, match="'nope'"):
        default.enqueue(TASK, [1], depends_on=["nope"])
    with pytest.raises(ValueError, match="'nope' of queue 'other'"):
        default.enqueue(TASK, [1], depends_on=[other.enqueue(TASK, [0]), Job("nope", "other", "")])
    assert nothing_written(default)
    unknown_queue = type("R", (), {"id": "abc", "task": type("T", (), {"queue_name": "nowhere"})})
    with pytest.raises(ValueError, match="'nowhere'"):
        default.enqueue(TASK, [1], depends_on=[unknown_queue()])
    assert nothing_written(default)


def test_a_cycle_is_a_value_error_and_nothing_is_written(queue: Queue):
    with pytest.raises(ValueError, match=r"cycle: (a -> b -> a|b -> a -> b)"):
        queue.enqueue_many(
            [
                {"task": TASK, "args": [1], "job_id": "a", "depends_on": ["b"]},
                {"task": TASK, "args": [2], "job_id": "b", "depends_on": ["a"]},
            ]
        )
    with pytest.raises(ValueError, match="itself"):
        queue.enqueue(TASK, [1], job_id="me", depends_on=["me"])
    assert nothing_written(queue)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"depends_on": "abc"}, TypeError, "list of jobs"),
        ({"depends_on": [3]}, TypeError, "job ids, Jobs and TaskResults"),
        ({"depends_on": [""]}, ValueError, "job_id"),
        ({"depends_on": [], "run_when": "always"}, ValueError, "run_when"),
        ({"depends_on": [], "unique_for": 10}, TypeError, "unique_for"),
        ({"depends_on": [], "debounce": 1}, TypeError, "debounce"),
        ({"depends_on": [], "replace": True}, TypeError, "replace"),
        ({"depends_on": [str(n) for n in range(1001)]}, ValueError, "at most 1000"),
    ],
)
def test_bad_arguments_name_themselves(queue: Queue, options: dict, error: type, match: str):
    with pytest.raises(error, match=match):
        queue.enqueue(TASK, [1], **options)
    assert nothing_written(queue)


def test_an_empty_depends_on_is_a_plain_job(queue: Queue):
    assert queue.enqueue(TASK, [1], depends_on=[]).state == "ready"


# --- cancel, delete, replace ----------------------------------------------------------------


def test_cancelling_a_dependency_ends_its_dependants(queue: Queue):
    parent = queue.enqueue(TASK, [1])
    child = queue.enqueue(TASK, [2], depends_on=[parent])
    assert queue.cancel(parent.id)
    ended = queue.get(child.id)
    assert ended.state == "dead"
    assert "deleted before it ran" in ended.error


def test_a_waiting_job_can_be_cancelled(queue: Queue):
    parent = queue.enqueue(TASK, [1])
    child = queue.enqueue(TASK, [2], depends_on=[parent])
    assert queue.cancel(child.id)
    assert queue.counts()["waiting"] == 0
    run_one(queue, parent)  # its end finds no dependant to tell
    assert queue.pop() == []


def test_replacing_a_waiting_job_keeps_it_waiting_for_its_dependencies(queue: Queue):
    parent = queue.enqueue(TASK, [1])
    queue.enqueue(TASK, [2], job_id="w", depends_on=[parent], run_when="finished")
    replaced = queue.enqueue(TASK, [3], job_id="w", replace=True)
    assert replaced.state == "waiting"
    again = queue.get("w")
    assert (again.args, again.depends_on, again.run_when) == ([3], (parent.id,), "finished")
    assert queue.counts()["ready"] == 1  # the parent alone
    run_one(queue, parent, fail=True)
    assert run_one(queue).args == [3]  # released as it waited: however the parent ended


def test_replacing_a_pending_dependency_keeps_its_dependants(queue: Queue):
    parent = queue.enqueue(TASK, [1], job_id="p", delay=3600)
    child = queue.enqueue(TASK, [2], depends_on=["p"])
    queue.enqueue(TASK, [10], job_id="p", replace=True)  # due now, new arguments
    run_one(queue)
    assert state(queue, child) == "ready"
    assert parent.id == "p"


# --- the outbox -----------------------------------------------------------------------------


def test_a_delivery_repeated_changes_nothing(queue: Queue):
    parents = [queue.enqueue(TASK, [n]) for n in range(2)]
    child = queue.enqueue(TASK, [9], depends_on=parents)
    # the same "ended" twice, as two workers sweeping at once would deliver it
    entry = f"t\n{child.id}\n{parents[0].id}\nk\n"
    queue.client.rpush(queue.keys.outbox, entry, entry)
    assert deliver(queue) == 2
    assert state(queue, child) == "waiting"  # one of two counted, once
    run_one(queue, parents[0])  # its own end: told already, nothing more
    assert state(queue, child) == "waiting"
    run_one(queue, parents[1])
    assert state(queue, child) == "ready"


def test_a_malformed_outbox_entry_is_set_aside_and_the_rest_delivered(
    queue: Queue, caplog: pytest.LogCaptureFixture
):
    parent = queue.enqueue(TASK, [1])
    child = queue.enqueue(TASK, [2], depends_on=[parent])
    queue.client.rpush(queue.keys.outbox, "zz\ngarbage", f"t\n{child.id}\n{parent.id}\nk\n")
    with caplog.at_level(logging.ERROR, "django_redislock.queue.outbox"):
        assert deliver(queue) == 2
    assert "malformed" in caplog.text
    assert state(queue, child) == "ready"
    assert queue.client.llen(queue.keys.outbox) == 0


def test_a_registration_for_a_job_not_found_waits_then_ends_the_dependant(
    queues: tuple[Queue, Queue],
):
    default, other = queues
    child = default.enqueue(TASK, [2], depends_on=[other.enqueue(TASK, [1])])
    # a registration written by a workflow whose other part is not written yet
    now = int(time.time() * 1000)
    fresh, stale = f"r\nother\tlater\n{child.id}\n{now}", f"r\nother\tgone\n{child.id}\n1"
    default.client.hset(default.keys.job(child.id), mapping={"@other\tgone": "w", "dw": 2})
    default.client.rpush(default.keys.outbox, fresh, stale)
    deliver(default)
    assert default.client.lrange(default.keys.outbox, 0, -1) == [fresh.encode()]
    ended = default.get(child.id)
    assert ended.state == "dead"
    assert "does not exist" in ended.error
    assert now - 1 > UNKNOWN_GRACE_MS


# --- join -----------------------------------------------------------------------------------


def test_join_waits_for_the_end_and_returns_the_job(queue: Queue):
    job = queue.enqueue(TASK, [1])

    def finish() -> None:
        time.sleep(0.2)
        [leased] = queue.pop()
        queue.ack(leased, "7")

    threading.Thread(target=finish).start()
    started = time.monotonic()
    ended = queue.join(job.id, timeout=30)
    assert ended.state == "done"
    assert ended.result == "7"
    assert time.monotonic() - started < 10


def test_join_of_an_ended_job_answers_at_once_and_of_none_raises(queue: Queue):
    job = run_one(queue, queue.enqueue(TASK, [1]))
    assert queue.join(job.id, timeout=0).state == "done"
    with pytest.raises(JobNotFound):
        queue.join("nope")


def test_join_times_out(queue: Queue):
    job = queue.enqueue(TASK, [1])
    with pytest.raises(TimeoutError):
        queue.join(job.id, timeout=0.2)
    assert queue.client.hget(queue.keys.job(job.id), "jw") is None  # the waiter left


def test_ajoin(queue: Queue):
    import asyncio

    job = queue.enqueue(TASK, [1])

    async def main() -> Any:
        waiting = asyncio.ensure_future(queue.ajoin(job.id, timeout=30))
        await asyncio.sleep(0.1)
        [leased] = await asyncio.to_thread(queue.pop)
        await asyncio.to_thread(queue.bury, leased, "no")
        return await waiting

    assert asyncio.run(main()).state == "dead"


def test_a_waiting_job_found_corrupt_is_set_aside_when_told(queue: Queue):
    parent = queue.enqueue(TASK, [1])
    child = queue.enqueue(TASK, [2], depends_on=[parent])
    sibling = queue.enqueue(TASK, [3], depends_on=[parent])
    queue.client.delete(queue.keys.job(child.id))
    queue.client.set(queue.keys.job(child.id), "garbage")
    run_one(queue, parent)  # its worker gives both keys; the corrupt one goes by the outbox
    ended = queue.get(child.id)
    assert ended.state == "dead"
    assert "not a hash" in ended.error
    assert queue.client.get(queue.keys.corrupt(child.id)) == b"garbage"
    assert state(queue, sibling) == "ready"
    assert queue.counts()["waiting"] == 0
