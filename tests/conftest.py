"""Fixtures: the Redis backends every lock test runs on, and real processes.

``backend`` runs a test three times: on fakeredis (fast), on a real ``redis-server`` and on
a real 3-master Redis Cluster, both started here on free loopback ports. Nothing skips:
when no server binary can be found, the fixture fails and says how to get one.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest

# The ported peers' suites import Backend and _configure from here, as they were ported.
from tests.support.fixtures import Backend, Processes
from tests.support.fixtures import configure_backend as _configure
from tests.support.sentinel_servers import RedisSentinelGroup
from tests.support.servers import RedisClusterServers, RedisServer

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


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, settings: Any) -> Backend:
    return _configure(request, settings, request.param)


@pytest.fixture(params=REAL_BACKENDS)
def real_backend(request: pytest.FixtureRequest, settings: Any) -> Backend:
    """A real server (standalone, then Cluster), for tests with real OS processes."""
    return _configure(request, settings, request.param)


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
