"""The options an enqueue decides (issue 26): ``unique_for``, ``unique_by_args`` and
``debounce`` on ``Queue.enqueue`` and ``enqueue_many`` items, and the checks of all four
(``expires`` has its own module, ``test_expires``). On fakeredis, a real server and Cluster."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from typing import Any

import pytest
from django.db import transaction

from django_redislock import get_queue, get_redis
from django_redislock.queue.job_options import unique_job_id
from django_redislock.queue.queue import Queue
from tests.support.counts import job_counts
from tests.support.fixtures import Backend
from tests.support.waiting import server_now, wait_for

TASK = "tests.tasks.record"
ID = "sync:1"


@pytest.fixture
def queue(backend: Backend, settings: Any) -> Queue:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": 5, "MAX_ATTEMPTS": 1, "RETRY_BACKOFF": 0.05}},
    }
    return get_queue("default")


def unique(queue: Queue, version: int, window: float = 60, **options: Any) -> Any:
    return queue.enqueue(TASK, args=[version], job_id=ID, unique_for=window, **options)


# --- unique_for -----------------------------------------------------------------------------


def test_within_the_window_the_pending_job_comes_back_unchanged(queue: Queue) -> None:
    first = unique(queue, 1, delay=30, meta={"who": "a"})
    again = queue.enqueue(
        TASK, args=[2], kwargs={"x": 1}, job_id=ID, unique_for=60, priority=5, meta={"who": "b"}
    )
    assert (again.id, again.args, again.kwargs, again.priority, again.meta) == (
        ID,
        [1],
        {},
        0,
        {"who": "a"},
    )
    assert (again.state, again.score, again.enqueued) == ("scheduled", first.score, first.enqueued)
    assert queue.counts()["scheduled"] == 1
    assert queue.get(ID).args == [1]


def finish(queue: Queue, how: str) -> None:
    [job] = queue.pop()
    if how == "done":
        assert queue.ack(job, json.dumps("kept"))
    elif how == "done, not kept":  # acknowledged with no result: its hash is deleted at once
        assert queue.ack(job)
    elif how == "dead":
        assert queue.fail(job, "boom")


@pytest.mark.parametrize(
    ("how", "state"),
    [
        ("pending", "ready"),
        ("running", "running"),
        ("done", "done"),
        ("done, not kept", "done"),
        ("dead", "dead"),
    ],
)
def test_the_window_holds_in_every_state(queue: Queue, how: str, state: str) -> None:
    first = unique(queue, 1)
    if how == "running":
        [job] = queue.pop()
        assert job.args == [1]
    elif how != "pending":
        finish(queue, how)
    again = unique(queue, 2)
    assert (again.args, again.state, again.enqueued) == ([1], state, first.enqueued)
    popped = [job.args for job in queue.pop(2)]  # nothing new to run: the first, if pending
    assert popped == ([[1]] if how == "pending" else [])
    assert sum(queue.counts().values()) == (how in ("pending", "running", "dead"))


def test_the_window_outlives_the_results_kept(queue: Queue, settings: Any) -> None:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": 5, "RESULT_TTL": 0.05}},
    }
    queue = get_queue("default")
    unique(queue, 1)
    finish(queue, "done")
    wait_for(lambda: get_redis().exists(queue.keys.result(ID)) == 0, 10, "the result expired")
    again = unique(queue, 2)
    assert (again.args, again.state) == ([1], "done")


@pytest.mark.parametrize("how", ["cancel", "delete", "purge ready", "delete dead", "purge dead"])
def test_a_deleted_job_leaves_its_window_and_the_next_enqueue_makes_a_new_one(
    queue: Queue, how: str
) -> None:
    """Cancelled before it ran, deleted or purged, the job is gone: within its window, the
    next enqueue of its id is a new job (not the gone one reported as done)."""
    unique(queue, 1)
    if "dead" in how:
        finish(queue, "dead")
    if how == "cancel":
        assert queue.cancel(ID)
    elif how in ("delete", "delete dead"):
        assert queue.delete(ID) if how == "delete" else queue.delete_dead([ID]) == 1
    else:
        assert queue.purge(how.split()[1]) == 1
    assert get_redis().exists(queue.keys.unique(ID)) == 0
    again = unique(queue, 2)
    assert (again.args, again.state) == ([2], "ready")
    assert [job.args for job in queue.pop(2)] == [[2]]
    assert unique(queue, 3).args == [2]  # the new job holds its own window


def test_after_the_window_an_enqueue_makes_a_new_job(queue: Queue) -> None:
    started = server_now()
    unique(queue, 1, window=0.3)
    finish(queue, "done, not kept")
    wait_for(lambda: unique(queue, 2, window=0.3).args == [2], 10, "a new job after the window")
    assert server_now() - started >= 0.3 - 0.002  # not before the window (from the first)
    [job] = queue.pop()
    assert job.args == [2]
    assert unique(queue, 3, window=0.3).args == [2]  # its own window, from its own enqueue


def test_an_id_pending_from_a_plain_enqueue_is_kept_and_returned_as_stored(queue: Queue) -> None:
    queue.enqueue(TASK, args=[1], job_id=ID)
    again = unique(queue, 2)
    assert again.args == [1]
    [job] = queue.pop()
    queue.ack(job)
    assert unique(queue, 3).args == [3]  # that enqueue did not open a window


def test_a_batch_naming_one_id_twice_makes_one_job(queue: Queue) -> None:
    made = queue.enqueue_many(
        [
            {"task": TASK, "args": [1], "job_id": ID, "unique_for": 60},
            {"task": TASK, "args": [2]},
            {"task": TASK, "args": [3], "job_id": ID, "unique_for": 60},
        ]
    )
    assert [job.args for job in made] == [[1], [2], [1]]
    assert made[0].id == made[2].id == ID
    assert queue.counts()["ready"] == 2


@pytest.mark.django_db(transaction=True)
def test_enqueues_in_one_transaction_make_one_job_at_commit(queue: Queue) -> None:
    with transaction.atomic():
        unique(queue, 1)
        unique(queue, 2)
        assert queue.counts()["ready"] == 0  # pushed when the transaction commits
    [job] = queue.pop()
    assert job.args == [1]


def test_a_marker_that_is_not_a_hash_counts_as_no_window(queue: Queue) -> None:
    get_redis().set(queue.keys.unique(ID), "garbage")
    assert unique(queue, 1).args == [1]
    assert unique(queue, 2).args == [1]  # the marker was written afresh


# --- unique_by_args -------------------------------------------------------------------------

KNOWN = "args-" + "8d0a16c8ca3ae3f1b24a0d03b0ba1e3bb0fe7f5aac3a36e1f55fa4ba1a4bd6d2"


def test_the_id_is_a_stable_hash_of_the_task_and_its_arguments() -> None:
    job_id = unique_job_id(TASK, [1, "é"], {"b": 2, "a": {"y": 1, "x": [1, 2]}})
    assert job_id == unique_job_id(TASK, (1, "é"), {"a": {"x": (1, 2), "y": 1}, "b": 2})
    assert job_id != unique_job_id(TASK, [1, "é"], {"b": 2, "a": {"y": 1, "x": [2, 1]}})
    assert unique_job_id(TASK, [1], {}) != unique_job_id(TASK, [], {"x": 1})
    assert len({unique_job_id(TASK, [v], {}) for v in (1, 1.0, True, "1")}) == 4
    assert unique_job_id(TASK, [], {}) != unique_job_id("tests.tasks.other", [], {})
    canonical = '["tests.tasks.record",[1],{"a":2}]'
    import hashlib

    assert (
        unique_job_id(TASK, [1], {"a": 2})
        == "args-" + hashlib.sha256(canonical.encode()).hexdigest()
    )


def test_the_id_is_the_same_in_another_process_with_another_hash_seed() -> None:
    code = (
        "from django_redislock.queue.job_options import unique_job_id as u;"
        f"print(u({TASK!r}, [1, 'x'], {{'b': [1], 'a': None}}))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == unique_job_id(TASK, [1, "x"], {"a": None, "b": [1]})


def test_the_same_call_collapses_and_another_does_not(queue: Queue) -> None:
    a = queue.enqueue(TASK, args=[1], kwargs={"x": 1, "y": 2}, unique_by_args=True)
    b = queue.enqueue(TASK, args=[1], kwargs={"y": 2, "x": 1}, unique_by_args=True)
    c = queue.enqueue(TASK, args=[1], kwargs={"x": 1}, unique_by_args=True)
    assert a.id == b.id == unique_job_id(TASK, [1], {"x": 1, "y": 2})
    assert c.id != a.id
    assert queue.counts()["ready"] == 2
    d = queue.enqueue(TASK, args=[1], kwargs={"x": 1}, unique_by_args=True, unique_for=60)
    assert d.id == c.id  # pending: kept (the default id rule)


# --- debounce -------------------------------------------------------------------------------


def test_each_enqueue_pushes_the_due_time_back_and_keeps_the_last_values(queue: Queue) -> None:
    before = server_now()
    first = queue.enqueue(TASK, args=[1], job_id=ID, debounce=30)
    assert first.state == "scheduled"
    assert before * 1000 + 30_000 - 5 <= first.score <= server_now() * 1000 + 30_000 + 5
    second = queue.enqueue(TASK, args=[2], job_id=ID, debounce=30, priority=3)
    assert second.score >= first.score
    assert queue.counts()["scheduled"] == 1
    stored = queue.get(ID)
    assert (stored.args, stored.priority, stored.score) == ([2], 3, second.score)


def test_ten_quick_enqueues_make_one_run_with_the_last_arguments(queue: Queue) -> None:
    for version in range(10):
        last = server_now()
        queue.enqueue(TASK, args=[version], job_id=ID, debounce=1)
        assert sum(queue.counts().values()) == 1
    assert queue.pop() == []  # not before the debounce after the last enqueue
    jobs: list[Any] = []
    wait_for(lambda: jobs.extend(queue.pop()) or jobs, 10, "the debounced job became ready")
    assert server_now() - last >= 1 - 0.002
    assert [job.args for job in jobs] == [[9]]


def test_a_running_id_gets_one_follow_up_with_the_last_values(queue: Queue) -> None:
    queue.enqueue(TASK, args=[1], job_id=ID)
    [job] = queue.pop()
    for version in (2, 3):
        made = queue.enqueue(TASK, args=[version], job_id=ID, debounce=0.05)
        assert made.state == "running"
    assert queue.pop() == []  # never two runs of one id at once
    assert queue.ack(job)
    jobs: list[Any] = []
    wait_for(lambda: jobs.extend(queue.pop()) or jobs, 10, "the follow-up")
    assert [(j.args, j.attempts) for j in jobs] == [([3], 1)]
    assert queue.ack(jobs[0])
    assert sum(queue.counts().values()) == 0


def test_a_debounced_dead_job_is_enqueued_afresh(queue: Queue) -> None:
    queue.enqueue(TASK, args=[1], job_id=ID)
    finish(queue, "dead")
    made = queue.enqueue(TASK, args=[2], job_id=ID, debounce=30)
    assert made.state == "scheduled"
    assert queue.counts() == job_counts(scheduled=1)


# --- validation -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["expires", "unique_for", "debounce"])
@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("5", TypeError),
        (True, TypeError),
        ([1], TypeError),
        (0, ValueError),
        (-1, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        (1e12, ValueError),
    ],
)
def test_a_wrong_number_is_refused_naming_the_option(
    queue: Queue, name: str, value: Any, error: type[Exception]
) -> None:
    with pytest.raises(error, match=name):
        queue.enqueue(TASK, job_id=ID, **{name: value})
    with pytest.raises(error, match=name):
        queue.enqueue_many([{"task": TASK, "job_id": ID, name: value}])
    assert sum(queue.counts().values()) == 0


@pytest.mark.parametrize(
    ("options", "error", "names"),
    [
        ({"unique_by_args": 1}, TypeError, "unique_by_args"),
        ({"unique_by_args": "yes"}, TypeError, "unique_by_args"),
        ({"unique_for": 5}, ValueError, "unique_for needs an id"),
        ({"debounce": 5}, ValueError, "debounce needs an id"),
        ({"unique_by_args": True, "job_id": ID}, ValueError, "job_id or unique_by_args"),
        ({"unique_for": 5, "debounce": 5, "job_id": ID}, ValueError, "unique_for or debounce"),
        ({"unique_for": 5, "replace": True, "job_id": ID}, ValueError, "replace=True"),
        ({"debounce": 5, "delay": 1, "job_id": ID}, ValueError, "debounce .* no delay or at"),
        ({"unique_by_args": True, "args": [object()]}, TypeError, "unique_by_args"),
    ],
)
def test_conflicting_options_are_refused_naming_them(
    queue: Queue, options: dict[str, Any], error: type[Exception], names: str
) -> None:
    with pytest.raises(error, match=names):
        queue.enqueue(TASK, **options)
    assert sum(queue.counts().values()) == 0


def test_a_bad_item_in_a_batch_writes_nothing(queue: Queue) -> None:
    with pytest.raises(ValueError, match="unique_for"):
        queue.enqueue_many(
            [
                {"task": TASK, "job_id": "a", "unique_for": 5},
                {"task": TASK, "job_id": "b", "unique_for": -5},
            ]
        )
    assert sum(queue.counts().values()) == 0


@pytest.mark.parametrize(
    ("meta", "error"),
    [
        ({"max_attempts": 0}, ValueError),
        ({"retry_backoff": -5}, ValueError),
        ({"retry_on": "nope"}, TypeError),
        ({"retry_on": ["no.such.Error"]}, ValueError),
    ],
)
def test_a_worker_option_in_meta_is_checked_at_enqueue(
    queue: Queue, meta: dict[str, Any], error: type[Exception]
) -> None:
    """(A job's meta enqueued again carries its options: refused now, naming the key, not
    set aside when a worker reads it.)"""
    name = next(iter(meta))
    with pytest.raises(error, match=f"meta\\['{name}'\\]"):
        queue.enqueue(TASK, meta=meta)
    with pytest.raises(error, match=f"meta\\['{name}'\\]"):
        queue.enqueue_many([{"task": TASK, "meta": meta}])
    assert sum(queue.counts().values()) == 0
    kept = queue.enqueue(TASK, meta={"max_attempts": 3, "retry_on": ["builtins.KeyError"]})
    assert kept.meta == {"max_attempts": 3, "retry_on": ["builtins.KeyError"]}


def test_unknown_arguments_are_still_refused_by_name(queue: Queue) -> None:
    with pytest.raises(TypeError, match="uniq_for"):
        queue.enqueue_many([{"task": TASK, "uniq_for": 5}])
    with pytest.raises(TypeError, match="uniq_for"):
        queue.enqueue_many([{"task": TASK, "uniq_for": 5, "unique_for": 5, "job_id": ID}])
