"""good_job's concurrency-control and pause tests, ported onto our keyed limits and pauses
in our own words and code (issue 27). Read from the good_job snapshot 81db22b7cf (v4.19.2):
``spec/lib/good_job/active_job_extensions/concurrency_spec.rb`` with
``concurrency_rule_spec.rb``, and the pause specs (``spec/app/models/good_job/setting_spec.rb``
"pause settings", ``job_spec.rb`` ``.exclude_paused``, ``spec/lib/good_job_spec.rb``).

good_job checks ``perform_limit``/``perform_throttle`` after a worker claimed the job and, over
the limit, records a ``ConcurrencyExceededError`` and retries it with a backoff. Ours parks the
job in Redis at fetch: state ``parked``, no attempt, no error, no worker slot. Each port keeps
the peer's setup and numbers and inverts those assertions. good_job's Timecop travel cannot
move Redis's clock: the throttle ports use a real 1 s window, measured on the server's clock.
Queue-level tests run on fakeredis, a real server and Cluster; those with real worker
processes on the real server and Cluster.

What does not apply, and why:

- ``enqueue_limit``, ``total_limit`` and ``enqueue_throttle`` (both APIs), the rule specs
  "label application and enqueue limits", "with an enqueue throttle rule" and the enqueue
  half of "with a multipart rule": they refuse enqueues; ours accepts every enqueue and
  decides at start.
- The ``enqueue_concurrency_limit_exceeded`` notifications and "aborted enqueues are not
  logged as enqueued": ActiveSupport instrumentation, and nothing is ever refused at enqueue.
- Labels (``good_job_labels``, ``label:`` rules, the Labels inclusion, rules stored on the
  class; ``pause(label:)``): we have no labels; the key template is the only key.
- "uses the class name as the default concurrency key": a task without ``concurrency_key``
  is not limited at all (ported as the unconfigured case below).
- ``perform_limit: 0`` as "never run": a limit below 1 is a ValueError; pausing the task
  holds it instead.
- ``retry_on ConcurrencyExceededError`` with its polynomial backoff, and every "an execution
  with the error exists" check: a parked job is not run, so nothing is recorded (inverted
  below, not ported as such).
- Advisory locks and ``Rails.application.executor.wrap``: Postgres and Rails mechanics.
- ``enable_pauses`` (off by default in good_job): our pauses are always on.
- The pause storage assertions (one JSON settings row) and ``paused(:queues)`` /
  ``paused(:job_classes)`` by kind: ``paused()`` is one set, ``"*"`` for the whole queue.
- "pause needs exactly one of queue/job_class/label": our one optional ``task`` cannot name
  two targets; what is left, a malformed path, is ported as input validation.
- The pauses controller and system specs: the admin's buttons and the management commands
  are tested in ``tests/admin/test_admin_limits.py`` and
  ``tests/management/test_pause_commands.py``.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

from django_redislock import get_queue, get_redis
from django_redislock.queue import execution
from django_redislock.queue.fetching import Fetched
from django_redislock.queue.queue import Queue
from django_redislock.queue.worker.loop import Worker
from django_redislock.tasks import task
from tests.support.counts import job_counts
from tests.support.fixtures import Backend, Processes
from tests.support.waiting import wait_for

try:  # Django 6
    from django.tasks import TaskResultStatus
except ImportError:  # Django 5.2: the backport
    from django_tasks import TaskResultStatus

HERE = __name__  # the tasks below run under this module's path
RUNS = "test:good_job:runs"  # one JSON object per run: name, n, when it started, pid
QUIET = 0.5  # how long a test watches for a start that must not come


def gate(n: int) -> str:
    """The list job ``n`` waits on until the test lets it finish."""
    return f"test:good_job:gate:{n}"


def open_gate(n: int) -> None:
    get_redis().rpush(gate(n), "go")


def held_run(name: str, n: int) -> int:
    """Record the start, then wait for the test to open the job's gate (10 s at most)."""
    client = get_redis()
    client.rpush(RUNS, json.dumps({"name": name, "n": n, "at": time.time(), "pid": os.getpid()}))
    client.blpop([gate(n)], timeout=10)
    return n


def started() -> list[int]:
    """The ``n`` of every run so far, in the order they started."""
    return [json.loads(run)["n"] for run in get_redis().lrange(RUNS, 0, -1)]


