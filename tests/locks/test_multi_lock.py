"""MultiLock seen from outside, on fakeredis, a real redis-server and a real Cluster: all
names or none, one deadline for the set, each name handed to its own waiter, a fence per
name, renewal, lost names, bad input, and which path (one script, or one name at a time in
lock order) the names take."""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any

import pytest

from django_redislock import Lock
from django_redislock.conf import conf
from django_redislock.exceptions import LockError, LockNotOwned, LockTimeout, RedisUnavailable
from django_redislock.locks import waiting
from django_redislock.locks.keys import lock_base, parse_value
from django_redislock.locks.listing import list_locks
from django_redislock.locks.multi_lock import MultiLock
from django_redislock.signals import lock_acquired, lock_busy, lock_released
from tests.support.proxy import ReplyLosingProxy
from tests.support.waiting import (
    BEFORE_ANY_RECHECK,
    SLOW_RETRY_DELAY,
    Stalls,
    ttl_set_since,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True)


def in_thread(target: Any, *args: Any) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return thread


def shard_of(name: str) -> str:
    return lock_base(name, conf.LOCK_SHARDS)


def on_one_shard(prefix: str, count: int) -> list[str]:
    """``count`` names that share a shard on Cluster (as every name does elsewhere)."""
    found: dict[str, list[str]] = {}
    for i in range(10_000):
        group = found.setdefault(shard_of(f"{prefix}{i}"), [])
        group.append(f"{prefix}{i}")
        if len(group) == count:
            return group
    raise AssertionError("no shard found")


def on_several_shards(prefix: str, count: int) -> list[str]:
    """``count`` names on as many shards on Cluster."""
    found: dict[str, str] = {}
    for i in range(10_000):
        found.setdefault(shard_of(f"{prefix}{i}"), f"{prefix}{i}")
        if len(found) == count:
            return sorted(found.values())
    raise AssertionError("not enough shards")


def holder_token(name: str) -> str | None:
    lock = Lock(name)
    value = parse_value(lock.client.get(lock.keys[0]))
    return None if value is None else value.token


def held(*names: str) -> list[bool]:
    return [Lock(name).locked() for name in names]


def queued(backend: Any, name: str) -> int:
    return int(backend.client.zcard(Lock(name).keys[1]))


def test_acquire_release_roundtrip(backend):
    lock = MultiLock(["sku:7", "points:42", "sku:1"], ttl=10)
    assert lock.names == ("points:42", "sku:1", "sku:7")
    assert not lock.locked()
    assert not lock.owned()
    since = time.monotonic()
    assert lock.acquire()
    assert lock.locked()
    assert lock.owned()
    assert held(*lock.names) == [True, True, True]
    assert all(ttl_set_since(Lock(name).ttl(), 10, since) for name in lock.names)
    assert lock.fences is None
    lock.release()
    assert held(*lock.names) == [False, False, False]
    assert not lock.owned()
    assert not lock.locked()


def test_each_name_is_an_ordinary_lock_with_its_owner_in_the_listing(backend):
    with MultiLock(["cart:a", "cart:b"], ttl=30):
        page = list_locks("cart:")
        assert page.total == 2
        assert {info.name for info in page.locks} == {"cart:a", "cart:b"}
        assert {info.pid for info in page.locks} == {os.getpid()}
        assert not Lock("cart:b", ttl=5).acquire(0), "a Lock of one of the names sees it held"
    assert list_locks("cart:").total == 0


def test_all_or_nothing_when_one_name_is_held_elsewhere(backend):
    names = on_one_shard("aon:", 3)
    other = Lock(names[1], ttl=30)
    other.acquire()
    for timeout in (0, 0.1):
        assert not MultiLock(names, ttl=30).acquire(timeout)
        assert held(names[0], names[2]) == [False, False]
        assert [queued(backend, name) for name in names] == [0, 0, 0]
    assert other.owned()
    other.release()
    with MultiLock(names, ttl=30, timeout=0) as lock:
        assert lock.owned()


