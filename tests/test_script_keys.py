"""Every key a Lua script touches arrives in its KEYS (issue 13), measured with MONITOR on a
real redis-server and on every master of a real Cluster: a workload runs each script of the
package through the public API, then each inner command's keys (COMMAND GETKEYS) are
checked against the KEYS of the call that ran it."""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import pkgutil
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client

import django_redislock
from django_redislock import AsyncLock, Lock, Redlock, get_queue, get_redis
from django_redislock.conf import conf
from django_redislock.locks.keys import index_keys, lock_base
from django_redislock.locks.listing import describe_lock, list_locks
from django_redislock.queue.fetch_scripts import START
from django_redislock.queue.worker.loop import Worker
from django_redislock.queue.worker.schedule import Scheduler
from django_redislock.ratelimit.limiter import AsyncRateLimit, RateLimit
from django_redislock.redis.clients import call, run_script
from django_redislock.redis.scripts import LuaScript, lua_script
from django_redislock.semaphores.async_semaphore import AsyncSemaphore
from django_redislock.semaphores.listing import list_semaphores
from django_redislock.semaphores.semaphore import Semaphore
from django_redislock.stock.stock import Stock
from tests.support import multi_lock_workload, read_write_workload, schedule_workload
from tests.support.fixtures import Backend
from tests.support.script_monitor import Monitoring, parse, pattern, script_calls

pytestmark = pytest.mark.django_db(transaction=True)

# Every script keeps to its KEYS (issue 13): the keys any script touched outside them, per
# script (patterns: the lock or queue base dropped, variable parts as "*").
KNOWN_VIOLATIONS: dict[str, set[str]] = {}

# Scripts this workload cannot reach, each with why. Empty: every script runs.
UNREACHED: set[str] = set()

QUEUES = {
    "default": {"LEASE": 5, "MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 0.05},
    "other": {"LEASE": 5, "MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 0.05},
}
SCHEDULE = {"tick": {"task": "tests.tasks.record", "every": 60, "args": [0]}}
T0 = 1_700_000_040.0  # a whole multiple of 60 s, in the past: its ticks are due at once


def registered_scripts() -> dict[str, str]:
    """{sha: "<subpackage>.<name>"} of every LuaScript constant in the package."""
    found: dict[str, str] = {}
    for info in pkgutil.walk_packages(django_redislock.__path__, "django_redislock."):
        module = importlib.import_module(info.name)
        domain = info.name.split(".")[1]
        for value in vars(module).values():
            if isinstance(value, LuaScript):
                found[value.sha] = f"{domain}.{value.name}"
    return found


@pytest.fixture
def nodes(real_backend: Backend, settings: Any) -> list[tuple[str, int]]:
    """The (host, port) of every master: the server, or each master of the Cluster."""
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES, "SCHEDULE": SCHEDULE}
    settings.TASKS = {  # a workflow's steps on both queues
        "default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend", "QUEUES": []}
    }
    if real_backend.kind == "cluster":
        return [(n.host, int(n.port)) for n in get_redis().get_primaries()]
    assert real_backend.url is not None
    url = urlsplit(real_backend.url)
    return [(url.hostname or "127.0.0.1", int(url.port or 6379))]


def node_of(key: str) -> str:
    """The URL of the node that holds ``key`` (a Cluster master, or the one server)."""
    client = get_redis()
    if hasattr(client, "get_node_from_key"):
        node = client.get_node_from_key(key)
        return f"redis://{node.host}:{node.port}/0"
    kwargs = client.connection_pool.connection_kwargs
    return f"redis://{kwargs['host']}:{kwargs['port']}/0"


