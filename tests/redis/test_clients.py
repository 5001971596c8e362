from __future__ import annotations

import time
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from redis.cluster import RedisCluster

from django_redislock import Lock, get_redis
from django_redislock.redis.clients import reset_connections


def test_default_comes_from_the_django_redis_cache(settings):
    from django_redis import get_redis_connection

    settings.REDISLOCK = {"CACHE": "default"}
    assert get_redis() is get_redis()
    get_redis().set("probe", "1")
    assert get_redis_connection("default").get("probe") == b"1"


def test_url_setting_wins_and_changes_follow_override_settings(settings, redis_server):
    settings.REDISLOCK = {"URL": redis_server.url}
    client = get_redis()
    assert client.connection_pool.connection_kwargs["port"] == redis_server.port
    settings.REDISLOCK = {"CACHE": "default"}
    assert get_redis() is not client


def test_using_a_url_or_an_alias(settings, redis_server):
    assert (
        get_redis(redis_server.url).connection_pool.connection_kwargs["port"] == redis_server.port
    )
    assert get_redis("default") is get_redis("default")
    with pytest.raises(ImproperlyConfigured, match="neither a cache alias"):
        get_redis("nope")


def test_cluster_setting(settings, redis_cluster):
    settings.REDISLOCK = {"URL": redis_cluster.url, "CLUSTER": True}
    assert isinstance(get_redis(), RedisCluster)


def test_lock_using_another_redis(settings, redis_server):
    settings.REDISLOCK = {"CACHE": "default"}
    reset_connections()
    lock = Lock("elsewhere", ttl=5, using=redis_server.url)
    with lock:
        assert redis_server.client().exists(lock.keys[0])
        assert not get_redis().exists(lock.keys[0])


def test_a_connection_closed_by_the_server_is_replaced(settings, redis_server, monkeypatch):
    from django_redislock.redis import fastpath

    monkeypatch.setattr(fastpath, "IDLE_CHECK_SECONDS", 0.0)
    settings.REDISLOCK = {"URL": redis_server.url}
    with Lock("idle", ttl=5):
        pass
    redis_server.client().client_kill_filter(_type="normal", skipme=True)
    with Lock("idle", ttl=5) as lock:  # the lock's own connection was killed meanwhile
        assert lock.owned()


def test_redis_restart_then_locks_work_again(settings, processes):
    from django_redislock.exceptions import RedisUnavailable
    from tests.support.servers import RedisServer

    with RedisServer() as server:
        settings.REDISLOCK = {"URL": server.url}
        with Lock("restart", ttl=5):
            pass
        server.stop()
        with pytest.raises(RedisUnavailable):
            Lock("restart", ttl=5).acquire()
        server.start()
        with Lock("restart", ttl=5) as lock:
            assert lock.owned()


def test_threads_that_end_give_their_connection_back(settings, redis_server):
    import gc
    import threading

    settings.REDISLOCK = {"URL": f"{redis_server.url}?max_connections=2"}
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with Lock("pool", ttl=5):
                pass
        except BaseException as exc:
            errors.append(exc)

    for _ in range(6):  # more threads than the pool has connections
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
        gc.collect()
    assert errors == []


def test_lock_traffic_never_starves_a_bounded_pool(settings, redis_server):
    import threading

    settings.REDISLOCK = {"URL": f"{redis_server.url}?max_connections=3"}
    done, stay = threading.Barrier(4), threading.Event()

    def work() -> None:
        with Lock(f"bounded-{threading.get_ident()}", ttl=5):
            pass
        done.wait()
        stay.wait(10)  # a long-lived server thread

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    done.wait()
    try:
        assert get_redis().set("still", "works")
        with Lock("bounded-main", ttl=5) as lock:
            assert lock.owned()
    finally:
        stay.set()
        for thread in threads:
            thread.join()


@pytest.mark.parametrize("options", ["", "?encoding=latin-1"])
def test_lock_keys_are_encoded_as_the_client_encodes_them(settings, redis_server, options):
    settings.REDISLOCK = {"URL": f"{redis_server.url}{options}"}
    lock = Lock("café", ttl=5)
    with lock:
        lock.client.set(lock.keys[0] + ":probe", 1)  # the same name, sent by the client
        keys = set(redis_server.client().keys("*caf*"))
    assert len(keys) == 2
    assert {key.removesuffix(b":probe") for key in keys} == {min(keys, key=len)}