def test_the_context_manager_raises_lock_timeout_naming_the_names(backend):
    holder = Lock("ctx:b", ttl=30)
    holder.acquire()
    with pytest.raises(LockTimeout) as info, MultiLock(["ctx:a", "ctx:b"], timeout=0.05):
        pytest.fail("body must not run")
    holder.release()
    assert "ctx:a" in str(info.value)
    assert "ctx:b" in str(info.value)
    assert info.value.lock_name == "ctx:a, ctx:b"
    assert not Lock("ctx:a").locked()


def test_the_timeout_is_one_deadline_for_the_whole_set(backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}
    names = ["dl:a", "dl:b", "dl:c", "dl:d"]
    holders = [Lock(name, ttl=30) for name in names[1:]]
    for holder in holders:
        holder.acquire()
    # Three busy names waited for one after another would take 2.4 s. (A run that a stall
    # of the machine overlapped may take longer, and is done again.)
    with Stalls() as stalls:
        got, elapsed = stalls.timed(lambda: MultiLock(names, ttl=30).acquire(0.8))
    assert not got
    assert 0.8 <= elapsed < 2.0
    assert not Lock("dl:a").locked()
    assert [queued(backend, name) for name in names] == [0, 0, 0, 0]
    for holder in holders:
        holder.release()


def test_a_release_hands_each_name_to_its_own_waiter(backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}
    first, middle, last = on_one_shard("ho:", 3)
    multi = MultiLock([first, middle, last], ttl=30)
    multi.acquire()
    got: dict[str, float] = {}

    def wait(name: str) -> None:
        lock = Lock(name, ttl=30)
        if lock.acquire(math.inf):
            got[name] = time.monotonic()

    threads = [in_thread(wait, first), in_thread(wait, last)]
    wait_for(lambda: queued(backend, first) == queued(backend, last) == 1, 10, "both queued")
    released = time.monotonic()
    multi.release()
    for thread in threads:
        thread.join(10)
    assert set(got) == {first, last}
    assert max(got.values()) - released < BEFORE_ANY_RECHECK  # pushed, not polled
    assert held(first, middle, last) == [True, False, True]


def test_a_multi_lock_waiting_for_one_name_is_woken_by_its_release(backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}
    holder = Lock("wk:b", ttl=30)
    holder.acquire()
    got: list[float] = []
    multi = MultiLock(["wk:a", "wk:b", "wk:c"], ttl=30)

    def wait() -> None:
        if multi.acquire(math.inf):
            got.append(time.monotonic())

    thread = in_thread(wait)
    wait_for(lambda: queued(backend, "wk:b") == 1, 10, "queued on the busy name")
    assert held("wk:a", "wk:c") == [True, False], "the names before it are held meanwhile"
    released = time.monotonic()
    holder.release()
    thread.join(10)
    assert got
    assert got[0] - released < BEFORE_ANY_RECHECK
    assert held("wk:a", "wk:b", "wk:c") == [True, True, True]


def test_fences_per_name_strictly_increase(backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}
    names = ["fn:a", "fn:b"]
    seen: dict[str, list[int]] = {name: [] for name in names}
    for _ in range(3):
        with MultiLock(names, ttl=5, fencing=True) as multi:
            assert multi.fences is not None
            for name, fence in multi.fences.items():
                seen[name].append(fence)
        with Lock("fn:b", ttl=5, fencing=True) as single:
            seen["fn:b"].append(single.fence)
    # A hand-off to a waiting MultiLock (the ordered path) gets fences too.
    holder = Lock("fn:b", ttl=5, fencing=True)
    holder.acquire()
    seen["fn:b"].append(holder.fence)
    waiter = MultiLock(names, ttl=5, fencing=True, timeout=10)
    fences: list[dict[str, int] | None] = []

    def wait() -> None:
        with waiter:
            fences.append(waiter.fences)

    thread = in_thread(wait)
    wait_for(lambda: queued(backend, "fn:b") == 1, 10, "queued")
    holder.release()
    thread.join(10)
    assert fences
    assert fences[0] is not None
    for name, fence in fences[0].items():
        seen[name].append(fence)
    for values in seen.values():
        assert values == sorted(set(values)), values
    assert len(seen["fn:a"]) == 4
    assert len(seen["fn:b"]) == 8
    assert MultiLock(names).fences is None


