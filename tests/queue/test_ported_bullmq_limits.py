"""BullMQ's tests of which job may start now, rewritten for the queue's keyed limits and its
pause (issue 27). Read at BullMQ 352d3c72bf (2026-08-21): ``tests/rate_limiter.test.ts``
(the worker's and the queue's rate limiter), ``tests/concurrency.test.ts`` (global
concurrency), ``tests/pause.test.ts``, and the pause cases of ``tests/queue.test.ts``
(``.getMeta``) and ``tests/worker.test.ts``. Each case is described in
``notes/issue27_peer_tests.md`` (sections 1 and 2) and rewritten here from that description.

BullMQ has one limiter and one concurrency number per *queue*, checked as a worker moves a
job to active; ours are per *key* (``rate_key``/``concurrency_key``), checked in the fetch
script, and a job over them is *parked*: uncharged, holding no worker slot, while jobs of
other keys go by. So "the whole queue waits" becomes "that key's jobs wait, the others do
not", and the limit is put on one key with, where it tells something, a second key or an
unkeyed job beside it. BullMQ's millisecond durations become whole seconds (``"2/s"``), and
our window is an exact sliding one: a start at *t* leaves it at *t* + the period, on the
Redis server's clock, so start times are read from the jobs' own start stamps (the server's
clock), and the workers' own clocks are used only for overlaps, with a slack. BullMQ
priority 1 is its highest; ours is the highest number, so every priority is translated.

The cases that need nothing but the queue's calls run on fakeredis, a real server and a real
Cluster (``queue``); those about a worker's behaviour run real worker processes on a real
server and Cluster (``live``). Two cases found bugs, since fixed: a parked job let go while
the queue was paused read back as parked, and a worker started the jobs it had leased
ahead of a pause.

What does not apply, and why:

* ``rate_limiter.test.ts``: ``when rate limit is removed > should execute jobs without rate
  limit`` and the ``setGlobalRateLimit``/``getGlobalRateLimit``/``removeGlobalRateLimit``
  cases, with ``queue.test.ts > .getMeta > should return global rate limit``: a queue-wide
  limit changed at run time; ours is a job option fixed at enqueue (kept: an unkeyed job
  beside rate-parked ones starts at once, no limit leaks onto it).
* ``when using flows > should obey the rate limit per queue``: parent/child flows, not in
  this library yet (kept: the same rate key on two queues is two limits).
* ``when dynamic limit is used > …`` (7 cases: ``worker.rateLimit(ms)`` with
  ``RateLimitError``, its missing job, too low a limit, max attempts, paused queue, removal
  and ``maximumRateLimitDelay``): a job closing the queue's limiter from inside has no
  equivalent; the nearest, ``RetryLater``, is kept as one idea: the re-run is a start and
  passes the rate again. (Its three priority cases are ported below.)
* ``when passing maxJobs when getting rate limit ttl > …`` (2 cases) and the ``-2`` of
  ``getRateLimitTtl`` for no limiter: ``RateLimit.peek()``'s, ported in
  ``tests/ratelimit/test_ported_bullmq.py``; a Redis PTTL detail. (The TTL read inside each
  job of ``should obey the rate limit`` becomes the fetch's wait, the time until a start is
  allowed.)
* ``concurrency.test.ts``: ``emits drained global event only once when worker is idle``: no
  event stream here; ``when moving job to waiting-children …``: workflows, later.
  ``getGlobalConcurrency()`` and ``queue.test.ts > .getMeta > should return global
  concurrency``: a queue meta hash; the nearest is why a parked job waits
  (``held_back``: "1 of 1 running"), asserted below.
* ``pause.test.ts``: ``should pause the queue locally``, ``should wait until active jobs are
  finished before resolving pause``, ``should pause the queue locally when more than one
  worker is active``, ``should wait for blocking job retrieval to complete before pausing
  locally``, ``should pause and resume worker without error``: a worker-local pause held in
  process memory; ours lives in Redis only (a worker's own stop is SIGTERM, tested with
  the worker).
* ``should rename the legacy paused list into wait on resume`` and ``should fully migrate
  the legacy paused list in batches on resume``: BullMQ's pre-v5 paused list; we have no
  legacy state (resuming a task with many parked jobs in batches is ``test_pause``'s).
* The event payloads of ``should be able to pause a running queue and emit relevant events``
  (``args``, event ids): no event stream; the pause itself is ported.
* BullMQ Pro groups (``pauseGroup``, per-group concurrency and rate, round-robin between
  groups): documented only, no tests in the free repository.
* A pause that holds across a worker restart is no BullMQ case (our own acceptance):
  ``test_worker_pause``.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

from django_redislock import get_queue, get_redis
from django_redislock.queue.jobs import Job
from django_redislock.queue.queue import Queue
from django_redislock.queue.worker.loop import Worker
from django_redislock.queue.worker.registry import live_workers
from django_redislock.tasks import task
from tests.keyed_tasks import SPANS, record
from tests.support.fixtures import Backend, Processes
from tests.support.waiting import Stalls, server_now, wait_for

TASK = "tests.tasks.record"  # not run by the queue-level tests: only its path matters
PLAIN = "tests.keyed_tasks.plain"  # (n, seconds): records its run's span
HERE = "tests.queue.test_ported_bullmq_limits"
RUNS = "test:bullmq:runs:{}"  # how many times slow_first_time(n) began
BEGAN = "test:bullmq:began"  # the ids of the marked jobs that began
QUIET = 0.5  # how long something that must not happen is watched for

# --- tasks the workers run ------------------------------------------------------------------


@task()
def slow_first_time(n: int, seconds: float) -> int:
    """Sleeps ``seconds`` on its first run only (a run killed then is quick the next time)."""
    runs = get_redis().incr(RUNS.format(n))
    start = time.time()
    if runs == 1:
        time.sleep(seconds)
    record(None, n, start)
    return n


@task()
def marked(n: int, seconds: float, until_alone: bool = False) -> int:
    """Says that it began (``BEGAN``), then runs ``seconds``; with ``until_alone``, then
    until its queue is paused and it is the queue's only running job (its worker gave back
    the jobs it leased ahead), at most 30 s more."""
    get_redis().rpush(BEGAN, n)
    start = time.time()
    time.sleep(seconds)
    deadline = time.monotonic() + 30
    queue = get_queue("default")
    while until_alone and time.monotonic() < deadline:
        if queue.paused() and queue.counts()["running"] == 1:
            break
        time.sleep(0.005)
    record(None, n, start)
    return n


@task()
def pause_own_queue(n: int) -> int:
    """Pauses its own queue from inside, then ends normally."""
    get_queue("default").pause(by="a job")
    record(None, n, time.time())
    return n


# --- helpers --------------------------------------------------------------------------------


@pytest.fixture
def queue(backend: Backend, settings: Any) -> Queue:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {
            "default": {"LEASE": 30, "MAX_ATTEMPTS": 3, "RETRY_BACKOFF": 0},
            "other": {"LEASE": 30},
        },
    }
    return get_queue("default")


@pytest.fixture
def live(real_backend: Backend, settings: Any) -> Queue:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": 2, "MAX_ATTEMPTS": 3, "RETRY_BACKOFF": 0.01}},
    }
    get_redis().delete(SPANS)
    return get_queue("default")


def run_worker(concurrency: int) -> None:
    Worker(["default"], concurrency=concurrency).run()


def spans() -> list[dict[str, Any]]:
    return [json.loads(s) for s in get_redis().lrange(SPANS, 0, -1)]


def ran() -> list[int]:
    return [span["n"] for span in spans()]


def most_at_once(runs: list[dict[str, Any]]) -> int:
    """The most of ``runs`` (start/end spans) that overlapped in time."""
    edges = sorted([(r["start"], 1) for r in runs] + [(r["end"], -1) for r in runs])
    now = most = 0
    for _, step in edges:  # an end sorts before a start at the same instant
        now += step
        most = max(most, now)
    return most


def most_in_a_window(stamps: list[int], period_ms: int) -> int:
    """The most of ``stamps`` (ms) within any window [t, t + period)."""
    stamps = sorted(stamps)
    return max(
        (sum(1 for u in stamps[i:] if u < t + period_ms) for i, t in enumerate(stamps)),
        default=0,
    )


def start_as_allowed(queue: Queue, count: int, *, timeout: float = 15) -> list[Job]:
    """Fetch again and again (each refused re-check must cost nothing) until ``count`` jobs
    started; each is finished at once. Returns them as read while they ran (``started``:
    the server's stamp of the start, epoch ms), in the order they started."""
    started: list[Job] = []

    def more() -> bool:
        for job in queue.fetch(10, worker="w").jobs:
            started.append(queue.get(job.id))
            assert queue.ack(job)
        return len(started) >= count

    wait_for(more, timeout, f"{count} jobs started")
    assert len(started) == count, "more jobs started than there were to start"
    return started


def quiet_fetches(queue: Queue) -> float | None:
    """Fetch until the queue has nothing more to do at once; asserts that nothing starts.
    Returns the last wait."""
    for _ in range(5):
        fetched = queue.fetch(10, worker="w")
        assert fetched.jobs == []
        if fetched.wait != 0:
            return fetched.wait
    raise AssertionError("the queue kept asking to be fetched again at once")


def held(queue: Queue, key: str) -> int:
    """Permits of concurrency key ``key`` out (jobs of it running)."""
    return int(queue.client.zlexcount(queue.keys.held, f"[{key}\x00", f"({key}\x01"))


def once_server_reaches(ms: float) -> None:
    wait_for(lambda: server_now() * 1000 >= ms, 5, "the server's clock passed the window")


# === rate_limiter.test.ts ==================================================================


def test_a_job_over_its_rate_is_parked_not_delayed_and_not_charged(queue: Queue) -> None:
    # should not put a job into the delayed queue when limit is hit (1 per s, 5 jobs)
    jobs = [queue.enqueue(TASK, [n], rate_key="report", rate="1/s") for n in range(5)]
    fetched = queue.fetch(5, worker="w")
    assert [job.id for job in fetched.jobs] == [jobs[0].id]
    counts = queue.counts()
    assert {state: counts[state] for state in ("running", "parked", "scheduled", "ready")} == {
        "running": 1,
        "parked": 4,
        "scheduled": 0,  # not put off to a due time: parked
        "ready": 0,
    }
    assert [job.id for job in queue.jobs("parked")] == [job.id for job in jobs[1:]]
    for job in jobs[1:]:
        seen = queue.get(job.id)
        assert seen.state == "parked"
        assert (seen.attempts, seen.failures, seen.errors) == (0, 0, ())
        assert queue.held_back(seen) == "rate key report: 1 starts per 1 s"
    # The limiter's "TTL" as a worker is told it: the time until a start is allowed.
    assert fetched.wait is not None
    assert 0 < fetched.wait <= 1


def test_starts_keep_to_the_rate_in_every_window_and_each_key_has_its_own(queue: Queue) -> None:
    # should obey the rate limit (1 per s), ... with max value greater than 1 (2 per s), and
    # when setting rate limit globally > should obey the rate limit: here "2/s" on two keys;
    # with when a job never completed > should not block the rate limit: the first job of
    # key A runs on for the whole test.
    for n in range(4):
        for key in ("A", "B"):
            queue.enqueue(TASK, [n], rate_key=f"acct:{key}", rate="2/s", meta={"key": key})
    free = queue.enqueue(TASK, [99])  # no rate key: nothing of theirs applies to it
    hung = queue.fetch(1, worker="hung").jobs[0]  # A's first, never finished here
    started = [queue.get(hung.id), *start_as_allowed(queue, 8)]
    assert free.id in [job.id for job in started[:5]]  # in the first fetch
    stamps = {key: [j.started for j in started if j.meta.get("key") == key] for key in "AB"}
    for key, times in stamps.items():
        assert len(times) == 4
        assert most_in_a_window(times, 1000) <= 2, f"key {key}: over 2 starts in a second"
        assert max(times) - min(times) >= 1000  # the 3rd start a full second after the 1st
    # Independent: B's first pair started in the very fetch that filled A's window (its
    # second start), not once A's window had room again.
    assert sorted(stamps["B"])[:2] == [sorted(stamps["A"])[1]] * 2
    assert queue.get(hung.id).state == "running"


def test_a_job_that_runs_on_holds_up_a_concurrency_key_not_a_rate_key(queue: Queue) -> None:
    # (the contrast drawn in when a job never completed > should not block the rate limit:
    # a rate counts starts, a concurrency limit running jobs)
    for key in ("rate", "limit"):
        options: dict[str, Any] = (
            {"rate_key": "r", "rate": "2/m"} if key == "rate" else {"concurrency_key": "c"}
        )
        runs_on = queue.enqueue(TASK, [0], **options)
        behind = queue.enqueue(TASK, [1], **options)
        got = [job.id for job in queue.fetch(10, worker="w").jobs]
        if key == "rate":
            assert got == [runs_on.id, behind.id]  # two starts of "2/m": both go
        else:
            assert got == [runs_on.id]  # the first runs on: the second waits
            assert queue.get(behind.id).state == "parked"


def test_jobs_parked_by_a_rate_start_by_priority_then_in_order(queue: Queue) -> None:
    # when priority is provided > should obey the rate limit respecting priority (BullMQ
    # priorities 9, 8, 7 added while the limiter is held: ours 1, 2, 3), > when priority is
    # the same for some jobs > should get jobs in fifo order, > when priority is different
    # for some jobs > should get jobs in fifo order (BullMQ 1, 2, 1, 2: ours 10, 0, 10, 0).
    # One rate key per case, side by side.
    cases = {"added": (1, 2, 3), "same": (0, 0, 0, 0), "different": (10, 0, 10, 0)}
    for key in cases:  # fill each key's window: its limiter is held
        for n in range(4):
            queue.enqueue(TASK, [n], rate_key=key, rate="4/s", meta={"key": key})
    fillers = queue.fetch(20, worker="w").jobs
    assert len(fillers) == 12
    for key, priorities in cases.items():
        for n, p in enumerate(priorities):
            queue.enqueue(TASK, [n], priority=p, rate_key=key, rate="4/s", meta={"key": key})
    assert queue.fetch(20, worker="w").jobs == []
    assert queue.counts()["parked"] == 11
    once_server_reaches(max(queue.get(job.id).started for job in fillers) + 1000)
    order: dict[str, list[int]] = {key: [] for key in cases}

    def one_by_one() -> bool:
        for job in queue.fetch(1, worker="w").jobs:
            order[job.meta["key"]].append(job.args[0])
            queue.ack(job)
        return sum(map(len, order.values())) == 11

    wait_for(one_by_one, 5, "the parked jobs started")
    assert order == {
        "added": [2, 1, 0],  # the last added is the highest
        "same": [0, 1, 2, 3],
        "different": [0, 2, 1, 3],
    }


def test_a_pause_between_rate_windows_keeps_the_rest_waiting_and_resume_keeps_the_pace(
    queue: Queue,
) -> None:
    # when queue is paused between rate limit > should add active jobs to wait ("1/2s" and 4
    # workers there; "1/s" here, the fetches standing for the workers).
    jobs = [queue.enqueue(TASK, [n], rate_key="r", rate="1/s") for n in range(4)]
    (first,) = queue.fetch(10, worker="w").jobs
    began = queue.get(first.id).started
    queue.pause()
    assert queue.ack(first)
    once_server_reaches(began + 1000)  # the window opens while the queue is paused
    assert quiet_fetches(queue) is None  # paused: nothing to do, whatever is due
    counts = queue.counts()  # let go by their rate, kept ready by the pause
    assert (counts["running"], counts["ready"], counts["parked"]) == (0, 3, 0)
    assert [job.id for job in queue.jobs("ready")] == [job.id for job in jobs[1:]]
    assert all(queue.get(job.id).attempts == 0 for job in jobs[1:])
    queue.resume()
    fetched = queue.fetch(10, worker="w")
    if not fetched.jobs and fetched.wait == 0:  # (let go by this fetch, started by the next)
        fetched = queue.fetch(10, worker="w")
    assert [job.id for job in fetched.jobs] == [jobs[1].id]  # at the rate's pace, not all
    assert fetched.wait is not None
    assert 0 < fetched.wait <= 1


@pytest.fixture
def one_server_queue(redis_backend: Backend, settings: Any) -> Queue:
    """``queue`` on the real server only (for the suspected bug below: once is enough)."""
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"LEASE": 30}}}
    return get_queue("default")


