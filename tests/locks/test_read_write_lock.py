"""ReadWriteLock behaviour seen from outside, on fakeredis, a real redis-server and a real
Cluster.

Tests of pushed wake-ups set ``LOCK_RETRY_DELAY`` to a minute: a waiter's fallback re-check
then comes far too late to explain a success within the test's timeout, so only the
release's hand-off (or the wake-up timed to a holder's TTL) can."""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import pytest

from django_redislock.conf import conf
from django_redislock.exceptions import LockError, LockNotOwned, LockTimeout, RedisUnavailable
from django_redislock.locks import read_write_scripts
from django_redislock.locks.read_write import ReadWriteLock
from django_redislock.redis.scripts import LuaScript
from django_redislock.signals import lock_acquired, lock_lost
from tests.support.read_write_workload import exercise
from tests.support.script_monitor import Monitoring
from tests.support.waiting import Stalls, ttl_set_since, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def no_fallback(backend: Any, settings: Any) -> Any:
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": 60}
    return backend


def in_thread(target: Any, *args: Any) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


class Holder:
    """A thread that takes a side of a lock, holds it until told, then releases it."""

    def __init__(self, side: Any) -> None:
        self.side, self.got = side, threading.Event()
        self.done, self.result = threading.Event(), None
        self.thread = in_thread(self._run)

    def _run(self) -> None:
        self.result = self.side.acquire(0)
        self.got.set()
        self.done.wait(30)
        if self.result:
            self.side.release()

    def took(self) -> bool:
        assert self.got.wait(10)
        return bool(self.result)

    def leave(self) -> None:
        self.done.set()
        self.thread.join(10)


def queued(rw: ReadWriteLock) -> int:
    return rw.state().waiters


def test_readers_share_and_a_writer_is_alone(backend):
    rw = ReadWriteLock("catalog", ttl=5)
    other = ReadWriteLock("catalog", ttl=5)
    assert not rw.locked()
    assert rw.read().acquire(0)
    second = Holder(other.read())
    assert second.took()  # another thread reads at once
    assert rw.readers() == 2
    assert rw.read().locked()
    assert not rw.write().locked()
    with pytest.raises(LockError):  # this thread reads: it may not write too
        rw.write().acquire(0)
    assert not Holder(other.write()).took()  # nor may another thread while readers hold it
    rw.read().release()
    assert rw.readers() == 1
    second.leave()
    assert not rw.locked()
    since = time.monotonic()
    writer = Holder(other.write())
    assert writer.took()
    assert rw.write().locked()
    assert not rw.read().locked()
    state = rw.state()
    assert state.readers == 0
    assert state.writer is not None
    assert ttl_set_since(state.writer_ms / 1000, 5, since)
    assert not rw.read().acquire(0)
    assert not rw.write().acquire(0)
    writer.leave()
    assert not rw.locked()


def test_sides_have_the_lock_api(backend):
    rw = ReadWriteLock("api", ttl=5)
    for side in (rw.read(), rw.write()):
        assert side is (rw.read() if side is rw.read() else rw.write())
        assert side.ttl() is None
        assert not side.owned()
        since = time.monotonic()
        with side as entered:
            assert entered is side
            assert side.owned()
            assert ttl_set_since(side.ttl(), 5, since)
            since = time.monotonic()
            side.extend(20)
            assert ttl_set_since(side.ttl(), 20, since)
            assert side.fence is None  # no fencing asked
        assert not side.owned()
        assert side.ttl() is None
        with pytest.raises(LockNotOwned) as info:
            side.release()
        assert info.value.lock_name == "api"
        with pytest.raises(LockNotOwned):
            side.extend()


def test_the_context_manager_raises_lock_timeout_naming_the_lock(backend):
    holder = ReadWriteLock("timed", ttl=5)
    writer = Holder(holder.write())
    assert writer.took()
    waiting = ReadWriteLock("timed", ttl=5, timeout=0.05)
    for side in (waiting.read(), waiting.write()):
        with pytest.raises(LockTimeout) as info, side:
            pytest.fail("the body must not run")
        assert info.value.lock_name == "timed"
        assert "timed" in str(info.value)
    assert queued(holder) == 0  # those that gave up left the line
    writer.leave()


