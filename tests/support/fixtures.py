"""What the fixtures hand to tests (``tests/conftest.py`` registers the fixtures): the
configured Redis ``Backend`` (fakeredis, a real server, a real Cluster) and ``Processes``,
real forked children killed at teardown."""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import pytest
from redis.cluster import RedisCluster

from django_redislock.redis.clients import get_redis


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


def configure_backend(request: pytest.FixtureRequest, settings: Any, kind: str) -> Backend:
    if kind == "fakeredis":
        settings.REDISLOCK = {"CACHE": "default"}
        url = None
    elif kind == "redis":
        url = request.getfixturevalue("redis_server").url
        settings.REDISLOCK = {"URL": url}
    else:
        url = request.getfixturevalue("redis_cluster").url
        settings.REDISLOCK = {"URL": url, "CLUSTER": True}
    # Job runs an earlier test counted and the history thread has not sent yet (it sends
    # once a second) would land in this test's Redis.
    from django_redislock.history.recording import RECORDER

    RECORDER.discard()
    backend = Backend(kind, get_redis(), url)
    backend.flush()
    return backend


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