@pytest.mark.parametrize("held_by", ["rate", "limit"])
def test_a_job_let_go_while_the_queue_is_paused_shows_the_state_it_is_counted_in(
    one_server_queue: Queue, held_by: str
) -> None:
    # (what the pause between rate windows leaves, read job by job; and the same with a
    # concurrency key whose permit frees while the queue is paused)
    queue = one_server_queue
    if held_by == "rate":
        options: dict[str, Any] = {"rate_key": "r", "rate": "1/s"}
    else:
        options = {"concurrency_key": "c"}
    queue.enqueue(TASK, [0], **options)
    second = queue.enqueue(TASK, [1], **options)
    (first,) = queue.fetch(10, worker="w").jobs
    began = queue.get(first.id).started
    assert quiet_fetches(queue) is not None
    assert queue.get(second.id).state == "parked"
    queue.pause()
    assert queue.ack(first)
    if held_by == "rate":
        once_server_reaches(began + 1000)
    assert quiet_fetches(queue) is None
    assert (queue.counts()["ready"], queue.counts()["parked"]) == (1, 0)
    assert [job.id for job in queue.jobs("ready")] == [second.id]
    assert queue.get(second.id).state == "ready"  # actual: "parked"


def test_a_scheduled_job_of_another_key_starts_on_time_beside_a_rate_parked_key(
    queue: Queue,
) -> None:
    # when there are delayed jobs to promote > should promote jobs after
    # maximumRateLimitDelay: here no delay at all for the other key (no head-of-line block).
    for n in range(2):
        queue.enqueue(TASK, [n], rate_key="a", rate="1/10s")
    assert len(queue.fetch(10, worker="w").jobs) == 1  # the other parked for ~10 s
    other = queue.enqueue(TASK, [2], delay=0.2)
    own = queue.enqueue(TASK, [3], rate_key="a", rate="1/10s", delay=0.2)
    started: list[Job] = []
    empty: list[float] = []  # the server's clock (ms) before each fetch that started nothing

    def other_started() -> bool:
        before = server_now() * 1000
        fetched = [queue.get(job.id) for job in queue.fetch(10, worker="w").jobs]
        if not fetched:
            empty.append(before)
        started.extend(fetched)
        return bool(started) and queue.get(own.id).state == "parked"

    wait_for(other_started, 30, "the other key's scheduled job started")
    assert [job.id for job in started] == [other.id]
    # On time, not after the 10 s window: the first fetch once it was due started it.
    assert started[0].started >= other.score
    assert all(before < other.score for before in empty), "a fetch once it was due left it"
    assert queue.counts()["parked"] == 2  # the due job of the rate-parked key parks too