def test_fencing_numbers_the_writers_only(backend):
    rw = ReadWriteLock("fenced", ttl=5, fencing=True)
    fences = []
    for _ in range(3):
        with rw.write() as side:
            fences.append(side.fence)
        with rw.read() as side:
            assert side.fence is None
    assert all(isinstance(f, int) for f in fences)
    assert fences == sorted(set(fences))  # strictly increasing
    unfenced = ReadWriteLock("fenced", ttl=5)
    with unfenced.write() as side:
        assert side.fence is None


def test_fences_keep_increasing_after_the_counter_is_lost(backend):
    rw = ReadWriteLock("lost-counter", ttl=5, fencing=True)
    with rw.write() as side:
        first = side.fence
    backend.client.delete(rw.write().layout.fence)
    with rw.write() as side:
        assert side.fence > first


def test_a_waiting_writer_blocks_new_readers(no_fallback):
    reader = ReadWriteLock("pref", ttl=30)
    assert reader.read().acquire(0)
    got: list[str] = []

    def write() -> None:
        rw = ReadWriteLock("pref", ttl=30)
        assert rw.write().acquire(20)
        got.append("writer")
        time.sleep(0.05)
        rw.write().release()

    def read() -> None:
        rw = ReadWriteLock("pref", ttl=30)
        assert rw.read().acquire(20)
        got.append("reader")
        rw.read().release()

    writer = in_thread(write)
    wait_for(lambda: queued(reader) == 1, 10)
    assert not Holder(ReadWriteLock("pref").read()).took()  # a newcomer waits behind it
    late = in_thread(read)
    wait_for(lambda: queued(reader) == 2, 10)
    reader.read().release()  # lets the writer in; the late reader after it
    writer.join(15)
    late.join(15)
    assert got == ["writer", "reader"]


def test_writers_first_when_the_lock_is_free_again(no_fallback):
    holder = ReadWriteLock("order", ttl=30)
    assert holder.write().acquire(0)
    got: list[str] = []

    def take(kind: str) -> None:
        rw = ReadWriteLock("order", ttl=30)
        side = rw.read() if kind == "r" else rw.write()
        assert side.acquire(20)
        got.append(kind)
        time.sleep(0.02)
        side.release()

    threads = []
    for count, kind in enumerate(["r", "w", "r", "w"], 1):
        threads.append(in_thread(take, kind))
        wait_for(lambda count=count: queued(holder) == count, 10)
    holder.write().release()
    for thread in threads:
        thread.join(20)
    assert got[:2] == ["w", "w"]  # the writers, then the readers together
    assert sorted(got[2:]) == ["r", "r"]


def test_fair_lets_in_in_arrival_order_readers_together(no_fallback):
    holder = ReadWriteLock("fair", ttl=30, fair=True)
    assert holder.write().acquire(0)
    events: list[tuple[str, str]] = []
    inside = threading.Event()

    def take(tag: str) -> None:
        rw = ReadWriteLock("fair", ttl=30, fair=True)
        side = rw.read() if tag[0] == "r" else rw.write()
        assert side.acquire(20)
        events.append(("in", tag))
        if tag == "r1":
            wait_for(inside.is_set, 10)  # r2 comes in beside r1
        if tag == "r2":
            inside.set()
        time.sleep(0.02)
        events.append(("out", tag))
        side.release()

    threads = []
    for count, tag in enumerate(["r1", "r2", "w1", "r3"], 1):
        threads.append(in_thread(take, tag))
        wait_for(lambda count=count: queued(holder) == count, 10)
    holder.write().release()
    for thread in threads:
        thread.join(20)
    entered = [tag for what, tag in events if what == "in"]
    assert sorted(entered[:2]) == ["r1", "r2"]
    assert entered[2:] == ["w1", "r3"]
    # w1 came in after both readers left, r3 after w1 left
    assert events.index(("in", "w1")) > events.index(("out", "r1"))
    assert events.index(("in", "w1")) > events.index(("out", "r2"))
    assert events.index(("in", "r3")) > events.index(("out", "w1"))


