"""Lock listing: prefix search through the name index, its upkeep, and pages across shards;
on fakeredis, a real redis-server and a real Cluster."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from redis.cluster import RedisCluster

from django_redislock import Lock, get_redis
from django_redislock.exceptions import LockNotOwned
from django_redislock.locks import listing, name_search
from django_redislock.locks.keys import index_keys, shard_base
from django_redislock.locks.listing import list_locks
from tests.support.fixtures import Backend

ODD_NAMES = [
    "a",
    "ab",
    "a*b",
    "a?c",
    "a[x]",
    "a]",
    "a\\d",
    "a-",
    "a(",
    "aé:1",
    "aÿ",
    "a日本:1",
    "b",
    "café:1",
    "日本:1",
    "[a",
    "(a",
    "-a",
    "+a",
    "*",
]


def names(page: listing.LockPage) -> list[str]:
    return [info.name for info in page.locks]


def indexed(backend: Backend, name: str) -> tuple[bool, bool]:
    """Whether ``name`` is in its shard's (expiry index, name index)."""
    index, by_name, _ = index_keys(Lock(name).base)
    return (
        backend.client.zscore(index, name) is not None,
        backend.client.zscore(by_name, name) is not None,
    )


@pytest.fixture
def held(backend: Backend) -> Iterator[list[Lock]]:
    locks = [Lock(name, ttl=30 + i) for i, name in enumerate(ODD_NAMES)]
    for lock in locks:
        assert lock.acquire(0)
    yield locks
    for lock in locks:
        lock.release()


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("a*", ["a*b"]),
        ("a?", ["a?c"]),
        ("a[", ["a[x]"]),
        ("a]", ["a]"]),
        ("a\\", ["a\\d"]),
        ("a(", ["a("]),
        ("a-", ["a-"]),
        ("aé", ["aé:1"]),
        ("a日", ["a日本:1"]),
        ("日本:", ["日本:1"]),
        ("ab", ["ab"]),  # a whole name, no other name after it
        ("[", ["[a"]),
        ("(", ["(a"]),
        ("-", ["-a"]),
        ("+", ["+a"]),
        ("*", ["*"]),
        ("c", ["café:1"]),
        ("x", []),
        ("a b", []),  # no name holds whitespace or braces: nothing matches, nothing fails
        ("{a}", []),
    ],
)
def test_prefix_is_literal_whatever_characters_it_holds(
    held: list[Lock], prefix: str, expected: list[str]
) -> None:
    page = list_locks(prefix)
    assert names(page) == expected
    assert page.total == len(expected)


def test_a_prefix_that_is_a_whole_name_finds_it_and_longer_names_in_name_order(
    held: list[Lock],
) -> None:
    page = list_locks("a")
    expected = sorted(n for n in ODD_NAMES if n.startswith("a"))
    assert names(page) == expected
    assert expected[0] == "a"
    assert "aÿ" in expected  # ÿ is 0xc3 0xbf in UTF-8: inside the range's 0xff bound
    assert page.total == len(expected)


def test_the_empty_prefix_lists_every_lock_by_expiry(held: list[Lock]) -> None:
    page = list_locks("", limit=100)
    assert names(page) == ODD_NAMES  # acquired with rising TTLs
    assert page.total == len(ODD_NAMES)


@pytest.mark.parametrize("deep_offset", [0, 7, 500])
def test_prefix_pages_follow_one_another_across_shards(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, deep_offset: int
) -> None:
    # DEEP_OFFSET 0: on Cluster every page past the first is found by counting on pivots.
    monkeypatch.setattr(name_search, "DEEP_OFFSET", deep_offset)
    locks = [Lock(f"{kind}:{i}", ttl=30) for i in range(90) for kind in ("page", "other")]
    for lock in locks:
        assert lock.acquire(0)
    try:
        expected = sorted(lock.name for lock in locks if lock.name.startswith("page:"))
        pages = [list_locks("page:", offset=offset, limit=8) for offset in range(0, 96, 8)]
        assert [n for page in pages for n in names(page)] == expected
        assert {page.total for page in pages} == {90}
        for offset in (0, 1, 13, 44, 45, 88, 89):
            assert names(list_locks("page:", offset=offset, limit=1)) == [expected[offset]]
        beyond = list_locks("page:", offset=90)
        assert (beyond.locks, beyond.total) == ([], 90)
    finally:
        for lock in locks:
            lock.release()


