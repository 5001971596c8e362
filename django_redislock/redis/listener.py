"""The blocking reader of one pool and hash tag, and the waits it serves (see ``wakeups``)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..conf import conf

logger = logging.getLogger(__name__)


# The listener's BLPOP ends this often (a cache's SOCKET_TIMEOUT must be longer than
# LOCK_RETRY_DELAY already, see the README), so lists nobody waits on drop out.
def listen_seconds() -> float:
    return max(0.05, min(0.5, conf.LOCK_RETRY_DELAY))


IDLE_SECONDS = 30.0  # a listener with nobody to wake for this long ends
MAIL_SECONDS = 5.0  # a popped value whose waiter left is kept this long for its next wait
# The listener's connection's name (CLIENT SETNAME), so that CLIENT LIST tells it from a
# waiter: it stays blocked, with nobody to wake, for up to IDLE_SECONDS.
CLIENT_NAME = "django-redislock-wakeups"


class Waiter:
    """One wait: an event set (or a future resolved) with the popped value; ``accepts``:
    which values are its own (None: any)."""

    __slots__ = ("accepts", "deliver", "value")

    def __init__(
        self, deliver: Callable[[Any], None], accepts: Callable[[Any], bool] | None = None
    ) -> None:
        self.value: Any = None
        self.deliver = deliver
        self.accepts = accepts

    def wants(self, value: Any) -> bool:
        return self.accepts is None or self.accepts(value)


class Listener:
    """The blocking reader of one pool and hash tag."""

    def __init__(self, client: Any, key: str) -> None:
        self.client = client  # a sync client of the node holding the lists
        self.control = f"{tag_prefix(key)}~wakeups:{uuid.uuid4().hex}"
        self.lock = threading.Lock()
        self.waiters: dict[str, list[Waiter]] = {}
        self.mail: dict[str, tuple[Any, float]] = {}
        self.listening: frozenset[str] = frozenset()
        self.nudged = False
        self.thread: threading.Thread | None = None

    def register(self, key: str, waiter: Waiter) -> bool:
        """Start waiting on ``key``; True when the caller must nudge the listener."""
        with self.lock:
            mailed = self.mail.get(key)
            if mailed is not None and waiter.wants(mailed[0]):
                del self.mail[key]
                waiter.value = mailed[0]
                waiter.deliver(mailed[0])
                return False
            self.waiters.setdefault(key, []).append(waiter)
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._run, name="django-redislock-wakeups", daemon=True
                )
                self.thread.start()
            if key in self.listening or self.nudged:
                return False
            self.nudged = True
            return True

    def unregister(self, key: str, waiter: Waiter) -> Any:
        """Stop waiting on ``key``; the value delivered meanwhile, or None."""
        with self.lock:
            self._drop(key, waiter)
            return waiter.value

    def give_back(self, key: str, waiter: Waiter) -> None:
        """Stop waiting on ``key`` without taking the value delivered meanwhile (the wait was
        cancelled): it goes to another waiter of ``key``, or is kept for the next."""
        with self.lock:
            self._drop(key, waiter)
            value, waiter.value = waiter.value, None
        if value is not None:
            self._deliver(key, value)

    def _drop(self, key: str, waiter: Waiter) -> None:
        waiting = self.waiters.get(key)
        if waiting is not None and waiter in waiting:
            waiting.remove(waiter)
            if not waiting:
                del self.waiters[key]

    def nudge_command(self) -> tuple[tuple[str], tuple[int]]:
        """KEYS and ARGV of ``NUDGE``."""
        return (self.control,), (max(1000, int(listen_seconds() * 4000)),)

    def _run(self) -> None:
        conn = None
        idle_since = time.monotonic()
        try:
            while True:
                with self.lock:
                    keys = list(self.waiters)
                    self.listening = frozenset(keys)
                    self.nudged = False
                    self._expire_mail()
                    if not keys and time.monotonic() - idle_since > IDLE_SECONDS:
                        self.thread = None
                        return
                if keys:
                    idle_since = time.monotonic()
                try:
                    if conn is None:
                        conn = self.client.connection_pool.get_connection()
                        _name(conn)
                    conn.send_command("BLPOP", self.control, *keys, listen_seconds())
                    reply = conn.read_response()
                except Exception as exc:
                    logger.debug("Wake-up listener: %s; reconnecting.", exc)
                    if conn is not None:
                        conn.disconnect()
                        self.client.connection_pool.release(conn)
                        conn = None
                    time.sleep(0.05)
                    continue
                if reply is not None:
                    self._deliver(_text(reply[0]), reply[1])
        finally:
            if conn is not None:
                conn.disconnect()  # named: not for the pool's other users
                self.client.connection_pool.release(conn)

    def _deliver(self, key: str, value: Any) -> None:
        if key == self.control:
            return
        with self.lock:
            waiting = self.waiters.get(key)
            if not waiting:
                self.mail[key] = (value, time.monotonic())
                return
            waiter = next((w for w in waiting if w.wants(value)), waiting[0])
            self._drop(key, waiter)
            waiter.value = value
        waiter.deliver(value)

    def _expire_mail(self) -> None:
        if self.mail:
            old = time.monotonic() - MAIL_SECONDS
            for key in [k for k, (_, at) in self.mail.items() if at < old]:
                del self.mail[key]


def _name(conn: Any) -> None:
    """Name the listener's connection (``CLIENT_NAME``), where ``CLIENT`` is allowed."""
    try:
        conn.send_command("CLIENT", "SETNAME", CLIENT_NAME)
        conn.read_response()
    except Exception as exc:  # not allowed (an ACL, a proxy): nameless, as it was
        logger.debug("Wake-up listener: CLIENT SETNAME failed: %s", exc)


def tag_prefix(key: str) -> str:
    """The part of ``key`` up to its hash tag's end (the whole key's slot on Cluster)."""
    end = key.find("}")
    return key[: end + 1] + ":" if "{" in key[:end] else f"{conf.KEY_PREFIX}:"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