def test_the_same_rate_key_on_two_queues_is_two_limits(queue: Queue) -> None:
    # (the idea kept from when using flows > should obey the rate limit per queue)
    other = get_queue("other")
    for q in (queue, other):
        for n in range(2):
            q.enqueue(TASK, [n], rate_key="shared", rate="1/m")
    assert len(queue.fetch(10, worker="w").jobs) == 1
    assert len(other.fetch(10, worker="w").jobs) == 1
    assert queue.counts()["parked"] == other.counts()["parked"] == 1


def test_a_re_run_after_retry_later_is_a_start_that_passes_the_rate_again(queue: Queue) -> None:
    # (the idea kept from when dynamic limit is used: RetryLater is our nearest)
    job = queue.enqueue(TASK, [1], rate_key="r", rate="1/m")
    (running,) = queue.fetch(1, worker="w").jobs
    assert queue.snooze(running, 0.05)
    restarted: list[Job] = []

    def met_again() -> bool:  # once due again, a fetch meets it: its rate parks it
        restarted.extend(queue.fetch(10, worker="w").jobs)
        return queue.get(job.id).state == "parked"

    wait_for(met_again, 5, "the re-run was parked by the rate")
    assert restarted == []
    assert (queue.get(job.id).attempts, queue.get(job.id).failures) == (1, 0)


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("limit", ["rate", "concurrency"])
def test_after_resume_no_job_starts_before_one_of_a_higher_priority(
    live: Queue, processes: Processes, limit: str
) -> None:
    # should obey priority (a paused queue, 10 jobs of 4 priorities, a limiter that lets one
    # go at a time, resume): with a rate ("2/s", 4 jobs) and with a concurrency limit of 1.
    if limit == "rate":
        options: dict[str, Any] = {"rate_key": "r", "rate": "2/s"}
        priorities = [2, 4, 1, 3]
    else:
        options = {"concurrency_key": "c", "concurrency_limit": 1}
        priorities = [1, 3, 2, 4, 1, 3, 2, 4, 4, 1]
    live.pause()
    jobs = [live.enqueue(PLAIN, [n, 0.0], priority=p, **options) for n, p in enumerate(priorities)]
    processes.start(run_worker, 4)
    wait_for(lambda: len(live_workers()) == 1, what="the worker registered")
    live.resume()
    if limit == "rate":  # the first window's two are the two highest; the others wait
        wait_for(lambda: len(ran()) == 2, timeout=10, what="the first window's jobs ran")
        wait_for(lambda: live.counts()["parked"] == 2, what="the others parked")
        assert sorted(priorities[n] for n in ran()) == [3, 4]
        assert {live.get(jobs[n].id).attempts for n in (0, 2)} == {0}
    else:  # one at a time: in the order they ran
        wait_for(lambda: len(ran()) == len(jobs), timeout=15, what="every job ran")
        assert ran() == sorted(range(len(jobs)), key=lambda n: (-priorities[n], n))


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_parked_jobs_run_time_and_time_limit_count_from_its_start(
    live: Queue, processes: Processes
) -> None:
    # should respect processing time without adding limiter delay: finished - started is the
    # body's own time; and a time limit counts from the start, not from the parking.
    first = live.enqueue(PLAIN, [0, 0.9], concurrency_key="solo")
    # Counted from its enqueue or its parking, its limit would end it (0.9 + 0.1 > 0.7).
    second = live.enqueue(PLAIN, [1, 0.1], concurrency_key="solo", time_limit=0.7)
    processes.start(run_worker, 2)
    wait_for(lambda: live.counts()["parked"] == 1, what="the second job parked")
    wait_for(lambda: sorted(ran()) == [0, 1], timeout=15, what="both jobs ran")
    wait_for(lambda: live.get(second.id).state == "done", what="the second job acknowledged")
    done = live.get(second.id)
    assert (done.error, done.attempts) == ("", 1)
    assert done.started - done.enqueued >= 850  # parked behind the first for 0.9 s
    # Its start is stamped as it started, after the first ended, so its run time is its own
    # (no bound in ms here: a stalled worker may take longer than 0.1 s), and its 0.7 s
    # limit, counted from that start, did not end it (no error above).
    assert done.started >= live.get(first.id).finished - 50


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_worker_stops_at_once_beside_a_rate_parked_job_and_the_next_worker_starts_it(
    live: Queue, processes: Processes
) -> None:
    # should quickly close a worker even with slow rate-limit (1 per 60 s there: "1/s" here,
    # so that the window also opens while no worker is alive).
    first = live.enqueue(PLAIN, [0, 0.0], rate_key="slow", rate="1/s")
    second = live.enqueue(PLAIN, [1, 0.0], rate_key="slow", rate="1/s")
    worker = processes.start(run_worker, 2)
    wait_for(lambda: ran() == [0], what="the first job ran")
    wait_for(lambda: live.get(second.id).state == "parked", what="the second job parked")
    with Stalls() as stalls:
        asked = time.monotonic()
        os.kill(worker.pid or 0, signal.SIGTERM)
        worker.join(30)
        stopped = time.monotonic()
        assert worker.exitcode is not None, "the worker did not stop"
        # Nothing running to wait for (unless this process stood still meanwhile).
        assert stopped - asked < 1.0 or stalls.between(asked, stopped)
    parked = live.get(second.id)
    assert (parked.state, parked.attempts, parked.lease) == ("parked", 0, None)
    once_server_reaches(live.get(first.id).started + 1000)  # the window opens, no worker
    assert ran() == [0]
    came = server_now() * 1000
    processes.start(run_worker, 2)
    wait_for(lambda: ran() == [0, 1], timeout=30, what="the next worker started it")
    assert live.get(second.id).started >= came  # (not before: no worker was alive)
    assert live.get(second.id).attempts == 1


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_running_jobs_of_a_key_never_overlap_past_its_rate_or_limit(
    live: Queue, processes: Processes
) -> None:
    # rate_limiter.test.ts > when there are more added jobs than max limiter > processes jobs
    # as max limiter from the beginning, and > when rate limit is max 1: jobs shorter than
    # the period never overlap past the rate's count, and a burst of the full count may
    # start at once. And concurrency.test.ts > when global dynamic limit is used > should run
    # max concurrency … respecting global dynamic limit (and > when max limiter is greater
    # than 1): a concurrency limit of 1 and a rate of "2/s" on the same jobs both hold.
    for n in range(6):
        live.enqueue(PLAIN, [n, 0.4], rate_key="x", rate="3/s")
    for n in range(100, 102):
        live.enqueue(PLAIN, [n, 0.4], rate_key="y", rate="1/s")
    both = {"concurrency_key": "z", "concurrency_limit": 1, "rate_key": "z", "rate": "2/s"}
    z = [live.enqueue(PLAIN, [n, 0.1], **both) for n in range(200, 204)]
    processes.start(run_worker, 12)
    wait_for(lambda: len(ran()) == 12, timeout=15, what="every job ran")
    runs = spans()
    assert most_at_once([r for r in runs if r["n"] < 100]) == 3  # the count at once, no more
    assert most_at_once([r for r in runs if 100 <= r["n"] < 200]) == 1
    assert most_at_once([r for r in runs if r["n"] >= 200]) == 1
    wait_for(lambda: all(live.get(j.id).state == "done" for j in z), what="acknowledged")
    stamps = [live.get(job.id).started for job in z]  # the server's
    assert most_in_a_window(stamps, 1000) <= 2
    assert max(stamps) - min(stamps) >= 1000


