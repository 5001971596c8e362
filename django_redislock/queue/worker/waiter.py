"""The worker's wake-ups: a BLPOP on the queues' wake-up lists, ended by an enqueue, by the
next due job's time (to the millisecond), or at once by a stop request."""

from __future__ import annotations

import contextlib
import math
import select
import socket
from collections.abc import Sequence
from typing import Any

import redis

from ...exceptions import RedisUnavailable
from ...redis.clients import UNAVAILABLE, call, is_cluster

# Longest single block on Redis while idle (a stop request ends it at once).
MAX_BLOCK = 1.0


class Waiter:
    """Blocks on the queues' wake-up lists until a token arrives or a deadline passes, to
    the millisecond.

    Redis times out a blocked BLPOP only on its next internal tick (every 100 ms at the
    default ``hz 10``), which would start delayed jobs up to 100 ms late. So the waiter keeps
    a connection of its own per BLPOP, waits for the reply locally with a precise timeout,
    and at the deadline unblocks itself (``CLIENT UNBLOCK``) from another connection. A
    server without ``CLIENT UNBLOCK`` (fakeredis) gets plain BLPOP timeouts."""

    def __init__(self, client: Any, keys: Sequence[str]) -> None:
        self.client = client
        self.keys = list(keys)
        if is_cluster(client):  # one BLPOP per key (slot), each on its node
            self.groups = [(client.get_node_from_key(k).redis_connection, [k]) for k in keys]
        else:
            self.groups = [(client, self.keys)]
        self.conns: list[Any] = []
        self.ids: list[int] = []
        self.precise = True
        # A byte on this pair ends a wait at once (``interrupt``: a stop request).
        self.bell, self.ringer = socket.socketpair()
        self.bell.setblocking(False)
        self.ringer.setblocking(False)

    def interrupt(self) -> None:
        """End the current (or the next) wait now; safe from a signal handler."""
        with contextlib.suppress(OSError):  # full (already rung) or closed
            self.ringer.send(b"!")

    def _connect(self) -> None:
        for node, _ in self.groups:
            conn = node.connection_pool.get_connection()
            self.conns.append(conn)
            conn.send_command("CLIENT", "ID")
            self.ids.append(int(conn.read_response()))
            node.execute_command("CLIENT", "UNBLOCK", self.ids[-1])  # supported?

    def wait_for(self, wait: float | None) -> None:
        """Sleep until an enqueue wakes the queues, or ``wait`` seconds (the next due job;
        None: nothing pending) pass; at most ``MAX_BLOCK``. 0: more are ready, no sleep."""
        if wait != 0:
            self.wait(MAX_BLOCK if wait is None else min(max(wait, 0.001), MAX_BLOCK))

    def wait(self, timeout: float) -> None:
        try:
            if self.precise and not self.conns:
                try:
                    self._connect()
                except redis.ResponseError:
                    self.close()
                    self.precise = False
            if not self.precise:
                self._wait_plainly(timeout)
                return
            backstop = timeout + 1.0  # if an unblock were lost, Redis ends the wait anyway
            for conn, (_, keys) in zip(self.conns, self.groups, strict=True):
                conn.send_command("BLPOP", *keys, backstop)
            answered = self._readable(timeout)
            for i, (node, _) in enumerate(self.groups):
                if i not in answered:
                    node.execute_command("CLIENT", "UNBLOCK", self.ids[i])
            for conn in self.conns:  # a token, or nil once unblocked
                conn.read_response()
        except UNAVAILABLE as exc:
            self.close()
            raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc

    def _readable(self, timeout: float) -> set[int]:
        ready = {i for i, conn in enumerate(self.conns) if conn.can_read(timeout=0)}
        if ready:
            return ready
        socks = [conn._sock for conn in self.conns]
        readable = _readable([*socks, self.bell], timeout)
        if self.bell in readable:
            self._hush()
        return {socks.index(sock) for sock in readable if sock is not self.bell}

    def _hush(self) -> None:
        with contextlib.suppress(OSError):  # nothing more to read
            while self.bell.recv(64):
                pass

    def _wait_plainly(self, timeout: float) -> None:
        if len(self.groups) > 1:  # one BLPOP cannot span hash slots: take turns, briefly
            for key in self.keys:
                call(self.client, "BLPOP", key, min(timeout, 0.05))
            return
        call(self.client, "BLPOP", *self.keys, timeout)

    def close(self) -> None:
        for conn, (node, _) in zip(self.conns, self.groups, strict=False):
            conn.disconnect()
            node.connection_pool.release(conn)
        self.conns, self.ids = [], []

    def stop(self) -> None:
        """Close for good, the interrupting pair too."""
        self.close()
        self.bell.close()
        self.ringer.close()


def _readable(socks: list[Any], timeout: float) -> list[Any]:
    """Those of ``socks`` with something to read within ``timeout`` seconds. Through
    ``poll`` where there is one: ``select`` takes no descriptor above 1023, which a worker in
    a process with many files or connections open gets."""
    if not hasattr(select, "poll"):
        return select.select(socks, [], [], timeout)[0]
    poller = select.poll()
    for sock in socks:
        poller.register(sock, select.POLLIN)
    ready = {fd for fd, _ in poller.poll(max(0, math.ceil(timeout * 1000)))}
    return [sock for sock in socks if sock.fileno() in ready]
