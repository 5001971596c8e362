"""Fixtures: the Redis backends every lock test runs on, and real processes.

``backend`` runs a test three times: on fakeredis (fast), on a real ``redis-server`` and on
a real 3-master Redis Cluster, both started here on free loopback ports. Nothing skips:
when no server binary can be found, the fixture fails and says how to get one.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from redis.cluster import RedisCluster

from django_redislock.redis.clients import get_redis
from tests.sentinel_servers import RedisSentinelGroup
from tests.servers import RedisClusterServers, RedisServer

BACKENDS = ["fakeredis", "redis", "cluster"]
REAL_BACKENDS = ["redis", "cluster"]


def pytest_configure(config: pytest.Config) -> None:
    # A shell starts a command put in the background (``pytest &``, ``nohup``) with Ctrl-C
    # ignored, and every process a test starts would inherit that: a worker started so
    # rightly takes no Ctrl-C, and the tests of what Ctrl-C does would hang. The suite runs
    # as under a terminal however it was started; the tests of an ignored SIGINT set it so.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisClusterServers]:
    with RedisClusterServers(3) as cluster:
        yield cluster


@dataclass
class Backend:
    kind: str
    client: Any
    url: str | None

    def flush(self) -> None:
        if isinstance(self.client, RedisCluster):
            self.client.flushall(target_nodes=RedisCluster.PRIMARIES)
        else:
            self.client.flushall()


def _configure(request: pytest.FixtureRequest, settings: Any, kind: str) -> Backend:
    if kind == "fakeredis":
        settings.REDISLOCK = {"CACHE": "default"}
        url = None
    elif kind == "redis":
        url = request.getfixturevalue("redis_server").url
        settings.REDISLOCK = {"URL": url}
    else:
        url = request.getfixturevalue("redis_cluster").url
        settings.REDISLOCK = {"URL": url, "CLUSTER": True}
    backend = Backend(kind, get_redis(), url)
    backend.flush()
    return backend


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, settings: Any) -> Backend:
    return _configure(request, settings, request.param)


@pytest.fixture(params=REAL_BACKENDS)
def real_backend(request: pytest.FixtureRequest, settings: Any) -> Backend:
    """A real server (standalone, then Cluster), for tests with real OS processes."""
    return _configure(request, settings, request.param)


class Processes:
    """Forked child processes that inherit the configured settings; killed at teardown."""

    def __init__(self) -> None:
        self.context = multiprocessing.get_context("fork")
        self.children: list[multiprocessing.process.BaseProcess] = []
        self.dumps: dict[int | None, Any] = {}  # pid -> where a hung child writes its stacks

    def start(self, target: Any, *args: Any) -> multiprocessing.process.BaseProcess:
        from django.db import connections

        connections.close_all()  # a forked child must not share the parent's DB socket
        # closed in cleanup()
        dump = tempfile.NamedTemporaryFile("w+", prefix="child-stacks-", delete=False)  # noqa: SIM115
        process = self.context.Process(target=_child, args=(dump, target, *args), daemon=True)
        process.start()
        self.children.append(process)
        self.dumps[process.pid] = dump
        return process

    def queue(self) -> Any:
        return self.context.Queue()

    def event(self) -> Any:
        return self.context.Event()

    def join_all(self, timeout: float = 60) -> None:
        for child in self.children:
            child.join(timeout)
            assert child.exitcode == 0, f"child {child.pid} exited with {child.exitcode}"

    def cleanup(self, failed: bool = False) -> None:
        for child in self.children:
            if child.is_alive() and child.pid:
                os.kill(child.pid, signal.SIGCONT)
                if failed:
                    self._report_stacks(child.pid)
                child.kill()
            child.join(5)
        for dump in self.dumps.values():
            dump.close()
            os.unlink(dump.name)

    def _report_stacks(self, pid: int) -> None:
        """Print where a child still running at teardown is stuck (shown with the failing
        test's report): every thread's stack, which faulthandler writes on SIGUSR2."""
        os.kill(pid, signal.SIGUSR2)
        time.sleep(0.3)
        dump = self.dumps[pid]
        dump.seek(0)
        print(f"--- child {pid} still running at teardown; its threads:\n{dump.read()}")


def _child(dump: Any, target: Any, *args: Any) -> None:
    faulthandler.register(signal.SIGUSR2, file=dump, all_threads=True)
    target(*args)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[CALL_FAILED] = report.failed
    return report


CALL_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def processes(request: pytest.FixtureRequest) -> Iterator[Processes]:
    procs = Processes()
    yield procs
    procs.cleanup(failed=request.node.stash.get(CALL_FAILED, False))


@pytest.fixture
def redis_backend(request: pytest.FixtureRequest, settings: Any) -> Backend:
    """The real standalone server only, for tests too slow to repeat on every backend."""
    return _configure(request, settings, "redis")


@pytest.fixture(scope="session")
def redis_sentinel() -> Iterator[RedisSentinelGroup]:
    """A master, a replica and three sentinels; tests that fail the master over leave the
    group healthy again (see ``RedisSentinelGroup.wait_healthy``)."""
    with RedisSentinelGroup() as group:
        yield group
