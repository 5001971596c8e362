"""Sidekiq Enterprise's limiters, as its wiki describes them, ported onto our job limits
(issue 27). Sidekiq Enterprise publishes no code and no tests, so what is ported here is the
documented behaviour, in our own tests: the wiki page "Ent Rate Limiting"
(sidekiq.org/wiki/Ent-Rate-Limiting, "last synchronized 2026-02-20", and the GitHub wiki's
revisions of 2015-07-29, 2017-08-02, 2021-10-15, 2023-05-03 and 2023-07-06), with the
OverLimit backoff as sidekiq issue #2530 describes it. Each test names the part of the page
it mirrors:

* "Concurrent": at most N operations of a name at once, for every process on one Redis; a
  limit of 1 is a distributed mutex; a waiter gets a freed lock within milliseconds (no
  polling); a crashed holder's lock comes back after ``lock_timeout``, and an operation must
  finish within it. Ours: at most N running jobs of a rendered concurrency key in the queue;
  a permit is held from the job's lease to the end of its run and follows the lease, so a
  dead worker's permit comes back when its lease lapses, and a live worker's long job keeps
  its permit however long it runs (the wiki's warning, inverted).
* "Bucket" (clock-aligned windows: five calls at 12:42:51.999 and five more at
  12:42:52.000) and "Window" (sliding, from first use, any whole number of seconds). Ours
  is an exact sliding window of starts on Redis's clock, so the bucket's second burst is
  inverted: the sixth start of "5/s" is a full second after the first, whatever second
  boundary lies between.
* "OverLimit" (the job is rescheduled with a growing backoff, at most 20 times, counted
  apart from retries, then failed through the retry path). Inverted: a job over its limit
  is parked in Redis, uncharged, without error, backoff or cap, and starts once a permit (or
  the window) allows it.
* "Limiting is not throttling" and stacked limiters: ours puts a concurrency key and a rate
  key on one job; each is its own limit, and a job held back by one takes nothing of the
  other.
* The metrics (held, waited, overages, reclaimed): what a user can see of them here is the
  parked count in ``counts()`` and, for a reclaimed permit, the lapse recorded on the job.

What does not apply, and why:

* ``wait_timeout`` and ``policy: :raise/:ignore/:skip``: no job waits inside a worker or is
  skipped; the limit is checked at fetch, and a job over it waits parked in Redis.
* The OverLimit exception, the ``reschedule`` cap and the ``overrated`` counter: nothing is
  raised or rescheduled, so there is nothing to cap or count (tested inverted).
* ``config.errors << MyError`` (a task's own error taken as OverLimit): no error a task
  raises means "over the limit" here; ``RetryLater`` is the tool.
* The ``leaky`` limiter, ``points`` limiters and ``within_limit(used: n)``: job rates have
  no burst or cost option.
* The per-limiter metrics (held and wait times, immediate/waited counts): jobs keep none per
  key; what shows is the parked count and the lapse on the job (tested above).
* ``Sidekiq::Limiter.unlimited``, ``reset``/``delete``, the metadata ``ttl``, the
  ``lmtr-*`` keys and the Web UI's Limits tab: Sidekiq's own API and UI, no job behaviour.
* Names of letters, digits, ``-`` and ``_`` only: our keys follow the lock-name rules, tested
  with the templates in ``test_concurrency_keys``.
* One limiter shared by web code and jobs on the same Redis: job keys live in their queue's
  namespace, apart from ``RateLimit`` and ``Semaphore`` objects of the same name.
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
from django_redislock.queue.queue import Job, Queue
from django_redislock.queue.worker import waiter
from django_redislock.queue.worker.loop import Worker
from django_redislock.queue.worker.registry import live_workers
from django_redislock.ratelimit.rate import parse_rate
from django_redislock.tasks import task
from tests.support.fixtures import Backend, Processes
from tests.support.waiting import server_now, wait_for

HOLD, BUMP = f"{__name__}.hold", f"{__name__}.bump"
RECORD = "tests.tasks.record"  # never run here: the API tests fetch and acknowledge by hand
# Where the tasks below write, for the test to read outside the workers.
BEGUN, ENDED = "test:sidekiq:begun", "test:sidekiq:ended"
COUNTER, BUMPED = "test:sidekiq:counter", "test:sidekiq:bumped"


@task()
def hold(label: str, key: str, seconds: float = 0.0, first_run_only: bool = False) -> str:
    """Note its start, run ``seconds`` (only on its first run with ``first_run_only``), note
    its end."""
    client = get_redis()
    began = time.time()
    client.rpush(BEGUN, json.dumps({"label": label, "key": key, "at": began}))
    if not first_run_only or client.set(f"test:sidekiq:once:{label}", 1, nx=True):
        time.sleep(seconds)
    span = {"label": label, "key": key, "start": began, "end": time.time()}
    client.rpush(ENDED, json.dumps(span))
    return label


@task()
def bump() -> None:
    """Add one to a counter without any atomicity: read, think, write. Two runs at once lose
    an update."""
    client = get_redis()
    seen = int(client.get(COUNTER) or 0)
    time.sleep(0.02)
    client.set(COUNTER, seen + 1)
    client.rpush(BUMPED, os.getpid())


def records(name: str) -> list[dict[str, Any]]:
    return [json.loads(r) for r in get_redis().lrange(name, 0, -1)]


def labels(name: str) -> list[str]:
    return [r["label"] for r in records(name)]


LOOK_EVERY = 30.0


def run_worker(concurrency: int) -> None:
    Worker(["default"], concurrency=concurrency).run()


def run_worker_looking_rarely(concurrency: int) -> None:
    """A worker that, idle, looks for work by itself every 30 s only (1 s by default): what
    it starts sooner, a wake-up told it to."""
    waiter.MAX_BLOCK = LOOK_EVERY
    run_worker(concurrency)


def overlapping(spans: list[dict[str, Any]]) -> int:
    """The most of ``spans`` that ran at the same moment."""
    edges = sorted([(s["start"], 1) for s in spans] + [(s["end"], -1) for s in spans])
    now = most = 0
    for _, step in edges:  # at one instant, an end comes before a start
        now += step
        most = max(most, now)
    return most


def most_in_a_window(stamps: list[int], period: int) -> int:
    """The most of ``stamps`` (ms) in any window [t, t + period)."""
    ordered = sorted(stamps)
    return max(
        (sum(1 for u in ordered[i:] if u < t + period) for i, t in enumerate(ordered)), default=0
    )


def started(queue: Queue, jobs: list[Job]) -> list[int]:
    """When each of ``jobs`` started, on Redis's clock (ms), as the queue stored it."""
    return [queue.get(job.id).started for job in jobs]


