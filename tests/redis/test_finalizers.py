"""Garbage collection at the worst moment: a finalizer runs inside whatever allocation set
off the collection, on that thread, possibly while it holds a lock a Redis command needs. No
finalizer of ours may take such a lock, send a command, or give a kept connection back twice
(issue 24, point 2)."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from django_redislock import Lock, get_redis
from django_redislock.exceptions import RedisUnavailable
from django_redislock.redis import clients, fastpath


def finishes(work: Callable[[], Any], seconds: float = 20) -> Any:
    """Run ``work`` on a thread; fail (rather than hang the suite) if it does not end."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(("ok", work()))
        except BaseException as exc:
            outcome.append(("error", exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"{work.__name__} hung: a finalizer waited on its own thread")
    kind, value = outcome[0]
    if kind == "error":
        raise value
    return value


def cyclic_garbage_holding_a_kept_connection() -> None:
    """Leave this thread's kept connection reachable only through a reference cycle, so that
    only the cyclic collector can free it."""
    held = fastpath.dedicated(get_redis())
    assert held is not None
    cycle: list[Any] = [held]
    cycle.append(cycle)
    fastpath.forget()  # the thread lets go of it at its next command
    fastpath.dedicated(get_redis())
    del held, cycle


@pytest.mark.parametrize("inside", ["kept connections", "client registry", "pool"])
def test_a_collection_inside_our_own_locks_does_not_hang(settings, redis_server, inside):
    settings.REDISLOCK = {"URL": f"{redis_server.url}?max_connections=8"}
    pool = get_redis().connection_pool
    guard = {
        "kept connections": fastpath._kept_lock,
        "client registry": clients._clients_lock,
        "pool": pool._lock,
    }[inside]

    def collect_while_holding_the_lock() -> None:
        cyclic_garbage_holding_a_kept_connection()
        with guard:
            gc.collect()  # the kept connection's finalizer runs here, on this thread

    finishes(collect_while_holding_the_lock)
    # The connection went back to the pool at the next command, and locks work on.
    finishes(lambda: Lock("after-gc", ttl=5).acquire(timeout=1))


def test_collections_at_every_allocation_while_redis_comes_and_goes(settings, processes):
    """With the collector run at every allocation, threads fail to connect (Redis is down:
    half-built connections become garbage), then work again (Redis is back): no thread hangs,
    no failure escapes as anything but RedisUnavailable, and threads never keep more than
    half the pool."""
    from tests.support.servers import RedisServer

    with RedisServer() as server:
        settings.REDISLOCK = {"URL": f"{server.url}?max_connections=8"}
        pool = get_redis().connection_pool
        keep_alive = threading.Event()
        errors: list[BaseException] = []

        def lock_once(name: str, stay: bool) -> None:
            try:
                with Lock(name, ttl=5):
                    pass
            except RedisUnavailable:
                pass
            except BaseException as exc:
                errors.append(exc)
            if stay:
                keep_alive.wait(30)

        def storm(stay: bool, count: int) -> list[threading.Thread]:
            threads = [
                threading.Thread(target=lock_once, args=(f"gc-{i}", stay), daemon=True)
                for i in range(count)
            ]
            for thread in threads:
                thread.start()
            return threads

        old = gc.get_threshold()
        gc.set_threshold(1, 1, 1)
        try:
            storm(False, 1)[0].join(10)  # one thread keeps a connection, then ends
            server.stop()
            for thread in storm(False, 12):  # every connect fails
                thread.join(20)
                assert not thread.is_alive(), "a thread hung while Redis was down"
            server.start()
            staying = storm(True, 12)
            deadline = time.monotonic() + 20
            while len(pool._get_in_use_connections()) < 4 and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.2)  # let every thread finish its command
            kept = len(pool._get_in_use_connections())
        finally:
            gc.set_threshold(*old)
            keep_alive.set()
        for thread in staying:
            thread.join(20)
            assert not thread.is_alive()
        assert errors == []
        assert kept <= 4, f"threads kept {kept} of the pool's 8 connections (at most half)"