@task()
def unkeyed(name: str, n: int) -> int:
    return held_run(name, n)


@task(concurrency_key="gj-report:{name}")  # the default limit: 1
def report(name: str, n: int) -> int:
    return held_run(name, n)


@task(concurrency_key="gj-report:{name}")
def summary(name: str, n: int) -> int:
    """Under the same key as ``report``, and calls it directly from its own body."""
    return int(report.call(name, n)) * 10


@task(rate_key="gj-throttle:{name}", rate="1/s")
def throttled(name: str, n: int) -> int:
    return n


@task(concurrency_key="gj-pair:{name}", concurrency_limit=1, rate_key="gj-pair:{name}", rate="1/s")
def paired(name: str, n: int) -> int:
    return n


@task(concurrency_key="gj-stripe:{account}")
def charge(account: int, cents: int) -> int:
    return cents


@task(concurrency_key="gj-stripe:{account}")
def refund(account: int, cents: int) -> int:
    return -cents


@task(concurrency_key="gj-v1:{name}", max_attempts=3, retry_backoff=0)
def deployed(name: str, n: int, fail_first: bool = False) -> int:
    """With ``fail_first``, fails its first run (once its gate opens), succeeds the next."""
    tries = get_redis().incr(f"test:good_job:tries:{n}")
    held_run(name, n)
    if fail_first and tries == 1:
        raise RuntimeError("the first run fails")
    return n


@task()
def quick(name: str, n: int) -> int:
    get_redis().rpush(RUNS, json.dumps({"name": name, "n": n, "at": time.time()}))
    return n


@task()
def other(name: str, n: int) -> int:
    return quick.call(name, n)


REPORT, QUICK, OTHER = f"{HERE}.report", f"{HERE}.quick", f"{HERE}.other"
TASKS = {"default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend", "QUEUES": []}}


@pytest.fixture
def queue(backend: Backend, settings: Any) -> Queue:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": 30, "RETRY_BACKOFF": 0}, "other": {"LEASE": 30}},
    }
    settings.TASKS = TASKS
    return get_queue("default")


@pytest.fixture
def real_queue(real_backend: Backend, settings: Any) -> Queue:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": 5, "MAX_ATTEMPTS": 3, "RETRY_BACKOFF": 0}},
    }
    settings.TASKS = TASKS
    return get_queue("default")


def run_worker(concurrency: int) -> None:
    Worker(["default"], concurrency=concurrency).run()


def run_worker_after_a_deploy(concurrency: int) -> None:
    """A worker whose code has moved on: ``deployed`` now declares another key template."""
    path = f"{HERE}.deployed"
    globals()["deployed"] = deployed.using(concurrency_key="gj-v2:{name}")
    execution._resolved.pop(path, None)  # as a freshly started process: nothing resolved yet
    assert execution.resolve_task(path).concurrency_key == "gj-v2:{name}"  # what it runs
    run_worker(concurrency)