def test_a_fair_newcomer_reader_waits_behind_a_queued_writer(no_fallback):
    reader = ReadWriteLock("fair-new", ttl=30, fair=True)
    assert reader.read().acquire(0)
    writer = in_thread(lambda: ReadWriteLock("fair-new", ttl=30, fair=True).write().acquire(20))
    wait_for(lambda: queued(reader) == 1, 10)
    assert not Holder(ReadWriteLock("fair-new", fair=True).read()).took()
    reader.read().release()
    writer.join(15)
    assert ReadWriteLock("fair-new").write().locked()


def test_a_release_wakes_every_reader_without_polling(no_fallback):
    holder = ReadWriteLock("push", ttl=30)
    assert holder.write().acquire(0)
    got: list[float] = []

    def read() -> None:
        rw = ReadWriteLock("push", ttl=30)
        if rw.read().acquire(20):
            got.append(time.monotonic())

    threads = [in_thread(read) for _ in range(3)]
    wait_for(lambda: queued(holder) == 3, 10)
    released = time.monotonic()
    holder.write().release()
    for thread in threads:
        thread.join(15)
    assert len(got) == 3
    # Far before any fallback re-check (30 s at the earliest), however busy the machine.
    assert max(got) - released < 10.0
    assert holder.readers() == 3


def test_the_last_reader_hands_over_to_a_waiting_writer(no_fallback):
    readers = [Holder(ReadWriteLock("handover", ttl=30).read()) for _ in range(2)]
    assert all(reader.took() for reader in readers)
    rw = ReadWriteLock("handover", ttl=30)
    assert rw.readers() == 2
    got: list[bool] = []
    writer = in_thread(lambda: got.append(ReadWriteLock("handover", ttl=30).write().acquire(20)))
    wait_for(lambda: queued(rw) == 1, 10)
    readers[0].leave()
    assert not rw.write().locked()  # one reader is still in
    readers[1].leave()
    writer.join(15)
    assert got == [True]


def test_a_dead_readers_hold_lapses_and_the_writer_wakes_by_itself(no_fallback):
    dead = ReadWriteLock("dead-reader", ttl=0.3).read()
    in_thread(dead.acquire, 0).join(5)  # a thread that ends without a release
    assert ReadWriteLock("dead-reader").readers() == 1
    start = time.monotonic()
    assert ReadWriteLock("dead-reader", ttl=30).write().acquire(10)
    assert time.monotonic() - start < 5  # at the reader's TTL, not at a fallback


def test_a_dead_writers_hold_lapses_and_readers_wake_by_themselves(no_fallback):
    dead = ReadWriteLock("dead-writer", ttl=0.3).write()
    in_thread(dead.acquire, 0).join(5)
    assert ReadWriteLock("dead-writer").write().locked()
    start = time.monotonic()
    assert ReadWriteLock("dead-writer", ttl=30).read().acquire(10)
    assert time.monotonic() - start < 5


def test_an_expired_hold_is_never_released_or_extended_by_its_old_owner(backend):
    lost: list[str] = []
    receiver = lambda sender, **kw: lost.append(kw["name"])  # noqa: E731
    lock_lost.connect(receiver)
    try:
        for kind in ("read", "write"):
            old = ReadWriteLock(f"exp-{kind}", ttl=0.1)
            side = getattr(old, kind)()
            assert side.acquire(0)
            time.sleep(0.2)
            assert not side.owned()
            new = ReadWriteLock(f"exp-{kind}", ttl=10)
            since = time.monotonic()
            assert new.write().acquire(0)
            with pytest.raises(LockNotOwned):
                side.extend(30)
            with pytest.raises(LockNotOwned):
                side.release()
            assert new.write().owned()
            assert ttl_set_since(new.write().ttl(), 10, since)
            new.write().release()
    finally:
        lock_lost.disconnect(receiver)
    assert lost == ["exp-read", "exp-write"]