def start_when_allowed(queue: Queue, count: int, timeout: float = 5.0) -> list[Job]:
    """Fetch until ``count`` jobs have started, sleeping the waits the fetches name."""
    got: list[Job] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} jobs started"
        fetched = queue.fetch(count - len(got), worker="w")
        got += fetched.jobs
        if not fetched.jobs and fetched.wait:
            time.sleep(min(fetched.wait, 0.5))
    return got


@pytest.fixture
def queue(backend: Backend, settings: Any) -> Queue:
    """A queue worked by hand, through the calls a worker makes: fakeredis, server, Cluster."""
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": 30, "MAX_ATTEMPTS": 3, "RETRY_BACKOFF": 0}},
    }
    return get_queue("default")


def for_workers(settings: Any, lease: float) -> Queue:
    """The queue real worker processes work (they inherit these settings), with ``lease``."""
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": lease, "MAX_ATTEMPTS": 3, "RETRY_BACKOFF": 0.01}},
    }
    return get_queue("default")


@pytest.fixture
def worked(real_backend: Backend, settings: Any) -> Queue:
    """A queue for real worker processes, with a short lease: server and Cluster."""
    return for_workers(settings, 2)


# --- Concurrent -------------------------------------------------------------------------------


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_concurrent_a_limit_of_one_is_a_mutex_across_processes_and_threads(
    worked: Queue, processes: Processes
) -> None:
    """Concurrent, "a limit of 1 is a distributed mutex": sixteen unguarded
    read-think-write increments, run by two workers of four threads each, lose nothing."""
    for _ in range(16):
        worked.enqueue(BUMP, concurrency_key="counter", concurrency_limit=1)
    for _ in range(2):
        processes.start(run_worker, 4)
    wait_for(lambda: worked.client.llen(BUMPED) == 16, timeout=20, what="every bump ran")
    assert int(worked.client.get(COUNTER)) == 16  # (without the key: a fraction of it)


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_concurrent_a_freed_permit_reaches_an_idle_worker_at_once_not_at_its_next_look(
    worked: Queue, processes: Processes
) -> None:
    """Concurrent, "blocking does not poll; a waiter gets the lock within milliseconds of
    its release": the end of a run (done, failed and retried, given back) starts the next
    job of its key in an idle worker at once. The worker here looks by itself every 30 s
    only, so a start well before that was a wake-up, however slow the machine."""
    holders = [
        worked.enqueue(HOLD, [f"a{i}", f"k{i}"], concurrency_key="{1}", priority=10)
        for i in range(5)
    ]
    for i in range(5):
        worked.enqueue(HOLD, [f"b{i}", f"k{i}"], concurrency_key="{1}")
    held = worked.fetch(10, lease=60, worker="test").jobs  # this test holds the five permits
    assert sorted(job.id for job in held) == sorted(job.id for job in holders)
    assert worked.counts()["parked"] == 5
    processes.start(run_worker_looking_rarely, 2)
    wait_for(live_workers, what="the worker is up")
    time.sleep(0.3)
    assert records(BEGUN) == []  # and idle: every key's permit is out
    ends: list[Callable[[Job], object]] = [
        worked.ack,
        lambda job: worked.retry(job, delay=60),
        lambda job: worked.release([job]),
        worked.ack,
        lambda job: worked.retry(job, delay=60),
    ]
    lags = []
    for i, (job, end) in enumerate(zip(held, ends, strict=True)):
        time.sleep(0.03 + 0.07 * i)  # (never in step with the worker's own looks)
        ended = time.time()
        end(job)
        wait_for(lambda i=i: any(r["key"] == f"k{i}" for r in records(BEGUN)), timeout=60)
        lags.append(min(r["at"] for r in records(BEGUN) if r["key"] == f"k{i}") - ended)
    # (a few ms, as measured; a look would have come 30 s after the worker's last one)
    assert max(lags) < LOOK_EVERY / 3, lags


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_concurrent_a_killed_holders_permit_comes_back_when_its_lease_lapses_not_before(
    real_backend: Backend, settings: Any, processes: Processes
) -> None:
    """Concurrent, ``lock_timeout``: "a crashed process does not hold a lock forever". Ours:
    the permit of a SIGKILLed worker's job returns once that job's lease lapses (not before,
    and at once then); the killed job is delivered again, charged the attempt it lost, and
    needs a permit again like any other (its key's runs never overlap)."""
    worked = for_workers(settings, 1)
    first = worked.enqueue(HOLD, ["a", "solo", 30.0, True], concurrency_key="{1}")
    victim = processes.start(run_worker, 1)
    wait_for(lambda: labels(BEGUN) == ["a"], what="the holder started")
    second = worked.enqueue(HOLD, ["b", "solo"], concurrency_key="{1}")
    processes.start(run_worker, 2)
    wait_for(lambda: worked.counts()["parked"] == 1, what="the second job parked")
    assert victim.pid
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(5)
    lapse = float(worked.client.zscore(worked.keys.run, first.id)) / 1000  # renewed no more
    wait_for(lambda: sorted(labels(ENDED)) == ["a", "b"], timeout=15, what="both ran")
    after = [r["at"] for r in records(BEGUN)[1:]]
    assert min(after) >= lapse - 0.005  # nothing of the key started while the lease lasted
    assert min(after) - lapse < 1.0  # and the idle worker took it up at the lapse
    assert overlapping(records(ENDED)) == 1
    # (a job records its end as it returns; its acknowledgement reaches Redis just after)
    wait_for(lambda: worked.counts()["running"] == 0, what="both acknowledged")
    again = worked.get(first.id)
    assert (again.state, again.attempts, again.failures) == ("done", 2, 1)
    assert "lease ran out" in again.errors[0].error  # the reclaimed permit, as a user sees it
    other = worked.get(second.id)
    assert (other.state, other.attempts, other.errors) == ("done", 1, ())


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_concurrent_a_job_running_past_its_lease_keeps_its_permit_while_its_worker_lives(
    real_backend: Backend, settings: Any, processes: Processes
) -> None:
    """Concurrent, "your operations must take less than lock_timeout", inverted: a job
    running three times its lease, its worker alive, keeps its permit (renewed with the
    lease); the next job of its key starts only when it ends, and it is not run twice."""
    queue = for_workers(settings, 1)
    long = queue.enqueue(HOLD, ["long", "k", 3.0], concurrency_key="{1}")
    queue.enqueue(HOLD, ["next", "k"], concurrency_key="{1}")
    processes.start(run_worker, 4)  # free threads to spare
    wait_for(lambda: len(records(ENDED)) == 2, timeout=15, what="both ran")
    spans = {r["label"]: r for r in records(ENDED)}
    assert spans["next"]["start"] >= spans["long"]["end"]
    assert labels(BEGUN).count("long") == 1
    done = queue.get(long.id)
    assert (done.attempts, done.errors) == (1, ())