# === concurrency.test.ts ===================================================================


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_limit_of_one_runs_a_keys_jobs_one_after_the_other_in_order(
    live: Queue, processes: Processes
) -> None:
    # should run max concurrency for jobs added (global concurrency 1, worker concurrency 10),
    # and its twin without the limit (worker concurrency 2: two at once): the same worker
    # runs the unkeyed jobs side by side, so the limit is what serialises the keyed ones.
    for n in range(6):
        live.enqueue(PLAIN, [n, 0.1], concurrency_key="all", concurrency_limit=1)
    for n in range(100, 106):
        live.enqueue(PLAIN, [n, 0.1])
    processes.start(run_worker, 4)
    wait_for(lambda: len(ran()) == 12, timeout=15, what="every job ran")
    runs = spans()
    keyed = sorted((r for r in runs if r["n"] < 100), key=lambda r: r["start"])
    assert most_at_once(keyed) == 1
    assert [r["n"] for r in keyed] == list(range(6))  # in the order they were enqueued
    assert most_at_once([r for r in runs if r["n"] >= 100]) >= 2


def test_a_job_held_back_by_one_limit_takes_nothing_of_the_other(queue: Queue) -> None:
    # (the atomic half of the same: checked together, charged together)
    both = {"concurrency_key": "c", "concurrency_limit": 1, "rate_key": "r", "rate": "2/m"}
    a = queue.enqueue(TASK, [0], **both)
    b = queue.enqueue(TASK, [1], **both)
    (running,) = queue.fetch(10, worker="w").jobs
    assert running.id == a.id
    assert queue.held_back(queue.get(b.id)) == "concurrency key c: 1 of 1 running"
    # Parked by the limit, b used no start: a job of the rate alone takes the second one.
    d = queue.enqueue(TASK, [2], rate_key="r", rate="2/m")
    assert [job.id for job in queue.fetch(10, worker="w").jobs] == [d.id]
    # Now the limit frees, but the rate is spent (a and d): b parks by the rate ...
    assert queue.ack(running)
    assert quiet_fetches(queue) is not None
    assert queue.get(b.id).state == "parked"
    assert held(queue, "c") == 0
    # ... holding no permit: a job of the limit alone starts.
    e = queue.enqueue(TASK, [3], concurrency_key="c", concurrency_limit=1)
    assert [job.id for job in queue.fetch(10, worker="w").jobs] == [e.id]


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_jobs_killed_with_their_worker_give_their_permits_back_after_the_lease(
    live: Queue, processes: Processes, settings: Any
) -> None:
    # should automatically process stalled jobs respecting group order (global concurrency
    # 2, worker concurrency 4, the worker force-closed while 2 run; a second one runs all 4).
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"LEASE": 1}}}
    live = get_queue("default")
    slow = f"{HERE}.slow_first_time"
    options = {"concurrency_key": "pair", "concurrency_limit": 2}
    jobs = [live.enqueue(slow, [n, 30.0 if n < 2 else 0.1], **options) for n in range(4)]
    victim = processes.start(run_worker, 4)
    wait_for(lambda: live.counts()["parked"] == 2, what="two jobs parked")
    client = get_redis()
    wait_for(
        lambda: client.exists(RUNS.format(0)) and client.exists(RUNS.format(1)), what="two ran"
    )
    os.kill(victim.pid or 0, signal.SIGKILL)
    victim.join(5)
    processes.start(run_worker, 4)
    most = 0

    def all_ran() -> bool:
        nonlocal most
        most = max(most, held(live, "pair"))
        return len(ran()) == 4

    # Well before the killed jobs' 30 s would end: their permits came back with their 1 s
    # leases (and a new worker's start, however slow the machine).
    wait_for(all_ran, timeout=20, what="every job ran")
    assert most <= 2
    assert sorted(ran()) == [0, 1, 2, 3]
    assert most_at_once(spans()) <= 2
    wait_for(lambda: all(live.get(j.id).state == "done" for j in jobs), what="acknowledged")
    assert [live.get(job.id).attempts for job in jobs] == [2, 2, 1, 1]  # the killed ran again
    assert held(live, "pair") == 0