def held_past_the_ttl(group: list[str]) -> bool:
    """Holds the names (TTL 0.3 s, renewed) for 1 s: whether they were all still held."""
    lock = MultiLock(group, ttl=0.3, auto_renew=True)
    lock.acquire()
    time.sleep(1.0)
    if not lock.owned():
        for name in group:  # what is left of it
            Lock.force_release(name)
        return False
    assert not any(Lock(name, ttl=1).acquire(0) for name in group)
    lock.release()
    assert not lock.locked()
    return True


def test_auto_renew_keeps_every_name_past_its_ttl(backend):
    names = on_several_shards("rn:", 3)  # several shards on Cluster: the ordered path too
    # A stall of the process longer than the TTL rightly loses a name: such a run is done
    # again; one that no stall overlapped must keep them all.
    with Stalls() as stalls:
        for group in (on_one_shard("rn1:", 3), names):
            kept, _ = stalls.timed(lambda group=group: held_past_the_ttl(group))
            assert kept


def test_a_lost_name_is_reported_by_extend_and_release(backend):
    names = ["lost:a", "lost:b", "lost:c"]
    lock = MultiLock(names, ttl=5)
    lock.acquire()
    backend.client.delete(Lock("lost:b").keys[0])  # expired, or force-released
    assert not lock.owned()
    since = time.monotonic()
    with pytest.raises(LockNotOwned) as info:
        lock.extend(20)
    assert info.value.lock_name == "lost:b"
    assert ttl_set_since(Lock("lost:a").ttl(), 20, since)
    assert ttl_set_since(Lock("lost:c").ttl(), 20, since)
    with pytest.raises(LockNotOwned) as info:
        lock.release()
    assert info.value.lock_name == "lost:b"
    assert held(*names) == [False, False, False], "the names still held were released"
    with pytest.raises(LockNotOwned):
        lock.release()


def test_release_and_extend_by_a_non_owner_raise(backend):
    lock = MultiLock(["no:a", "no:b"], ttl=5)
    with pytest.raises(LockNotOwned):
        lock.release()
    with pytest.raises(LockNotOwned):
        lock.extend()
    lock.acquire()
    result: list[Any] = []

    def other_thread() -> None:
        result.append(lock.acquire(0))
        try:
            lock.release()
        except LockNotOwned as exc:
            result.append(exc)

    in_thread(other_thread).join(5)
    assert result[0] is False
    assert isinstance(result[1], LockNotOwned)
    assert lock.owned()
    lock.release()


def test_extend_resets_every_ttl(backend):
    with MultiLock(["ex:a", "ex:b"], ttl=1) as lock:
        since = time.monotonic()
        lock.extend(20)
        assert all(ttl_set_since(Lock(name).ttl(), 20, since) for name in lock.names)
        lock.extend()
        assert all(Lock(name).ttl() <= 1 for name in lock.names)
        with pytest.raises(ValueError, match="ttl"):
            lock.extend(0)


def test_a_second_acquire_by_the_holder_is_an_error_unless_its_hold_was_lost(backend):
    lock = MultiLock(["twice:a", "twice:b"], ttl=5)
    lock.acquire()
    with pytest.raises(LockError, match="already held"):
        lock.acquire()
    backend.client.delete(Lock("twice:a").keys[0])  # lost: acquiring afresh is fine
    assert lock.acquire(0)
    assert lock.owned()
    lock.release()
    assert not lock.locked()