def fetch_until(queue: Queue, count: int, timeout: float = 5.0) -> list[Any]:
    """Fetch until ``count`` jobs were handed out, sleeping as the fetches say."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} jobs started"
        fetched: Fetched = queue.fetch(count - len(got), worker="w")
        got += fetched.jobs
        if not fetched.jobs:
            time.sleep(min(fetched.wait if fetched.wait is not None else 0.05, 0.05))
    return got


def ids(jobs: list[Any]) -> list[str]:
    return [job.id for job in jobs]


# --- concurrency_spec.rb ----------------------------------------------------------------------


def test_a_task_without_a_concurrency_key_is_not_limited(queue: Queue) -> None:
    """ "when extension is only included but not configured > does not limit concurrency":
    the default limit of 1 applies to no key when there is no key."""
    jobs = [unkeyed.enqueue("Alice", n) for n in range(3)]
    jobs.append(queue.enqueue(f"{HERE}.unkeyed", ["Alice", 3]))
    got = queue.fetch(4, worker="w").jobs
    assert sorted(ids(got)) == sorted(job.id for job in jobs)
    assert queue.counts()["parked"] == 0
    assert all("concurrency" not in queue.get(job.id).meta for job in jobs)


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_jobs_without_a_key_run_side_by_side_in_a_worker(
    real_queue: Queue, processes: Processes
) -> None:
    """The same with a worker of three threads: all three run at once."""
    results = [unkeyed.enqueue("Alice", n) for n in range(3)]
    processes.start(run_worker, 3)
    wait_for(lambda: sorted(started()) == [0, 1, 2], timeout=10, what="three at once")
    assert real_queue.counts()["running"] == 3
    for n in range(3):
        open_gate(n)

    def all_done() -> bool:
        return all(unkeyed.get_result(r.id).status == TaskResultStatus.SUCCESSFUL for r in results)

    wait_for(all_done, timeout=10, what="all three done")


def test_over_its_limit_a_job_is_parked_uncharged_then_runs_once(queue: Queue) -> None:
    """ "perform_limit > errors and retry jobs if concurrency is exceeded", inverted: no error,
    no attempt while it waits; it runs once the first one ends, as its first attempt."""
    first = report.enqueue("Alice", 1)
    second = report.enqueue("Alice", 2)
    (running,) = queue.fetch(5, worker="w").jobs
    assert running.id == first.id
    waiting = queue.get(second.id)
    assert (waiting.state, waiting.attempts, waiting.errors) == ("parked", 0, ())
    assert queue.held_back(waiting) == "concurrency key gj-report:Alice: 1 of 1 running"
    assert report.get_result(second.id).attempts == 0
    assert queue.fetch(5, worker="w").jobs == []  # however often it is met
    assert queue.get(second.id).attempts == 0
    queue.ack(running)
    (let_go,) = queue.fetch(5, worker="w").jobs
    assert let_go.id == second.id
    assert let_go.attempts == 1
    queue.ack(let_go)
    assert queue.counts()["parked"] == 0


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_parked_job_runs_in_a_worker_as_soon_as_the_holder_ends(
    real_queue: Queue, processes: Processes
) -> None:
    """The same through the Tasks API and a worker of two threads: the second job waits
    parked (READY to the framework, no attempt), then succeeds at its first attempt."""
    first = report.enqueue("Alice", 1)
    second = report.enqueue("Alice", 2)
    processes.start(run_worker, 2)
    wait_for(lambda: started() == [1], timeout=10, what="the first started")
    wait_for(lambda: real_queue.get(second.id).state == "parked", timeout=10, what="parked")
    time.sleep(QUIET)
    assert started() == [1]  # the worker's free thread did not take it
    parked = report.get_result(second.id)
    assert (parked.status, parked.attempts, parked.errors) == (TaskResultStatus.READY, 0, [])
    open_gate(1)
    ended = time.monotonic()
    wait_for(lambda: started() == [1, 2], timeout=10, what="the parked one started")
    assert time.monotonic() - ended < 5  # woken by the end, not found at a poll
    open_gate(2)
    for result in (first, second):
        wait_for(lambda r=result: report.get_result(r.id).status == TaskResultStatus.SUCCESSFUL)
        done = report.get_result(result.id)
        assert (done.attempts, done.errors) == (1, [])


def test_a_direct_call_takes_no_permit(queue: Queue) -> None:
    """ "perform_limit > is ignored with the job is executed via perform_now": calling the
    task's function while its key's only permit is held runs it here and now."""
    holder = report.enqueue("Alice", 1)
    (running,) = queue.fetch(5, worker="w").jobs
    assert running.id == holder.id
    before = queue.counts()
    open_gate(7)
    began = time.monotonic()
    assert report.call("Alice", 7) == 7
    assert time.monotonic() - began < 5  # did not wait for the permit
    assert started() == [7]
    assert queue.counts() == before  # nothing enqueued, parked or charged


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_task_called_inside_another_job_takes_no_permit(
    real_queue: Queue, processes: Processes
) -> None:
    """ "perform_limit > is ignored when the job is executed inside another job": ``summary``
    holds the key's one permit and calls ``report`` of the same key directly."""
    open_gate(4)
    outer = summary.enqueue("Alice", 4)
    processes.start(run_worker, 1)
    wait_for(
        lambda: summary.get_result(outer.id).status == TaskResultStatus.SUCCESSFUL,
        timeout=10,
        what="the outer job finished",
    )
    assert summary.get_result(outer.id).return_value == 40
    assert started() == [4]
    assert real_queue.counts()["parked"] == 0