@pytest.mark.parametrize(("delay", "count"), [(0.1, 2), (0, 7)])
def test_retried_jobs_of_a_limited_key_all_finish_and_never_overlap(
    queue: Queue, delay: float, count: int
) -> None:
    # when jobs use backoff strategy > processes jobs without getting stuck (2 jobs, backoff
    # 100 ms), and > when backoff is 0 (7 jobs): each fails its first run.
    jobs = [queue.enqueue(TASK, [n], concurrency_key="one") for n in range(count)]
    running: list[Job] = []
    finished: set[str] = set()

    def step() -> bool:
        got = queue.fetch(10, worker="w").jobs
        if running:  # the key is busy: nothing of it may start
            assert got == [], "a second job of a limit-1 key started"
            job = running.pop()
            if job.attempts == 1:
                assert queue.retry(job, delay=delay)
            else:
                assert queue.ack(job, "null")
                finished.add(job.id)
        else:
            assert len(got) <= 1
            running.extend(got)
        return len(finished) == count

    wait_for(step, 10, "every job finished")
    for job in jobs:
        done = queue.get(job.id)
        assert (done.state, done.attempts, done.failures) == ("done", 2, 1)
    assert held(queue, "one") == 0
    assert queue.counts()["parked"] == 0


ENDINGS: dict[str, Callable[[Queue, Job], object]] = {
    "ack": lambda q, job: q.ack(job),
    "retry": lambda q, job: q.retry(job, delay=60),
    "dead": lambda q, job: q.bury(job, "gone"),
    "RetryLater": lambda q, job: q.snooze(job, 60),
    "give back": lambda q, job: q.release([job]),
    "lease lapse": lambda q, job: None,  # its lease (0.1 s) runs out
}


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_every_way_a_running_job_leaves_frees_its_permit(queue: Queue, ending: str) -> None:
    # when lock is expired and removing a job in active state > does not get stuck in max
    # state: whichever way the running job leaves, the parked one (or it) starts at once.
    a = queue.enqueue(TASK, [0], concurrency_key="one")
    b = queue.enqueue(TASK, [1], concurrency_key="one")
    lease = 0.1 if ending == "lease lapse" else None
    (running,) = queue.fetch(10, lease, worker="w").jobs
    assert running.id == a.id
    assert quiet_fetches(queue) is not None
    assert queue.held_back(queue.get(b.id)) == "concurrency key one: 1 of 1 running"
    ENDINGS[ending](queue, running)
    started: list[Job] = []

    def one_started() -> bool:
        started.extend(queue.fetch(10, worker="w").jobs)
        return bool(started)

    wait_for(one_started, 5, "a job of the key started")
    assert len(started) == 1
    assert held(queue, "one") == 1
    if ending in ("give back", "lease lapse"):  # a back, never started or not finished
        assert started[0].id in (a.id, b.id)
    else:
        assert started[0].id == b.id