@pytest.mark.parametrize(
    ("names", "error", "match"),
    [
        ("sku:1", TypeError, "single str"),
        (b"sku:1", TypeError, "single bytes"),
        (42, TypeError, "not int"),
        ([], ValueError, "empty"),
        (["a", "b", "a"], ValueError, "'a' more than once"),
        (["a", 1], TypeError, "str"),
        (["a", ""], ValueError, "empty"),
        (["a", "x{y}"], ValueError, "brace"),
        (["a", "b c"], ValueError, "whitespace"),
    ],
)
def test_bad_names_are_refused_before_redis_is_touched(settings, names, error, match):
    settings.REDISLOCK = {"URL": "redis://127.0.0.1:1/0"}
    with pytest.raises(error, match=match):
        MultiLock(names)


def test_names_may_be_any_iterable_and_options_are_checked(settings):
    settings.REDISLOCK = {"URL": "redis://127.0.0.1:1/0"}  # nothing touches Redis
    assert MultiLock({"b", "a"}).names == ("a", "b")
    assert MultiLock(name for name in ("z", "y")).names == ("y", "z")
    with pytest.raises(ValueError, match="ttl"):
        MultiLock(["a"], ttl=0)
    with pytest.raises(ValueError, match="timeout"):
        MultiLock(["a"], timeout=-1)
    with pytest.raises(TypeError, match="timeout"):
        MultiLock(["a"]).acquire("soon")  # type: ignore[arg-type]


def test_redis_unreachable_is_a_clear_error(backend, settings):
    settings.REDISLOCK = {"URL": "redis://127.0.0.1:1/0"}
    lock = MultiLock(["down:a", "down:b"], ttl=5)
    with pytest.raises(RedisUnavailable, match="unreachable"):
        lock.acquire()
    assert not lock.owned()


def test_an_acquire_whose_reply_is_lost_frees_what_it_took(settings, redis_server):
    # The one script ran and took every name, but the answer never came back (twice: a sync
    # command is sent once more on a new connection): the caller frees them before raising.
    redis_server.client().flushall()
    with ReplyLosingProxy("127.0.0.1", redis_server.port) as proxy:
        settings.REDISLOCK = {"URL": proxy.url}
        with MultiLock(["warm:a"], ttl=30):
            pass
        proxy.lose_replies = 2
        with pytest.raises(RedisUnavailable):
            MultiLock(["lost:a", "lost:b"], ttl=30).acquire(0)
        assert proxy.lost == 2  # Redis did run it: the replies were dropped on the way
        assert held("lost:a", "lost:b") == [False, False]
        with MultiLock(["lost:a", "lost:b"], ttl=30, timeout=0) as lock:
            assert lock.owned()


def test_redis_lost_while_waiting_leaves_nothing_held_or_queued(backend, monkeypatch):
    holder = Lock("cut:b", ttl=30)
    holder.acquire()

    def failing_wait(*args: Any) -> Any:
        raise RedisUnavailable("connection lost while blocked")

    monkeypatch.setattr(waiting, "wait_for_push", failing_wait)
    with pytest.raises(RedisUnavailable):
        MultiLock(["cut:a", "cut:b"], ttl=30).acquire(5)
    monkeypatch.undo()
    assert not Lock("cut:a").locked(), "the name taken first was rolled back"
    assert queued(backend, "cut:b") == 0
    holder.release()
    assert not holder.locked()


@pytest.mark.parametrize("spread", ["one shard", "several shards"])
def test_an_acquire_that_fails_half_way_leaves_nothing_held(backend, spread):
    names = on_one_shard("half:", 3) if spread == "one shard" else on_several_shards("half:", 3)
    seen: list[str] = []

    def boom(sender: Any, name: str, **kwargs: Any) -> None:
        seen.append(name)
        if len(seen) == 2:
            raise RuntimeError("receiver failed")

    lock_acquired.connect(boom)
    try:
        with pytest.raises(RuntimeError, match="receiver failed"):
            MultiLock(names, ttl=30).acquire()
    finally:
        lock_acquired.disconnect(boom)
    assert held(*names) == [False, False, False]
    with MultiLock(names, ttl=30, timeout=0) as lock:
        assert lock.owned()


