from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import pytest
from django.db.models import F

from django_redislock import AsyncLock, Lock
from django_redislock.exceptions import RedisUnavailable
from django_redislock.fencing import fenced_update
from tests.models import Account
from tests.support.servers import RedisServer

pytestmark = pytest.mark.django_db


def test_a_newer_fence_writes_and_an_older_one_is_refused(backend):
    account = Account.objects.create(balance=100)
    rows = Account.objects.filter(pk=account.pk)
    with Lock("acct", ttl=5, fencing=True) as old:
        old_fence = old.fence
    with Lock("acct", ttl=5, fencing=True) as new:
        new_fence = new.fence
        assert fenced_update(rows, new_fence, balance=90) == 1
    assert fenced_update(rows, old_fence, balance=0) == 0
    account.refresh_from_db()
    assert (account.balance, account.fence) == (90, new_fence)


def test_bad_fence_arguments():
    rows = Account.objects.all()
    for fence in (None, 0, -1, "3", True):
        with pytest.raises(ValueError, match="fence must be a positive int"):
            fenced_update(rows, fence, balance=1)
    with pytest.raises(ValueError, match="set from the fence"):
        fenced_update(rows, 3, fence=4)


def _fence_after_hand_off(name: str) -> int:
    """The fence a waiter gets when the holder's release hands the lock straight to it."""
    holder = Lock(name, ttl=5, fencing=True)
    assert holder.acquire()
    fences: list[int | None] = []

    def wait() -> None:
        with Lock(name, ttl=5, fencing=True, timeout=5) as waiter:
            fences.append(waiter.fence)

    thread = threading.Thread(target=wait)
    thread.start()
    while not holder.client.exists(holder.keys[1]):  # the waiter queued
        time.sleep(0.005)
    holder.release()
    thread.join(10)
    assert isinstance(fences[0], int)
    return fences[0]


def test_fences_keep_increasing_after_the_counter_was_lost(backend):
    # A failover to a replica that had not received the counter, or an eviction, loses it.
    with Lock("lost-counter", ttl=5, fencing=True) as before:
        first = before.fence
        counter = before.keys[3]
    assert isinstance(first, int)
    assert first > 0
    backend.client.delete(counter)
    with Lock("lost-counter", ttl=5, fencing=True) as after:
        second = after.fence
    assert isinstance(second, int)
    assert second > first
    backend.client.delete(counter)
    assert _fence_after_hand_off("lost-counter") > second


def restart(server: RedisServer) -> None:
    server.restart()
    # The kept connection learns that the server went away on its next command.
    with contextlib.suppress(RedisUnavailable):
        Lock("warm-up", ttl=1).locked()


def test_fences_keep_increasing_across_a_restart_without_persistence(settings):
    account = Account.objects.create(balance=100)
    rows = Account.objects.filter(pk=account.pk)
    with RedisServer() as server:  # started with --save "" --appendonly no
        settings.REDISLOCK = {"URL": server.url}
        fences = []
        for _ in range(3):
            with Lock("restarted", ttl=5, fencing=True) as lock:
                fences.append(lock.fence)
                assert fenced_update(rows, lock.fence, balance=F("balance") - 10) == 1
        stale = fences[-1]
        restart(server)
        assert not server.client().exists(lock.keys[3]), "the restart must lose the counter"
        seconds, micros = server.client().time()
        with Lock("restarted", ttl=5, fencing=True) as lock:
            fresh = lock.fence
            assert isinstance(fresh, int)
            assert fresh > stale
            assert fresh >= seconds * 1_000_000 + micros  # never below the server's clock (µs)
            # The first holder after the restart is not refused...
            assert fenced_update(rows, fresh, balance=F("balance") - 10) == 1
        # ...and a stale holder from before it still is.
        assert fenced_update(rows, stale, balance=0) == 0
        assert _fence_after_hand_off("restarted") > fresh

        async def async_fence() -> int | None:
            async with AsyncLock("restarted", ttl=5, fencing=True) as alock:
                return alock.fence

        restart(server)
        assert (asyncio.run(async_fence()) or 0) > fences[-1]
    account.refresh_from_db()
    assert account.balance == 60


def test_fences_are_plain_ints_in_the_lock_value_and_the_listing(backend):
    with Lock("int-fence", ttl=5, fencing=True) as lock:
        value = backend.client.get(lock.keys[0])
        fence_text = (value.decode() if isinstance(value, bytes) else value).split("|")[2]
        assert fence_text == str(lock.fence)  # not "1.7e+15"
        counter = backend.client.get(lock.keys[3])
        assert int(counter) == lock.fence