# === pause.test.ts, queue.test.ts, worker.test.ts ==========================================


@pytest.mark.parametrize("paused", ["queue", "task"])
def test_a_delayed_job_becoming_due_while_paused_does_not_start(queue: Queue, paused: str) -> None:
    # should not process delayed jobs (pause; a job delayed 300 ms; after 500 ms not run:
    # 150 ms here, and fetched until there is nothing more to do)
    queue.pause(task=TASK if paused == "task" else None)
    job = queue.enqueue(TASK, [1], delay=0.15)
    assert (queue.counts()["scheduled"], queue.counts()["ready"]) == (1, 0)
    once_server_reaches(job.score)
    quiet_fetches(queue)
    counts = queue.counts()
    assert counts["scheduled"] == 0
    if paused == "queue":  # a paused queue keeps its jobs ready
        assert (counts["ready"], counts["parked"], queue.get(job.id).state) == (1, 0, "ready")
    else:  # a paused task's jobs park as a fetch meets them
        assert (counts["ready"], counts["parked"], queue.get(job.id).state) == (0, 1, "parked")
    queue.resume(task=TASK if paused == "task" else None)
    assert [j.id for j in queue.fetch(10, worker="w").jobs] == [job.id]


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_job_pausing_its_queue_finishes_and_nothing_more_runs_until_resume_wakes_the_worker(
    live: Queue, processes: Processes
) -> None:
    # should be able to pause a running queue (its first job pauses it; the second waits
    # until resumed), and should pause a queue until resumed (jobs added while paused run
    # only after resume, none before; here resume must wake the idle worker, not wait for
    # its next look).
    pauser = live.enqueue(f"{HERE}.pause_own_queue", [0])
    live.enqueue(PLAIN, [1, 0.0])
    processes.start(run_worker, 1)
    wait_for(lambda: live.get(pauser.id).state == "done", what="the pausing job finished")
    assert live.paused() == {"*"}
    live.enqueue(PLAIN, [2, 0.0])  # accepted while paused
    time.sleep(QUIET)
    assert ran() == [0]
    assert live.counts()["ready"] == 2
    resumed = time.monotonic()
    live.resume()
    wait_for(lambda: len(ran()) >= 2, timeout=5, what="a job ran after resume")
    woke = time.monotonic() - resumed
    wait_for(lambda: ran() == [0, 1, 2], timeout=5, what="both jobs ran, in order")
    assert woke < 0.5, f"resume took {woke:.2f} s to start a job: found at a poll, not woken"


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_jobs_a_worker_leased_ahead_do_not_start_once_the_queue_is_paused(
    live: Queue, processes: Processes
) -> None:
    # should pause a queue until resumed / should be able to pause a running queue, with the
    # worker serving one job at a time on quick jobs, so that it leases a few ahead: the
    # queue is paused while a job runs; the jobs behind it must wait for resume.
    for n in range(40):  # quick: the worker leases more and more ahead
        live.enqueue(PLAIN, [n, 0.0])
    live.enqueue(f"{HERE}.marked", [1000, 0.1, True])  # paused while it runs
    for n in range(100, 140):
        live.enqueue(PLAIN, [n, 0.0])
    processes.start(run_worker, 1)
    client = get_redis()
    wait_for(lambda: client.llen(BEGAN) == 1, what="the marked job began")
    leased_ahead = live.counts()["running"] - 1
    live.pause()
    wait_for(lambda: 1000 in ran(), what="the marked job finished")
    time.sleep(0.3)  # (those leased ahead start within milliseconds)
    after = [n for n in ran() if 100 <= n < 1000]
    # What this case is about: jobs were leased ahead when the pause came. The marked job
    # runs on until its worker gave them back (the keeper sees the pause; on a machine too
    # busy for that, a job running past GIVE_BACK_AFTER gives them back too): none starts.
    assert leased_ahead > 0
    assert after == [], f"{len(after)} jobs started after the pause ({leased_ahead} leased ahead)"


