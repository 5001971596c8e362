"""A Redis Sentinel group on free loopback ports, for the tests: a master, a replica and
three sentinels, which tests fail over (SIGKILL the master) and heal again."""

from __future__ import annotations

import signal
import subprocess
import time
from types import TracebackType
from typing import Any

import redis

from tests.support.servers import RedisServer, redis_server_binary


class SentinelServer(RedisServer):
    """One ``redis-server --sentinel`` on 127.0.0.1 watching ``service`` at ``master_port``."""

    def __init__(self, service: str, master_port: int, options: dict[str, int]) -> None:
        super().__init__()
        self.auto_port = False  # written in its configuration file: never chosen again
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            f"dir {self.dir}",
            "logfile redis.log",
            "daemonize no",
            "protected-mode no",
            # Quorum 2 of 3: a single sentinel's opinion never fails a master over.
            f"sentinel monitor {service} 127.0.0.1 {master_port} 2",
        ]
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