def test_auto_renew_keeps_both_sides_past_several_ttls(backend):
    names = iter(f"renewed-{n}" for n in range(100))

    def renewed() -> None:
        name = next(names)
        rw = ReadWriteLock(name, ttl=0.3, auto_renew=True)
        with rw.read():
            time.sleep(1.0)
            assert rw.read().owned()
            assert not Holder(ReadWriteLock(name).write()).took()
        with rw.write():
            time.sleep(1.0)
            assert rw.write().owned()
            assert not Holder(ReadWriteLock(name).read()).took()
        assert not rw.locked()

    # A stall of the process past the 0.3 s TTL loses a side: such a run is done again.
    with Stalls() as stalls:
        stalls.again_if_stalled(renewed)


def test_no_reentrancy_a_second_side_raises_at_once(backend):
    rw = ReadWriteLock("upgrade", ttl=5, timeout=math.inf)
    with rw.read():
        start = time.monotonic()
        with pytest.raises(LockError, match="read side") as info:
            rw.write().acquire()  # would wait for itself forever
        assert info.value.lock_name == "upgrade"
        with pytest.raises(LockError):
            rw.read().acquire()
        with pytest.raises(LockError):  # through another instance too
            ReadWriteLock("upgrade").write().acquire(math.inf)
        assert time.monotonic() - start < 30  # (a hang guard: each raised, none waited)
        assert rw.read().owned()
    with rw.write(), pytest.raises(LockError, match="write side"):
        rw.read().acquire()
    with rw.write():  # each released cleanly: taken again
        pass


def test_an_expired_hold_does_not_block_a_new_acquire_of_its_owner(backend):
    rw = ReadWriteLock("afresh", ttl=0.1)
    assert rw.write().acquire(0)
    time.sleep(0.2)
    assert rw.write().acquire(0)  # the old hold expired: acquired afresh
    rw.write().release()


def test_force_release_frees_readers_and_writer_and_lets_waiters_in(no_fallback):
    assert not ReadWriteLock.force_release("forced")
    holder = ReadWriteLock("forced", ttl=30)
    assert holder.read().acquire(0)
    got: list[bool] = []
    writer = in_thread(lambda: got.append(ReadWriteLock("forced", ttl=30).write().acquire(20)))
    wait_for(lambda: queued(holder) == 1, 10)
    assert ReadWriteLock.force_release("forced")
    writer.join(15)
    assert got == [True]
    assert holder.write().locked()
    with pytest.raises(LockNotOwned):
        holder.read().release()


def test_signals_name_the_lock(backend):
    seen: list[tuple[str, Any]] = []
    receiver = lambda sender, **kw: seen.append((kw["name"], kw["fence"]))  # noqa: E731
    lock_acquired.connect(receiver)
    try:
        rw = ReadWriteLock("signalled", ttl=5, fencing=True)
        with rw.read():
            pass
        with rw.write() as side:
            fence = side.fence
    finally:
        lock_acquired.disconnect(receiver)
    assert seen == [("signalled", None), ("signalled", fence)]


@pytest.mark.parametrize(
    ("kwargs", "error", "argument"),
    [
        ({"name": ""}, ValueError, "name"),
        ({"name": 5}, TypeError, "name"),
        ({"name": "a{b}"}, ValueError, "brace"),
        ({"name": "x", "ttl": 0}, ValueError, "ttl"),
        ({"name": "x", "ttl": "5"}, TypeError, "ttl"),
        ({"name": "x", "timeout": -1}, ValueError, "timeout"),
        ({"name": "x", "ttl": math.inf}, ValueError, "ttl"),
    ],
)
def test_bad_input_is_refused_before_redis_is_touched(kwargs, error, argument, settings):
    settings.REDISLOCK = {"URL": "redis://127.0.0.1:1/0"}  # nothing listens there
    name = kwargs.pop("name")
    with pytest.raises(error, match=argument):
        ReadWriteLock(name, **kwargs)