def test_names_on_one_shard_take_one_script_and_on_several_the_ordered_path(backend):
    together = on_one_shard("path:", 3)
    with MultiLock(together, ttl=10):
        assert len({holder_token(name) for name in together}) == 1, "one script, one token"
    spread = on_several_shards("path:", 3)
    with MultiLock(spread, ttl=10):
        tokens = {holder_token(name) for name in spread}
    # On Cluster, names on several shards are taken one by one (a token each).
    assert len(tokens) == (3 if backend.kind == "cluster" else 1)


def test_on_several_shards_a_busy_last_name_rolls_the_others_back(backend):
    names = on_several_shards("roll:", 3)
    holder = Lock(names[-1], ttl=30)
    holder.acquire()
    assert not MultiLock(names, ttl=30).acquire(0)
    assert not MultiLock(names, ttl=30).acquire(0.1)
    assert held(*names) == [False, False, True]
    assert [queued(backend, name) for name in names] == [0, 0, 0]
    holder.release()


def test_a_fair_name_with_a_live_waiter_is_busy_for_a_newcomer(backend, settings):
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_RETRY_DELAY": SLOW_RETRY_DELAY}
    first, second = on_one_shard("fair:", 2)
    holder = Lock(first, ttl=30, fair=True)
    holder.acquire()
    got: list[bool] = []
    in_thread(lambda: got.append(Lock(first, ttl=30, fair=True).acquire(60)))
    wait_for(lambda: queued(backend, first) == 1, 10, "queued")
    # The holder ends without a release (no hand-off): free, its waiter still asleep.
    backend.client.delete(holder.keys[0])
    assert not MultiLock([first, second], ttl=30, fair=True).acquire(0)
    assert held(first, second) == [False, False]
    # Not fair: the queue is not respected; its release hands the name to the waiter.
    with MultiLock([first, second], ttl=30):
        pass
    wait_for(lambda: got == [True], BEFORE_ANY_RECHECK, "the waiter got it")


def test_a_key_of_another_type_in_a_names_place_is_set_aside(backend):
    backend.client.hset(Lock("odd:a").keys[0], "x", "y")
    with MultiLock(["odd:a", "odd:b"], ttl=10, timeout=0) as lock:
        assert lock.owned()
    assert not lock.locked()


def test_overlapping_sets_in_threads_never_deadlock_or_overlap(backend):
    sets = [["ring:a", "ring:b"], ["ring:b", "ring:c"], ["ring:c", "ring:a"]]
    inside: dict[str, int] = {"ring:a": 0, "ring:b": 0, "ring:c": 0}
    overlaps: list[str] = []
    done: list[int] = []

    def work(names: list[str]) -> None:
        lock = MultiLock(names, ttl=10, timeout=30)
        for _ in range(30):
            with lock:
                for name in names:
                    inside[name] += 1
                    if inside[name] > 1:
                        overlaps.append(name)
                time.sleep(0.0005)
                for name in names:
                    inside[name] -= 1
        done.append(1)

    threads = [in_thread(work, names) for names in sets for _ in range(2)]
    for thread in threads:
        thread.join(60)
    assert len(done) == 6
    assert overlaps == []


def test_signals_name_each_name(backend):
    seen: list[tuple[str, str]] = []

    def make(kind: str) -> Any:
        def receiver(sender: Any, name: str, **kwargs: Any) -> None:
            seen.append((kind, name))

        return receiver

    receivers = {
        s: make(k) for s, k in [(lock_acquired, "acq"), (lock_released, "rel"), (lock_busy, "busy")]
    }
    first, second = sorted(on_one_shard("sig:", 2))
    for signal, receiver in receivers.items():
        signal.connect(receiver)
    try:
        with MultiLock([first, second], ttl=5):
            assert not MultiLock([second], ttl=5).acquire(0)
    finally:
        for signal, receiver in receivers.items():
            signal.disconnect(receiver)
    assert seen == [
        ("acq", first),
        ("acq", second),
        ("busy", second),
        ("rel", first),
        ("rel", second),
    ]