def until(predicate: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def contend(name: str, release: Callable[[Lock], Any], **options: Any) -> None:
    """A holder, a waiter queued behind it (another thread), then ``release`` frees the lock
    for the waiter, which takes it and releases it."""
    holder = Lock(name, ttl=5, **options)
    assert holder.acquire(0)
    got: list[bool] = []

    def wait() -> None:
        lock = Lock(name, ttl=5, **options)
        got.append(lock.acquire(10))
        if got[-1]:
            lock.release()

    waiter = threading.Thread(target=wait)
    waiter.start()
    until(lambda: get_redis().zcard(holder.keys[1]) == 1)
    release(holder)
    waiter.join(15)
    assert got == [True]


def exercise_locks() -> None:
    lock = Lock("m-plain", ttl=5)
    assert lock.acquire(0)
    lock.extend(10)
    lock.release()
    reentrant = Lock("m-reentrant", ttl=5, reentrant=True)
    with reentrant, reentrant:
        pass
    for options in ({}, {"fair": True}, {"fencing": True}, {"fair": True, "fencing": True}):
        contend("m-contended", Lock.release, **options)
    contend("m-forced", lambda holder: Lock.force_release(holder.name))
    assert not Lock.force_release("m-forced")  # nothing held
    # A holder that dies: its waiter takes the lock when the TTL ends (a re-check).
    assert Lock("m-dead", ttl=0.2).acquire(0)
    assert Lock("m-dead", ttl=5).acquire(5)
    # A waiter that gives up.
    holder = Lock("m-busy", ttl=5)
    assert holder.acquire(0)
    assert not Lock("m-busy", ttl=5).acquire(0.2)
    holder.release()
    with Lock("m-renewed", ttl=1.5, auto_renew=True):
        time.sleep(0.6)  # the renewer thread extends it (its own EVAL) every ttl / 3
    # A key of another type where the lock should be is set aside.
    get_redis().hset(Lock("m-corrupt").keys[0], "x", "y")
    with Lock("m-corrupt", ttl=5):
        pass
    asyncio.run(exercise_async_locks())
    exercise_semaphores()
    redlock = Redlock("m-redlock", ttl=5, nodes=[node_of(lock_base("m-redlock", 1))])
    with redlock:
        redlock.extend(10)


async def exercise_async_locks() -> None:
    lock = AsyncLock("m-async", ttl=5)
    assert await lock.acquire(0)
    await lock.extend(10)
    assert not await AsyncLock("m-async", ttl=5).acquire(0.2)
    await lock.release()
    holder = AsyncLock("m-async", ttl=5)
    assert await holder.acquire(0)
    assert await AsyncLock.force_release("m-async")


def exercise_semaphores() -> None:
    holder = Semaphore("m-sem", limit=1, ttl=5, fencing=True)
    assert holder.acquire(0)
    holder.extend(10)
    assert holder.locked()
    assert holder.holders()
    assert not Semaphore("m-sem", limit=1, ttl=5).acquire(0.2)  # gives up
    waiter = threading.Thread(
        target=Semaphore("m-sem", limit=1, ttl=5, fair=True).acquire, args=(10,)
    )
    waiter.start()
    until(lambda: get_redis().zcard(holder.layout.waiters) == 1)
    holder.release()  # handed over, then woken
    waiter.join(15)
    assert Semaphore.force_release("m-sem")
    assert Semaphore("m-sem-dead", limit=1, ttl=0.2).acquire(0)  # reclaimed when it expires
    assert Semaphore("m-sem-dead", limit=1, ttl=5).acquire(5)
    with Semaphore("m-sem-renewed", limit=2, ttl=1.5, auto_renew=True):
        time.sleep(0.6)
    with Semaphore("m-sem-multi", limit=3, permits=2, ttl=5):
        assert not Semaphore("m-sem-multi", limit=3, permits=2).acquire(0.1)
    list_semaphores()  # sweeps the index
    asyncio.run(exercise_async_semaphores())


async def exercise_async_semaphores() -> None:
    semaphore = AsyncSemaphore("m-async-sem", limit=2, ttl=5)
    assert await semaphore.acquire(0)
    await semaphore.extend(10)
    assert await semaphore.count() == 1
    await semaphore.release()
    assert await semaphore.acquire(0)
    assert await AsyncSemaphore.force_release("m-async-sem")


def exercise_listing() -> None:
    held = Lock("m-listed", ttl=30)
    assert held.acquire(0)
    assert list_locks().total >= 1
    assert [i.name for i in list_locks("m-list").locks] == ["m-listed"]
    assert describe_lock("m-listed") is not None
    # A name index missing a live lock, as the key layout before it left them: refilled by
    # SYNC_NAMES while that compatibility exists (issue 13 removes it, and then this step).
    _, names, swept = index_keys(held.base)
    get_redis().zrem(names, "m-listed")
    get_redis().delete(swept)
    list_locks("m-list")
    held.release()
    client = Client()
    assert client.post("/buy/7/").status_code == 200
    assert client.post("/abuy/7/").status_code == 200


def exercise_ratelimit() -> None:
    assert [bool(RateLimit("m-rate", rate="2/m").hit()) for _ in range(3)] == [True, True, False]
    spaced = RateLimit("m-rate", rate="3/m", burst=1)  # its GCRA too
    assert [bool(spaced.hit()) for _ in range(2)] == [True, False]
    assert spaced.peek().remaining == 0
    assert spaced.hit(report=True).remaining == 0
    assert asyncio.run(AsyncRateLimit("m-rate", rate="5/m").hit())


def exercise_queue() -> None:
    queue = get_queue()
    client = get_redis()
    queue.enqueue("tests.tasks.record", args=[1])
    queue.enqueue("tests.tasks.record", args=[2], job_id="named", priority=5, meta={"m": 1})
    queue.enqueue("tests.tasks.record", args=[3], job_id="named", replace=True)
    queue.enqueue("tests.tasks.record", args=[4], delay=60, job_id="later")
    queue.enqueue_many([{"task": "tests.tasks.record", "args": [i]} for i in range(3)])
    client.set(queue.key("j:clash"), "not a hash")
    queue.enqueue("tests.tasks.record", args=[5], job_id="clash")
    assert queue.oldest_ready_age() is not None
    assert queue.peek(2)
    jobs = queue.pop(2)
    assert queue.renew(jobs) == []
    assert queue.note_max_attempts(jobs[0], 3)
    assert queue.release(jobs) == 2
    [job] = queue.pop(1)
    assert queue.ack(job, '"kept"')
    [job] = queue.pop(1)
    assert queue.retry(job, delay=0)
    [job] = queue.pop(1)
    assert queue.retry(job, delay=60)
    [job] = queue.pop(1)
    assert queue.bury(job, "never")
    assert queue.requeue(job.id)
    assert queue.requeue("later")
    assert len(queue.pop(1, lease=0.05)) == 1
    time.sleep(0.1)
    queue.pop(0)  # takes the lease back
    client.set(queue.key("j:bad"), "x")
    client.zadd(queue.key("ready"), {"bad": 1})
    assert queue.pop(0) == []  # the bad job goes to the dead set when met
    queue.pop(100)
    assert queue.delete("bad")
    assert queue.jobs("dead") == []
    queue.enqueue("tests.tasks.record", args=[6], job_id="cancelled", delay=60)
    assert queue.cancel("cancelled")
    assert queue.purge("scheduled") >= 1
    assert queue.purge("running") >= 1
    exercise_worker()


def exercise_worker() -> None:
    from .tasks import record

    queue = get_queue()
    # Two at once: each finished job is acknowledged as it ends (a START that finishes).
    queue.enqueue_many([{"task": "tests.tasks.record", "args": [i]} for i in range(2)])
    Worker(["default"], concurrency=2, burst=True).run()
    # One at a time from here: each job's START charges its attempt.
    queue.enqueue("tests.tasks.record", args=[7])
    queue.enqueue("tests.tasks.boom")  # fails, is retried, then dies (MAX_ATTEMPTS 2)
    queue.enqueue("tests.tasks.not_a_task")  # refused at once
    result = record.enqueue(8)  # through the Tasks backend
    Scheduler().run_pending(T0)
    Scheduler().run_pending(T0 + 60)
    for _ in range(100):
        Worker(["default"], burst=True).run()
        counts = queue.counts()
        if counts["ready"] == counts["scheduled"] == counts["running"] == 0:
            break
        time.sleep(0.05)
    assert queue.counts()["dead"] == 2
    assert record.get_result(result.id).return_value == 8
    first, second = queue.jobs("dead")
    assert queue.requeue(first.id)
    queue.enqueue("tests.tasks.record", args=[9], job_id=second.id)  # a dead id is re-added
    assert queue.purge("ready") == 2
    assert queue.purge("dead") == 0


def exercise_queue_corners() -> None:
    """The queue's corner cases: corrupt keys, a tick, START sent by hand, expired leases."""
    queue = get_queue()
    queue.client.set(queue.keys.job("was-a-string"), "garbage")
    queue.enqueue("t", job_id="was-a-string")  # set aside, replaced
    queue.enqueue_many([{"task": "t", "args": [i]} for i in range(3)])
    queue.enqueue("t", job_id="named", priority=5, kwargs={"k": 1}, meta={"m": 1})
    queue.enqueue("t", job_id="named", replace=True)
    queue.enqueue("t", job_id="later", delay=3600)
    queue.enqueue_tick("tick", 1000, {"task": "t"})
    queue.enqueue("t", job_id="soon", delay=0.001)
    time.sleep(0.01)
    first, second, third = queue.pop(3, worker="w")
    queue.ack(first)
    queue.ack(second, '{"r": 1}')
    queue.fail(third, ValueError("boom"), "Traceback ...")
    ahead = queue.fetch(2, worker="w", charge=False)[0]
    queue.run(START, *queue.start_args("w", [], ahead[:1]))
    queue.renew(ahead)
    queue.retry(ahead[0], delay=0)
    queue.release(ahead[1:])
    [doomed] = queue.pop(worker="w")
    queue.bury(doomed, "never")
    queue.requeue(doomed.id)
    queue.pop(lease=0.001, worker="w")
    time.sleep(0.01)
    queue.pop(0)  # takes the expired lease back
    queue.client.zadd(queue.keys.ready, {"no-hash": 0})
    queue.client.zadd(queue.keys.ready, {"a-string": 0})
    queue.client.set(queue.keys.job("a-string"), "garbage")
    queue.pop(2)  # both buried, one set aside
    queue.delete("a-string")
    queue.cancel("later")
    queue.requeue("named")
    queue.oldest_ready_age()
    queue.jobs("dead")
    queue.jobs("done")
    queue.get("named")
    queue.counts(done=True)
    # The admin's: a running job left behind requeued, dead jobs retried and deleted by id.
    [left] = queue.pop(lease=0.001, worker="gone")
    time.sleep(0.01)
    queue.requeue_running(left, lease_ran_out=True)
    for job in queue.pop(3, worker="w"):
        queue.bury(job, "never")
    dead = [job.id for job in queue.jobs("dead")]
    queue.retry_dead(dead[:1])
    queue.delete_dead(dead[1:2])
    queue.retry_all_dead()
    queue.purge("ready")
    queue.purge("dead")
    exercise_job_options(queue)


def exercise_job_options(queue: Any) -> None:
    """Issue 26's enqueue-decided options: uniqueness, debounce, and expiry at POP and START."""
    queue.enqueue("t", job_id="u", unique_for=60)
    queue.enqueue("t", job_id="u", unique_for=60)  # within the window: returned
    queue.enqueue_many([{"task": "t", "job_id": "d", "debounce": 60}, {"task": "t"}])
    queue.enqueue("t", args=[1], unique_by_args=True, expires=0.001)
    time.sleep(0.01)
    queue.pop(5, worker="w")  # the expired one buried, never leased
    queue.enqueue("t", job_id="x-ahead", expires=0.01)
    ahead = queue.fetch(1, worker="w", charge=False)[0]
    time.sleep(0.03)
    queue.run(START, *queue.start_args("w", [], ahead))  # expired since leased: buried
    queue.purge("dead")
    queue.purge("running")
    queue.purge("scheduled")
    exercise_job_limits(queue)


def exercise_job_limits(queue: Any) -> None:
    """Issue 27's parking: concurrency keys (parked, let go by an end), a rate key (parked
    until allowed), a paused task (parked, let go by resume), a paused queue, a cancel."""
    for n in range(3):
        queue.enqueue("t", args=[n], concurrency_key="k", job_id=f"c{n}")
    queue.enqueue("t", args=[1], rate_key="r", rate="1/s")
    queue.enqueue("t", args=[2], rate_key="r", rate="1/s")
    queue.pause(task="paused.task")
    queue.enqueue("paused.task", job_id="p1")
    running = queue.pop(10, worker="w")  # c0 and one rate job start; the rest are parked
    queue.cancel("c2")
    for job in running:
        queue.ack(job)  # c0's end lets c1 go
    queue.resume(task="paused.task")
    queue.pause()
    queue.pop(10, worker="w")  # a paused queue: nothing
    queue.resume()
    time.sleep(1.05)  # the second rate job's start is allowed
    for _ in range(3):
        for job in queue.pop(10, worker="w"):
            queue.ack(job)
    queue.purge("ready")


def exercise_dependencies() -> None:
    """Issue 28's: dependencies in one queue and across two (registered and told through
    the outbox), a cascade, a join woken, progress published, a workflow cancelled."""
    from django_redislock.workflows import chain, group, step

    from .workflow_tasks import step as step_task

    queue, other = get_queue(), get_queue("other")
    parent = queue.enqueue("t", job_id="dep-parent")
    child = queue.enqueue("t", job_id="dep-child", depends_on=[parent])
    other.enqueue("t", depends_on=[parent, child])  # registered through the outbox
    [job] = queue.pop(worker="w")
    assert queue.publish(job, '{"a": 1}', "1/2")
    assert queue.ack(job, "1")  # the child ready in the same script; the other told
    [job] = queue.pop(worker="w")
    woken: list[Any] = []
    joiner = threading.Thread(target=lambda: woken.append(queue.join(job.id, timeout=10)))
    joiner.start()
    until(lambda: queue.client.hget(queue.keys.job(job.id), "jw") is not None)
    assert queue.ack(job, "2")  # the joiner woken through the outbox
    joiner.join(15)
    assert woken[0].state == "done"
    dying = queue.enqueue("t", job_id="dep-dying")
    queue.enqueue("t", depends_on=[dying])
    [job] = queue.pop(worker="w")
    assert queue.bury(job, "never")  # its dependant ends dead too
    workflow = chain(step(step_task, "a"), step(step_task, "b")).enqueue()
    assert workflow.cancel() == 2
    there = step_task.using(queue_name="other")
    across = chain(step(step_task, "a"), step(there, "b")).enqueue()  # its gate opened: OPEN
    assert across.cancel() == 2
    big = group([step(step_task, str(n)) for n in range(1001)]).enqueue()  # DEPEND opens it
    assert big.cancel() == 1001
    for q in (queue, other):
        q.purge("ready")
        q.purge("dead")


def exercise_idempotency() -> None:
    """A key claimed and stored, replayed, its claim renewed while a slow view runs, and
    waited for by a repeat (the waiting flag and the wake-up list)."""
    from django.conf import settings
    from django.test import override_settings

    from django_redislock.views.idempotency_records import record_keys
    from tests.idempotent_views import GATE

    def post(url: str, key: str = "m") -> Any:
        return Client().post(url, b"{}", content_type="application/json", HTTP_IDEMPOTENCY_KEY=key)

    assert post("/idem/pay/").status_code == 201
    assert post("/idem/pay/")["Idempotent-Replayed"] == "true"
    with override_settings(REDISLOCK={**settings.REDISLOCK, "LOCK_TTL": 0.3}):
        first = threading.Thread(target=post, args=("/idem/pay-waiting/?wait=1", "w"))
        first.start()
        until(lambda: get_redis().llen("tests:idempotent:pids") == 1)
        keys = record_keys("anonymous", "w")
        seen = [get_redis().pttl(keys.record)]
        # A renewal (at a third of the TTL) sets the TTL back up.
        until(lambda: seen.append(get_redis().pttl(keys.record)) or seen[-1] > seen[-2])
        repeat = threading.Thread(target=post, args=("/idem/pay-waiting/?wait=1", "w"))
        repeat.start()
        until(lambda: get_redis().exists(keys.waiting) == 1)
        get_redis().rpush(GATE, 1)
        first.join(15)
        repeat.join(15)


def exercise_wakeups() -> None:
    """Waiters beyond the threads' share of a small pool wait through the process's wake-up
    listener (its NUDGE), and are woken by the release's hand-off."""
    from django.conf import settings
    from django.test import override_settings

    from django_redislock.redis.clients import reset_connections

    small = {**settings.REDISLOCK, "MAX_CONNECTIONS": 4}  # threads keep 2 of them
    with override_settings(REDISLOCK=small):
        reset_connections()
        try:
            holder = Lock("m-wake", ttl=5)
            assert holder.acquire(0)
            got: list[bool] = []

            def wait() -> None:
                lock = Lock("m-wake", ttl=5)
                got.append(lock.acquire(10))
                lock.release()

            waiters = []
            for queued in (1, 2, 3):  # the third at the latest keeps no connection
                waiters.append(threading.Thread(target=wait))
                waiters[-1].start()
                # Through the app's own path, which waits for one of the four connections.
                until(lambda n=queued: call(get_redis(), "ZCARD", holder.keys[1]) == n)
            holder.release()
            for thread in waiters:
                thread.join(15)
            assert got == [True, True, True]
        finally:
            reset_connections()


def exercise_stocks() -> None:
    stock = Stock("m-stock", remember=0.05)
    stock.set(5)
    stock.add(1)
    paid, cancelled = stock.reserve(2), stock.reserve(1)
    assert paid is not None and cancelled is not None  # noqa: PT018
    stock.confirm(paid)
    stock.release(cancelled.id)
    assert stock.reserve(1, ttl=0.01) is not None
    time.sleep(0.1)
    assert stock.counts().reserved == 0  # expired, and the finished ones forgotten
    assert stock.delete()


@pytest.mark.timeout(60)
def test_every_key_a_script_touches_is_in_its_keys(nodes: list[tuple[str, int]]) -> None:
    scripts = registered_scripts()
    with Monitoring(nodes) as monitoring:
        exercise_locks()
        exercise_listing()
        exercise_ratelimit()
        exercise_queue()
        exercise_queue_corners()
        exercise_stocks()
        exercise_dependencies()
        exercise_wakeups()
        exercise_idempotency()
        multi_lock_workload.exercise()
        read_write_workload.exercise()
        schedule_workload.exercise()
    violations, seen = monitoring.violations(scripts, conf.KEY_PREFIX)
    assert monitoring.stray == 0, "script lines that no EVAL/EVALSHA line accounts for"
    assert seen - set(scripts.values()) == set(), "scripts that are not registered"
    assert set(scripts.values()) - UNREACHED - seen == set(), "scripts the workload missed"
    table = "\n".join(f"    {name!r}: {sorted(violations[name])}," for name in sorted(violations))
    assert violations == KNOWN_VIOLATIONS, (
        f"MONITOR ({monitoring.order}) saw {len(monitoring.calls)} script calls; keys touched "
        f"outside KEYS, per script:\n{table}"
    )


def test_the_check_catches_a_script_that_builds_a_key(nodes: list[tuple[str, int]]) -> None:
    """The check itself can fail: a script that builds a key it was not given is caught."""
    rogue = lua_script("rogue", "return redis.call('GET', KEYS[1] .. ':other')")
    ready = get_queue().keys.ready
    with Monitoring(nodes) as monitoring:
        run_script(get_redis(), rogue, [ready], [])
    violations, seen = monitoring.violations({rogue.sha: "rogue"}, conf.KEY_PREFIX)
    assert seen == {"rogue"}
    assert set(violations) == {"rogue"}


def test_monitor_lines_are_read_and_attributed_in_either_order() -> None:
    assert parse(b'+1.5 [0 lua] "SET" "a\\"b" "\\xff\\n" "12"') == (
        True,
        [b"SET", b'a"b', b"\xff\n", b"12"],
    )
    assert parse(b'+1.5 [0 127.0.0.1:5] "GET" "k"') == (False, [b"GET", b"k"])
    inner = [[b"GET", b"k"], [b"SET", b"x", b"1"]]
    missing = [b"EVALSHA", b"ab" * 20, b"1", b"k"]  # NOSCRIPT: the EVAL follows
    call = [b"eval", b"return 1", b"1", b"k", b"arg"]
    plain = [b"GET", b"z"]
    after = [(False, missing), (False, call), *[(True, c) for c in inner], (False, plain)]
    before = [(False, missing), *[(True, c) for c in inner], (False, call), (False, plain)]
    sha = hashlib.sha1(b"return 1").hexdigest()
    for lines, inner_before in ((after, False), (before, True)):
        calls, stray = script_calls(lines, inner_before)
        assert [(c.sha, c.keys, c.inner) for c in calls] == [
            ("ab" * 20, [b"k"], []),
            (sha, [b"k"], inner),
        ]
        assert stray == 0
    assert script_calls([(True, inner[0]), (False, plain)], True)[1] == 1


def test_key_patterns_drop_the_base_and_the_variable_parts() -> None:
    assert pattern(b"redislock:{L3}:l:sale:7:corrupt", "redislock") == "l:*:corrupt"
    assert pattern(b"redislock:{Q:default}:j:abc", "redislock") == "j:*"
    assert pattern(b"redislock:{L0}:names:swept", "redislock") == "names:swept"
    assert pattern(b"redislock:{Q:default}:wake", "redislock") == "wake"