def test_bad_timeouts_name_the_argument(backend):
    rw = ReadWriteLock("args", ttl=5)
    with pytest.raises(ValueError, match="timeout"):
        rw.read().acquire(-1)
    with pytest.raises(TypeError, match="timeout"):
        rw.write().acquire("1")  # type: ignore[arg-type]
    assert rw.read().acquire(0)
    with pytest.raises(ValueError, match="ttl"):
        rw.read().extend(0)
    rw.read().release()


def test_redis_unreachable_is_redis_unavailable(settings):
    settings.REDISLOCK = {"URL": "redis://127.0.0.1:1/0"}
    rw = ReadWriteLock("down", ttl=5)
    with pytest.raises(RedisUnavailable):
        rw.read().acquire(0)
    with pytest.raises(RedisUnavailable):
        rw.write().acquire(0)
    with pytest.raises(RedisUnavailable):
        rw.readers()


def test_keys_of_another_type_are_set_aside_with_a_log(backend, caplog):
    rw = ReadWriteLock("corrupt", ttl=5)
    keys = rw.read().layout
    backend.client.hset(keys.writer, "x", "y")
    backend.client.set(keys.readers, "not a zset")
    backend.client.set(keys.waiters, "not a zset")
    backend.client.hset(keys.wake, "x", "y")
    assert rw.state().readers == 0  # reads, never crashes
    with caplog.at_level(logging.WARNING, logger="django_redislock.locks"), rw.write():
        pass
    assert "corrupt" in caplog.text
    assert backend.client.type(f"{keys.writer}:corrupt") in (b"hash", "hash")
    assert backend.client.type(f"{keys.readers}:corrupt") in (b"string", "string")
    with rw.read():  # and it keeps working, with nothing more to set aside
        assert rw.readers() == 1
    assert not backend.client.exists(keys.wake)


def test_a_waiter_that_gives_up_lets_those_behind_it_in(no_fallback):
    # Fair: a reader queued behind a writer that gives up goes in at once beside the reader.
    holder = ReadWriteLock("give-up", ttl=30, fair=True)
    assert holder.read().acquire(0)
    writer_result: list[bool] = []
    writer = in_thread(
        lambda: writer_result.append(
            # 2 s: a stalled machine does not see it give up before the reader queues.
            ReadWriteLock("give-up", ttl=30, fair=True).write().acquire(2)
        )
    )
    wait_for(lambda: queued(holder) == 1, 10)
    got: list[float] = []
    reader = in_thread(
        lambda: (
            got.append(time.monotonic())
            if ReadWriteLock("give-up", ttl=30, fair=True).read().acquire(20)
            else None
        )
    )
    wait_for(lambda: queued(holder) == 2, 10)
    writer.join(30)
    gave_up = time.monotonic()
    reader.join(30)
    assert writer_result == [False]
    assert got
    assert got[0] - gave_up < 10.0  # at once, not at a fallback re-check (30 s at the earliest)


@pytest.mark.timeout(120)
def test_every_key_a_script_touches_is_in_its_keys(real_backend):
    """The workload the package-wide check runs (``read_write_workload.exercise``) reaches
    every read-write script, and each keeps to its KEYS, on a server and on Cluster."""
    if real_backend.kind == "cluster":
        nodes = [(n.host, int(n.port)) for n in real_backend.client.get_primaries()]
    else:
        url = urlsplit(real_backend.url)
        nodes = [(url.hostname or "127.0.0.1", int(url.port or 6379))]
    scripts = {s.sha: s.name for s in vars(read_write_scripts).values() if isinstance(s, LuaScript)}
    with Monitoring(nodes) as monitoring:
        exercise()
    violations, seen = monitoring.violations(scripts, conf.KEY_PREFIX)
    assert set(scripts.values()) <= seen
    assert {name: found for name, found in violations.items() if name in scripts.values()} == {}