# --- OverLimit, inverted ----------------------------------------------------------------------


def test_overlimit_a_parked_job_is_never_rescheduled_charged_or_given_up_on(queue):
    """OverLimit: Sidekiq reschedules the job with a backoff (300 s x overrated + up to
    300 s), at most 20 times, then fails it into the retry path. Ours, inverted: however
    often a fetch finds it still over its limit, a parked job is not rescheduled, not
    charged, not failed; with max_attempts=1 it still runs, once, as soon as the permit
    frees, and ends well."""
    holder = queue.enqueue(RECORD, [0], concurrency_key="solo")
    waiting = queue.enqueue(RECORD, [1], concurrency_key="solo", max_attempts=1)
    (running,) = queue.fetch(10, worker="w").jobs
    assert running.id == holder.id
    for _ in range(25):  # more checks than Sidekiq's 20 reschedules
        assert queue.fetch(10, worker="w").jobs == []
        job = queue.get(waiting.id)
        assert (job.state, job.attempts, job.failures, job.errors, job.reason) == (
            "parked",
            0,
            0,
            (),
            "",
        )
    counts = queue.counts()
    assert (counts["parked"], counts["scheduled"], counts["dead"]) == (1, 0, 0)
    assert queue.ack(running)
    (after,) = queue.fetch(10, worker="w").jobs  # the permit freed: no backoff to sit out
    assert (after.id, after.attempts) == (waiting.id, 1)
    assert queue.ack(after, "1")
    job = queue.get(waiting.id)
    assert (job.state, job.attempts, job.failures, job.errors) == ("done", 1, 0, ())