def test_locks_that_ended_unreleased_are_not_shown_and_leave_both_indexes(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    Lock("gone:1", ttl=0.05).acquire(0)
    kept = Lock("gone:2", ttl=30)
    kept.acquire(0)
    time.sleep(0.15)
    page = list_locks("gone:")
    assert (names(page), page.total) == (["gone:2"], 1)
    assert indexed(backend, "gone:1") == (True, False)  # out of the name index at once
    assert names(list_locks(limit=1)) == ["gone:2"]  # (the page starts after it, by rank)
    monkeypatch.setattr(listing, "STALE_MARGIN_MS", 0)
    assert list_locks().total == 1
    assert indexed(backend, "gone:1") == (False, False)  # and of the expiry index later
    assert indexed(backend, "gone:2") == (True, True)
    kept.release()


def test_a_sweep_backlog_is_taken_in_batches_expiry_ties_included(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    list_locks("tie:")  # the name index is in use from here on
    shard = Lock("tie:0").base  # all on one shard (Cluster has 16)
    locks = [lock for i in range(500) if (lock := Lock(f"tie:{i}", ttl=30)).base == shard][:12]
    for lock in locks:
        lock.acquire(0)
    # As if they ended unreleased just now (after the first sweep): six a millisecond apart,
    # then six in the same millisecond.
    time.sleep(0.1)
    past = int(time.time() * 1000) - 50
    for i, lock in enumerate(locks):
        backend.client.zadd(index_keys(lock.base)[0], {lock.name: past - max(0, 6 - i)})
    monkeypatch.setattr(listing, "SWEEP_BATCH", 5)
    monkeypatch.setattr(listing, "SWEEP_CALLS", 1)
    # 5 a call, and a batch ending in a millisecond takes all of that millisecond.
    assert [list_locks("tie:").total for _ in range(3)] == [7, 0, 0]
    assert all(indexed(backend, lock.name) == (True, False) for lock in locks)


def test_release_and_force_release_remove_the_name(backend: Backend) -> None:
    mine, stuck = Lock("drop:mine", ttl=30), Lock("drop:stuck", ttl=30)
    mine.acquire(0)
    stuck.acquire(0)
    assert list_locks("drop:").total == 2
    mine.release()
    assert Lock.force_release("drop:stuck")
    assert indexed(backend, "drop:mine") == (False, False)
    assert indexed(backend, "drop:stuck") == (False, False)
    assert list_locks("drop:") == listing.LockPage([], 0)


def test_a_hand_off_to_a_waiter_keeps_the_name(backend: Backend) -> None:
    holder = Lock("handed", ttl=30, fair=True)
    holder.acquire(0)
    # A live waiter from another host, queued as Lock.acquire queues one.
    token, deadline = "feedfacefeedface|", int(time.time() * 1000) + 30000
    backend.client.zadd(holder.keys.waiters, {token: 1})
    backend.client.hset(holder.keys.registrations, token, f"{deadline}|30000|0|1|elsewhere")
    holder.release()
    page = list_locks("hand")
    assert [(i.name, i.host) for i in page.locks] == [("handed", "elsewhere")]
    assert indexed(backend, "handed") == (True, True)
    assert Lock.force_release("handed")


def test_extend_puts_back_a_name_swept_too_early(backend: Backend) -> None:
    lock = Lock("early:extended", ttl=30)
    lock.acquire(0)
    # As a sweep leaves it when the holder's clock runs behind the lister's.
    backend.client.zrem(index_keys(lock.base)[1], lock.name)
    lock.extend(40)
    assert indexed(backend, lock.name) == (True, True)
    lock.release()


def test_a_lock_key_holding_garbage_never_breaks_the_listing(backend: Backend) -> None:
    locks = [Lock(name, ttl=30) for name in ("fine", "garbled", "typed")]
    for lock in locks:
        assert lock.acquire()
    fine, garbled, typed = locks
    backend.client.set(garbled.keys[0], "not a lock value", px=30000)
    backend.client.delete(typed.keys[0])
    backend.client.rpush(typed.keys[0], "a list")
    shown = {info.name: info for info in list_locks().locks}
    assert shown["fine"].pid > 0
    assert shown["garbled"].host == "(unreadable lock value)"
    assert "typed" not in shown
    fine.release()
    for lock in (garbled, typed):  # not this owner's any more: refused clearly
        with pytest.raises(LockNotOwned):
            lock.release()
        with pytest.raises(LockNotOwned):
            lock.extend()
    # A key of the wrong type is no lock: set aside, and the lock can be taken.
    for fencing in (False, True):
        with Lock("typed", ttl=5, fencing=fencing) as again:
            assert again.owned()
        backend.client.rpush(typed.keys[0], "a list again")
    assert backend.client.exists(typed.keys[0] + ":corrupt")


@pytest.mark.parametrize("shards", [1, 5, 48])
def test_lock_shards_spread_locks_over_that_many_shards_and_all_are_listed(
    redis_cluster: Any, settings: Any, shards: int
) -> None:
    settings.REDISLOCK = {"URL": redis_cluster.url, "CLUSTER": True, "LOCK_SHARDS": shards}
    client = get_redis()
    client.flushall(target_nodes=RedisCluster.PRIMARIES)
    locks = [Lock(f"spread:{i}", ttl=30) for i in range(10 * shards)]
    for lock in locks:
        assert lock.acquire(0)
    try:
        assert {lock.base for lock in locks} == {shard_base(s) for s in range(shards)}
        masters = {client.get_node_from_key(lock.keys.lock).name for lock in locks}
        assert len(masters) == (1 if shards == 1 else 3)  # more shards, more masters used
        expected = sorted(lock.name for lock in locks)
        everything = list_locks(limit=1000)
        assert (sorted(names(everything)), everything.total) == (expected, len(locks))
        by_prefix = list_locks("spread:", limit=1000)
        assert (names(by_prefix), by_prefix.total) == (expected, len(locks))
        assert names(list_locks("spread:", offset=7, limit=3)) == expected[7:10]
    finally:
        for lock in locks:
            lock.release()
    assert list_locks().total == 0


def test_acquires_drop_entries_of_locks_that_ended_unreleased_without_a_listing(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Per-user names whose holders died leave the indexes even where nobody opens the admin
    # (issue 24): each acquire drops a few stale entries of its shard.
    from django_redislock.locks import keys

    base = Lock("crashed:0").base
    crashed = [n for i in range(2000) if Lock(n := f"crashed:{i}").base == base][:40]
    for name in crashed:
        Lock(name, ttl=0.05).acquire(0)
    time.sleep(0.15)
    assert all(indexed(backend, name) == (True, True) for name in crashed)
    monkeypatch.setattr(keys, "STALE_MARGIN_MS", 0)
    live = next(n for i in range(999) if Lock(n := f"live:{i}").base == base)
    with Lock(live, ttl=5):
        pass
    assert sum(indexed(backend, name) == (False, False) for name in crashed) == 16
    for _ in range(2):  # 16 at a time
        with Lock(live, ttl=5):
            pass
    assert [name for name in crashed if indexed(backend, name) != (False, False)] == []