def test_a_throttled_key_starts_one_job_a_second_oldest_first(queue: Queue) -> None:
    """ "#perform_throttle > does not perform if throttle period has not passed" ([1, 1
    minute]) on a real 1 s window: one starts, the others wait parked; a second later the
    oldest of them, and only it, starts, a full second after the first on Redis's clock."""
    jobs = [throttled.enqueue("Alice", n) for n in range(3)]
    fetched = queue.fetch(5, worker="w")
    assert ids(fetched.jobs) == [jobs[0].id]
    assert fetched.wait is not None
    assert 0 < fetched.wait <= 1
    assert [queue.get(job.id).state for job in jobs[1:]] == ["parked", "parked"]
    assert queue.held_back(queue.get(jobs[1].id)) == "rate key gj-throttle:Alice: 1 starts per 1 s"
    first_start = queue.get(jobs[0].id).started  # Redis's clock, ms
    queue.ack(fetched.jobs[0])  # the end of a run gives nothing back: starts count
    assert queue.fetch(5, worker="w").jobs == []
    (second,) = fetch_until(queue, 1)
    assert second.id == jobs[1].id
    assert queue.get(second.id).started - first_start >= 1000
    assert queue.fetch(5, worker="w").jobs == []
    third = queue.get(jobs[2].id)
    assert (third.state, third.attempts) == ("parked", 0)


def test_a_limit_and_a_throttle_on_a_key_taken_from_an_argument(queue: Queue) -> None:
    """ "perform_limit: together with perform_throttle:" (limit 1, throttle 1 per period,
    the key from ``name``): Alice's second job waits for her first to end, then for the
    window; Bob's first starts beside Alice's at once."""
    alice = [paired.enqueue("Alice", n) for n in range(2)]
    bob = paired.enqueue(name="Bob", n=9)
    got = queue.fetch(5, worker="w").jobs
    assert sorted(ids(got)) == sorted([alice[0].id, bob.id])
    assert queue.held_back(queue.get(alice[1].id)).startswith("concurrency key gj-pair:Alice")
    first_start = queue.get(alice[0].id).started
    queue.ack(next(job for job in got if job.id == alice[0].id))  # the permit is free...
    assert queue.fetch(5, worker="w").jobs == []  # ...the window is not
    assert queue.held_back(queue.get(alice[1].id)) == "rate key gj-pair:Alice: 1 starts per 1 s"
    (second,) = fetch_until(queue, 1)
    assert second.id == alice[1].id
    assert queue.get(second.id).started - first_start >= 1000


def test_the_rendered_key_is_stored_with_the_job_and_shown(queue: Queue) -> None:
    """ "legacy > perform_limit" (the key from ``arguments.first[:name]``; the stored
    ``concurrency_key`` is "Alice"): the key is rendered at enqueue, the same however the
    call names its arguments, and shown with the parked jobs."""
    by_position = report.enqueue("Alice", 1)
    by_name = report.enqueue(n=2, name="Alice")
    for result in (by_position, by_name):
        assert queue.get(result.id).meta["concurrency"] == {"key": "gj-report:Alice", "limit": 1}
    queue.fetch(5, worker="w")
    (listed,) = queue.jobs("parked")
    assert listed.id == by_name.id
    assert listed.meta["concurrency"]["key"] == "gj-report:Alice"
    assert "gj-report:Alice" in queue.held_back(listed)


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_retry_keeps_the_key_rendered_at_enqueue(real_queue: Queue, processes: Processes) -> None:
    """ "#good_job_concurrency_key > when retrying a job > preserves the value": the worker
    runs code whose template has changed since the enqueue. The failed job's retry waits
    under the key it was enqueued with, behind the job that took that key's permit."""
    first = deployed.enqueue("Alice", 1, fail_first=True)
    second = deployed.enqueue("Alice", 2)
    processes.start(run_worker_after_a_deploy, 2)
    wait_for(lambda: started() == [1], timeout=10, what="the first started")
    wait_for(lambda: real_queue.get(second.id).state == "parked", timeout=10, what="parked")
    open_gate(1)  # the first run fails; the second job takes the permit
    wait_for(lambda: started() == [1, 2], timeout=10, what="the second started")
    wait_for(lambda: real_queue.get(first.id).state == "parked", timeout=10, what="retry parked")
    time.sleep(QUIET)
    assert started() == [1, 2]  # not run beside the holder under a new key
    retry = real_queue.get(first.id)
    assert retry.meta["concurrency"] == {"key": "gj-v1:Alice", "limit": 1}
    assert real_queue.held_back(retry) == "concurrency key gj-v1:Alice: 1 of 1 running"
    open_gate(2)
    open_gate(1)
    wait_for(
        lambda: deployed.get_result(first.id).status == TaskResultStatus.SUCCESSFUL,
        timeout=10,
        what="the retry succeeded",
    )
    assert started() == [1, 2, 1]
    done = deployed.get_result(first.id)
    assert (done.attempts, len(done.errors)) == (2, 1)