# --- Bucket and Window ------------------------------------------------------------------------


def test_bucket_inverted_no_second_burst_across_a_clock_second_boundary(queue):
    """Bucket: "5 operations at 12:42:51.999, then 5 more at 12:42:52.000". Ours, inverted:
    five starts late in one server second leave the next second's early fetches with
    nothing; the sixth start comes a full second after the first. The refused fetches
    cost the window nothing: the five others then start together."""
    jobs = [queue.enqueue(RECORD, [n], rate_key="api", rate="5/s") for n in range(10)]
    while not 0.88 <= server_now() % 1 < 0.93:  # late in a second of Redis's clock
        time.sleep(min(0.02, (0.88 - server_now()) % 1))
    first = queue.fetch(10, worker="w")
    assert len(first.jobs) == 5
    assert queue.counts()["parked"] == 5
    burst = started(queue, first.jobs)
    boundary = (min(burst) // 1000 + 1) / 1000  # where a clock-aligned bucket would refill
    time.sleep(max(0.0, boundary + 0.05 - server_now()))
    for _ in range(10):
        refused = queue.fetch(10, worker="w")
        assert refused.jobs == []
        assert (refused.wait or 0) > 0.6
    rest = start_when_allowed(queue, 5)
    assert sorted(j.id for j in first.jobs + rest) == sorted(j.id for j in jobs)
    later = started(queue, rest)
    assert min(later) >= min(burst) + 1000  # exactly: a start leaves the window at t + 1 s
    assert max(later) < min(burst) + 1300  # all five then: refusals took no place in it


def test_window_the_window_slides_from_each_start(queue):
    """Window: a sliding window over a whole number of seconds ("2/1": two per second).
    A start lets the next one go exactly a period after itself, not at the end of a window
    fixed by the first start: starts at 0 and 0.4 s let the third go at 1 s and the fourth
    only at 1.4 s."""
    jobs = [queue.enqueue(RECORD, [n], rate_key="window", rate="2/1") for n in range(4)]
    (one,) = queue.fetch(1, worker="w").jobs
    time.sleep(0.4)
    second = queue.fetch(10, worker="w")
    assert [j.id for j in second.jobs] == [jobs[1].id]
    assert 0 < (second.wait or 0) <= 0.6  # until the first leaves (less on a busy machine)
    (three,) = start_when_allowed(queue, 1)
    assert three.id == jobs[2].id
    fourth = queue.fetch(10, worker="w")
    assert fourth.jobs == []
    (four,) = start_when_allowed(queue, 1)
    assert four.id == jobs[3].id
    t1, t2, t3, t4 = started(queue, [one, second.jobs[0], three, four])
    # Until the second leaves: asked at t3 or later (>= t1 + 1 s), so at most t2 - t1 (0.4 s
    # and what the machine took beyond the sleep), to the ms.
    assert 0 < (fourth.wait or 0) <= (t2 - t1 + 1) / 1000
    assert t3 >= t1 + 1000
    assert t4 >= t2 + 1000
    assert t4 >= t1 + 1300  # a window fixed at the first start would let it go at t1 + 1 s
    assert most_in_a_window([t1, t2, t3, t4], 1000) == 2


@pytest.mark.parametrize("rate", ["10/5m", "100/10", "3/2s", "7/h", "2/d", "1/s"])
def test_window_a_jobs_rate_reads_as_ratelimit_reads_it(queue, rate):
    """Window: "count per interval, the interval a unit or a number of seconds": a job's
    rate is written, and read, as ``RateLimit``'s (same parser)."""
    job = queue.enqueue(RECORD, [1], rate_key="k", rate=rate)
    parsed = parse_rate(rate)
    assert queue.get(job.id).meta["rate_limit"] == {
        "key": "k",
        "count": parsed.count,
        "period": parsed.period_us // 1000,
    }


# --- Stacked limiters -------------------------------------------------------------------------


def test_stacked_a_concurrency_key_and_a_rate_key_hold_apart_and_charge_only_on_a_start(queue):
    """Stacked limiters ("limiting is not throttling"): one job with a per-user concurrency
    key and a shared rate key must pass both; held back by either, it takes nothing of the
    other: a job parked by its user's limit leaves the shared rate's slot to another job,
    and one parked by the rate leaves its user's permit to another job of that user."""
    both = {"concurrency_key": "export:{0}", "rate_key": "provider", "rate": "2/m"}
    a = queue.enqueue(RECORD, [1], priority=5, **both)
    by_limit = queue.enqueue(RECORD, [1], priority=4, **both)
    rate_only = queue.enqueue(RECORD, [2], priority=3, rate_key="provider", rate="2/m")
    by_rate = queue.enqueue(RECORD, [3], priority=2, **both)
    limit_only = queue.enqueue(RECORD, [3], priority=1, concurrency_key="export:{0}")
    got = queue.fetch(10, worker="w").jobs
    assert sorted(j.id for j in got) == sorted([a.id, rate_only.id, limit_only.id])
    assert [queue.get(j.id).state for j in (by_limit, by_rate)] == ["parked", "parked"]
    assert queue.counts()["parked"] == 2
    for job in got:  # every permit back: the rate still holds both
        assert queue.ack(job)
    assert queue.fetch(10, worker="w").jobs == []
    assert queue.get(by_limit.id).state == "parked"  # its permit is free; the rate is not
    assert queue.counts()["parked"] == 2


# --- Window, with a real worker ---------------------------------------------------------------


@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_window_holds_over_the_starts_of_a_worker_running_one_job_at_a_time(
    redis_backend: Backend, settings: Any, processes: Processes
) -> None:
    """Window: "at most count operations in any interval", the operations being the task
    runs themselves (Sidekiq counts inside perform). A worker running one job at a time,
    warmed up by quick jobs so that it leases ahead, meets a 0.2 s job and then four jobs
    of a "2/s" key: their starts, as Redis stored them, hold two in any second. (On a
    server only: the leasing ahead is the worker's, the same on every backend.)"""
    worked = for_workers(settings, 2)
    for n in range(6):
        worked.enqueue(HOLD, [f"quick{n}", "-"], priority=10)
    worked.enqueue(HOLD, ["slow", "-", 0.2], priority=5)
    rated = [worked.enqueue(HOLD, [f"r{n}", "r"], rate_key="r", rate="2/s") for n in range(4)]
    processes.start(run_worker, 1)
    wait_for(lambda: len(records(ENDED)) == 11, timeout=20, what="every job ran")
    assert most_in_a_window(started(worked, rated), 1000) <= 2