def test_pause_returns_at_once_while_a_job_runs_and_that_job_finishes(queue: Queue) -> None:
    # pauses fast when queue is drained, and worker.test.ts > should resume processing after
    # pause with doNotWaitActive: our pause never waits for the running jobs.
    job = queue.enqueue(TASK, [1])
    (running,) = queue.fetch(1, worker="w").jobs
    with Stalls() as stalls:
        asked = time.monotonic()
        assert queue.pause()
        paused = time.monotonic()
        assert paused - asked < 0.5 or stalls.between(asked, paused)  # (unless we stood still)
    assert queue.get(job.id).state == "running"
    assert queue.ack(running, "1")  # it finishes, acknowledged normally
    assert queue.get(job.id).state == "done"
    assert queue.counts()["running"] == 0


def test_paused_says_what_is_paused(queue: Queue) -> None:
    # gets the right response from isPaused, and queue.test.ts > .getMeta > should return
    # paused; a task not deployed yet may be paused (BullMQ Pro pauses unknown groups).
    assert queue.paused() == set()
    assert queue.pause()
    assert queue.paused() == {"*"}
    assert queue.resume()
    assert queue.paused() == set()
    assert queue.pause(task="a.b")
    assert queue.paused() == {"a.b"}
    assert queue.pause()
    assert queue.paused() == {"*", "a.b"}
    assert queue.pause(task="not.yet.deployed")
    assert queue.resume(task="a.b")
    assert queue.paused() == {"*", "not.yet.deployed"}