@pytest.mark.parametrize(
    "value",
    [
        {"id": 7},
        ["Alice", "Bob"],
        [7],
        True,
    ],
)
def test_a_field_value_that_is_not_a_scalar_is_refused_at_enqueue(queue: Queue, value: Any) -> None:
    """ "#perform_later > raises an error for non-serializable types" (a Hash, an Array as
    key): a TypeError when enqueued, naming the option; nothing is pushed."""
    with pytest.raises(TypeError, match="concurrency_key"):
        report.enqueue(value, 1)
    with pytest.raises(TypeError, match="concurrency_key"):
        queue.enqueue(REPORT, [value, 1], concurrency_key="gj-report:{0}")
    assert queue.counts()["ready"] == 0


def test_two_tasks_with_the_same_key_share_its_permits_within_a_queue(queue: Queue) -> None:
    """concurrency_rule_spec "without labels > enforces concurrency across job classes":
    ``charge`` and ``refund`` of account 7 never run at once; account 8 is apart, and so is
    the same key on another queue."""
    paid = charge.enqueue(7, 500)
    returned = refund.enqueue(7, 200)
    elsewhere = refund.enqueue(8, 100)
    got = queue.fetch(5, worker="w").jobs
    assert sorted(ids(got)) == sorted([paid.id, elsewhere.id])
    assert queue.get(returned.id).state == "parked"
    other_queue = get_queue("other")
    there = other_queue.enqueue(f"{HERE}.refund", [7, 300], concurrency_key="gj-stripe:{0}")
    assert ids(other_queue.fetch(5, worker="w").jobs) == [there.id]
    queue.ack(next(job for job in got if job.id == paid.id))
    assert ids(queue.fetch(5, worker="w").jobs) == [returned.id]


def test_a_field_whose_value_is_none_is_refused_at_enqueue(queue: Queue) -> None:
    """legacy "when concurrency key returns nil > does not limit concurrency": our key has
    no "none" value, so a None field must not silently put unrelated jobs under one key."""
    with pytest.raises(ValueError, match="concurrency_key"):
        report.enqueue(None, 1)
    assert queue.counts()["ready"] == 0


# --- pause specs ------------------------------------------------------------------------------


def test_pausing_twice_is_pausing_once(queue: Queue) -> None:
    """Setting ".pause > inserts values" and "does not insert duplicate": each target is
    listed once, and one resume undoes two pauses."""
    assert queue.pause(task=QUICK)
    assert not queue.pause(task=QUICK)
    assert queue.pause()
    assert not queue.pause()
    assert queue.paused() == {QUICK, "*"}
    assert queue.resume(task=QUICK)
    assert queue.resume()
    assert queue.paused() == set()
    job = quick.enqueue("Alice", 1)
    assert ids(queue.fetch(5, worker="w").jobs) == [job.id]


def test_resuming_what_is_not_paused_is_a_harmless_no(queue: Queue) -> None:
    """Setting ".unpause > safely handles non-existent settings": no error, False."""
    job = quick.enqueue("Alice", 1)
    assert not queue.resume()
    assert not queue.resume(task=QUICK)
    assert not queue.resume(task="never.paused.task")
    assert queue.paused() == set()
    assert ids(queue.fetch(5, worker="w").jobs) == [job.id]


def test_resuming_one_of_two_paused_tasks_lets_only_its_jobs_go(queue: Queue) -> None:
    """Setting ".unpause > removes the job class from the paused list" (two paused, one
    unpaused: the other stays paused)."""
    queue.pause(task=QUICK)
    queue.pause(task=OTHER)
    quicks = [quick.enqueue("Alice", n) for n in range(2)]
    others = [other.enqueue("Alice", n) for n in range(2)]
    assert queue.fetch(10, worker="w").jobs == []
    assert queue.counts()["parked"] == 4
    assert queue.resume(task=QUICK)
    assert queue.paused() == {OTHER}
    assert ids(fetch_until(queue, 2)) == ids(quicks)
    assert queue.fetch(10, worker="w").jobs == []
    assert [queue.get(job.id).state for job in others] == ["parked", "parked"]