def test_replies_are_awaited_by_spinning_on_the_socket(settings, redis_server, monkeypatch):
    from django_redislock.redis import clients as connection
    from django_redislock.redis import fastpath

    monkeypatch.setattr(fastpath, "IDLE_CHECK_SECONDS", 0.0)
    settings.REDISLOCK = {"URL": redis_server.url}
    client = get_redis()
    assert connection.call(client, "SET", "spin", "1") == b"OK"
    held = fastpath.dedicated(client)
    assert held is not None
    assert held.spin == 0.0002
    assert held.direct  # the reply is read from the socket into redis-py's reader
    assert held.polled is held.conn._sock
    # A reply within SPIN_WAIT clears any miss (a few tries: a loaded test machine can
    # deschedule Redis for longer than the spin).
    deadline = time.monotonic() + 10
    while held.misses and time.monotonic() < deadline:
        assert connection.call(client, "GET", "spin") == b"1"
    assert held.misses == 0

    # The server closes the connection: the next command reconnects and polls the new socket.
    old = held.conn._sock
    redis_server.client().client_kill_filter(_type="normal", skipme=True)
    assert connection.call(client, "GET", "spin") == b"1"
    assert held.conn._sock is not old
    assert held.polled is held.conn._sock


# A script that keeps Redis busy for milliseconds, far longer than SPIN_WAIT.
SLOW = "local i = 0 while i < 2000000 do i = i + 1 end return i"


def test_a_slow_reply_is_read_after_the_spin_and_later_commands_sleep(settings, redis_server):
    from django_redislock.redis import clients as connection
    from django_redislock.redis import fastpath

    settings.REDISLOCK = {"URL": redis_server.url}
    client = get_redis()
    held = fastpath.dedicated(client)
    assert held is not None
    assert connection.call(client, "EVAL", SLOW, 0) == 2000000  # read once the spin gave up
    assert (held.misses, held.skip) == (1, 2)
    assert connection.call(client, "EVAL", SLOW, 0) == 2000000  # skipped: no spin
    assert connection.call(client, "PING") == b"PONG"  # skipped too
    assert held.skip == 0
    assert held.misses == 1
    assert connection.call(client, "EVAL", SLOW, 0) == 2000000  # spins, misses again
    assert (held.misses, held.skip) == (2, 4)  # each miss in a row doubles the pause
    for _ in range(4):
        connection.call(client, "PING")
    assert held.skip == 0
    # Spinning again: a reply within SPIN_WAIT ends the pause (a few tries, should the test
    # machine deschedule Redis for longer than SPIN_WAIT).
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        assert connection.call(client, "PING") == b"PONG"
        if held.misses == 0:
            break
    assert (held.misses, held.skip) == (0, 0)
    # A blocking command waits on purpose: it is never spun for, so it is never a miss.
    assert connection.call(client, "BLPOP", "nothing", 0.02) is None
    assert (held.misses, held.skip) == (0, 0)


def test_spin_wait_zero_always_sleeps(settings, redis_server):
    from django_redislock.redis import fastpath

    settings.REDISLOCK = {"URL": redis_server.url, "SPIN_WAIT": 0}
    client = get_redis()
    with Lock("sleepy", ttl=5) as lock:
        assert lock.owned()
    held = fastpath.dedicated(client)
    assert held is not None
    assert held.spin == 0
    assert held.poller is None


def test_the_first_command_after_a_redis_restart_goes_through(settings: Any) -> None:
    import asyncio

    from django_redislock import AsyncLock, Lock, get_queue
    from tests.support.servers import RedisServer

    with RedisServer() as server:
        settings.REDISLOCK = {"URL": server.url}
        with Lock("before", ttl=5):
            pass
        get_queue().enqueue("tests.tasks.record", args=[1])

        async def take() -> bool:
            async with AsyncLock("async", ttl=5) as lock:
                return await lock.owned()

        assert asyncio.run(take())
        for _ in range(2):
            server.restart()
            with Lock("after", ttl=5) as lock:  # no RedisUnavailable: sent again once
                assert lock.owned()
            assert get_queue().enqueue("tests.tasks.record", args=[2]).state == "ready"
            assert asyncio.run(take())


@pytest.mark.parametrize("lock", ["clients"])
def test_a_child_forked_while_a_thread_holds_a_client_lock_is_not_stuck(
    settings: Any, redis_server: Any, lock: str
) -> None:
    """Fork from a process whose other thread holds the client registry's (or the kept
    connections') lock at that moment: the child must not wait for it forever."""
    import os
    import signal
    import threading

    from django_redislock.redis import clients, fastpath

    settings.REDISLOCK = {"URL": redis_server.url}
    the_lock = clients._clients_lock if lock == "clients" else fastpath._kept_lock
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with the_lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(5)
    try:
        pid = os.fork()
        if pid == 0:  # the child: a client and a command, each needing that lock
            status = 1
            try:
                with Lock("forked", ttl=5):
                    status = 0
            finally:
                os._exit(status)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.02)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("The forked child waited for a lock its parent's thread held.")
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        release.set()
        holder.join()