@pytest.mark.parametrize("paused", ["queue", "task"])
def test_a_job_failing_while_paused_waits_for_resume_to_run_again(
    queue: Queue, paused: str
) -> None:
    # when backoff is 0 > moves job into paused queue (the job pauses the queue and fails
    # with backoff 0: back to waiting, run again once resumed).
    target = TASK if paused == "task" else None
    job = queue.enqueue(TASK, [1])
    (running,) = queue.fetch(1, worker="w").jobs
    queue.pause(task=target)
    assert queue.retry(running, delay=0)
    quiet_fetches(queue)
    waiting = queue.get(job.id)
    assert waiting.state == ("ready" if paused == "queue" else "parked")
    assert (waiting.attempts, waiting.failures) == (1, 1)
    queue.resume(task=target)
    (again,) = queue.fetch(1, worker="w").jobs
    assert again.id == job.id
    assert again.attempts == 2


def test_a_paused_queue_hands_out_nothing_and_does_not_block(queue: Queue) -> None:
    # worker.test.ts > shouldn't block when disabled and paused: the low-level calls obey
    # the pause, and return at once.
    queue.enqueue(TASK, [1])
    queue.pause()

    def both() -> tuple[Any, Any]:
        return queue.pop(5, worker="w"), queue.pop_and_wait(5, worker="w")

    with Stalls() as stalls:  # a run that a stall of this process overlapped is done again
        popped, took = stalls.timed(both)
    assert popped == ([], ([], None))
    assert took < 0.5
    assert queue.counts()["ready"] == 1
    queue.resume()
    queue.pause(task=TASK)
    other = queue.enqueue("tests.tasks.slow", [2, 0])
    assert [job.id for job in queue.pop(5, worker="w")] == [other.id]  # only the paused task