def test_resuming_the_queue_leaves_a_paused_task_paused(queue: Queue) -> None:
    """good_job_spec "can pause and unpause jobs" (the queue and a class paused; unpausing
    the queue leaves the class paused), and the other way round."""
    paused_task = quick.enqueue("Alice", 1)
    free = other.enqueue("Alice", 2)
    queue.pause()
    queue.pause(task=QUICK)
    assert queue.resume(task=QUICK)  # the queue is still paused: nothing starts
    assert queue.paused() == {"*"}
    assert queue.fetch(10, worker="w").jobs == []
    queue.pause(task=QUICK)
    assert queue.resume()
    assert queue.paused() == {QUICK}
    assert ids(fetch_until(queue, 1)) == [free.id]
    assert queue.fetch(10, worker="w").jobs == []
    assert queue.get(paused_task.id).state == "parked"


def test_a_paused_tasks_jobs_ahead_in_line_block_no_one(queue: Queue) -> None:
    """job_spec ".exclude_paused > excludes jobs with paused job_classes": the paused task's
    jobs are ahead (older, and of a higher priority), yet the others start; a worker's
    small fetches never come back empty-handed for good."""
    ahead = [quick.using(priority=10).enqueue("Alice", n) for n in range(5)]
    behind = [other.enqueue("Bob", n) for n in range(2)]
    queue.pause(task=QUICK)
    got = fetch_until(queue, 2)
    assert sorted(ids(got)) == sorted(ids(behind))
    for job in ahead:
        held = queue.get(job.id)
        assert (held.state, held.attempts) == ("parked", 0)
        assert queue.held_back(held) == "its task is paused"


def test_with_nothing_paused_nothing_is_parked(queue: Queue) -> None:
    """job_spec ".exclude_paused > returns all jobs when nothing is paused"."""
    jobs = [quick.enqueue("Alice", n) for n in range(3)] + [other.enqueue("Bob", 3)]
    assert queue.paused() == set()
    assert queue.counts() == job_counts(ready=4)
    assert ids(queue.fetch(10, worker="w").jobs) == ids(jobs)
    assert queue.counts()["parked"] == 0


@pytest.mark.parametrize("target", ["", "*", " ", "a..b", ".a", "a.", "a.b ", "a b", "a-b.c"])
def test_a_pause_target_that_is_not_a_path_pauses_nothing(queue: Queue, target: str) -> None:
    """Setting ".pause > raises ArgumentError if no valid argument is provided": refused,
    and nothing is paused or parked by the refused call."""
    job = quick.enqueue("Alice", 1)
    with pytest.raises(ValueError, match="task"):
        queue.pause(task=target)
    assert queue.paused() == set()
    assert ids(queue.fetch(5, worker="w").jobs) == [job.id]


def test_a_task_not_declared_anywhere_may_be_paused(queue: Queue) -> None:
    """good_job pauses any job class name: a well-formed path is enough (a task about to
    be deployed can be held before its first job)."""
    assert queue.pause(task="shop.tasks.not_written_yet")
    assert queue.paused() == {"shop.tasks.not_written_yet"}
    job = quick.enqueue("Alice", 1)
    assert ids(queue.fetch(5, worker="w").jobs) == [job.id]


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_one_at_a_time_worker_runs_around_a_paused_task_then_resumes_it_in_order(
    real_queue: Queue, processes: Processes
) -> None:
    """ ".exclude_paused" with a real worker of one thread (which leases jobs ahead): the
    paused task's jobs, ahead in line, wait; the others run; resumed, they run in order."""
    for n in range(5):
        quick.using(priority=10).enqueue("Alice", n)
    for n in range(10, 13):
        other.enqueue("Bob", n)
    real_queue.pause(task=QUICK)
    processes.start(run_worker, 1)
    wait_for(lambda: started() == [10, 11, 12], timeout=10, what="the others ran")
    wait_for(lambda: real_queue.counts()["parked"] == 5, timeout=10, what="all five parked")
    time.sleep(QUIET)
    assert started() == [10, 11, 12]
    real_queue.resume(task=QUICK)
    wait_for(lambda: len(started()) == 8, timeout=10, what="the paused jobs ran")
    assert started() == [10, 11, 12, 0, 1, 2, 3, 4]
