"""One blocking reader per process that fans wake-ups out to its waiters.

A waiter of a lock or semaphore blocks until a release pushes to its wake-up list. A thread
that keeps a connection of its own (see ``fastpath``) blocks on it with ``BLPOP``; any other
waiter (threads beyond the pool's share, asyncio tasks) registers its list here instead and
waits on an event, so a thousand waiters hold no connection each: one listener thread per
pool and hash tag blocks on all their lists at once and hands each popped value to a waiter
of its list (an asyncio waiter through its event loop). Several waiters may share a list (a
lock's or a semaphore's waiters do): a value goes to the first of them, in the order they
registered, that ``accepts`` it (a waiter registered without a test accepts any), else to the
first of them (whose caller then passes it on).

A waiter whose list the listener's ``BLPOP`` does not cover yet nudges it: it pushes to the
listener's control list (same hash tag, so one ``BLPOP`` serves both on Cluster), which
returns the ``BLPOP`` at once; the listener then blocks again on the new set of lists. A
value pushed meanwhile stays in its list until then. A value popped for a waiter that just
stopped waiting goes to another waiter of that list, if any, else is kept for the next wait
of the same list (waiters wait in rounds, see ``locks.waiting``), briefly. The listener's
``BLPOP`` ends at least every ``listen_seconds()`` (a read timeout the pool may set must not
cut it), so lists nobody waits on drop out; an
idle listener ends, and a failed one reconnects: waiters meanwhile rely on their own
re-checks, which never depend on a wake-up arriving.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any

from ..exceptions import RedisUnavailable
from .listener import CLIENT_NAME, Listener, Waiter, listen_seconds, tag_prefix
from .scripts import lua_script

__all__ = ["CLIENT_NAME", "NUDGE", "Listener", "async_wait", "listen_seconds", "wait"]

# KEYS[1] the listener's control list. ARGV[1] its lifetime (ms): a listener that died
# leaves nothing behind. Reply: the list's length.
NUDGE = lua_script(
    "wakeups_nudge",
    """
local n = redis.call('RPUSH', KEYS[1], '1')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return n
""",
)


_listeners: dict[tuple[int, str], Listener] = {}
_listeners_lock = threading.Lock()


def listener(node: Any, key: str) -> Listener:
    """The listener for ``key``'s lists on ``node`` (a sync client of one server)."""
    ident = (id(node.connection_pool), tag_prefix(key))
    found = _listeners.get(ident)
    if found is None or found.client is not node:
        with _listeners_lock:
            found = _listeners.get(ident)
            if found is None or found.client is not node:
                found = _listeners[ident] = Listener(node, key)
    return found


def wait(
    node: Any,
    key: str,
    timeout: float,
    nudge: Callable[[Listener], Any],
    accepts: Callable[[Any], bool] | None = None,
) -> Any:
    """Wait up to ``timeout`` seconds for a value pushed to ``key``: ``[key, value]`` as
    ``BLPOP`` answers, or None. ``nudge(listener)`` sends ``NUDGE``; ``accepts``: see
    ``Waiter``."""
    found = listener(node, key)
    event = threading.Event()
    waiter = Waiter(lambda value: event.set(), accepts)
    if found.register(key, waiter):
        _nudge(found, nudge)
    try:
        event.wait(timeout)
    finally:
        value = found.unregister(key, waiter)
    return None if value is None else [key, value]


async def async_wait(
    node: Any,
    key: str,
    timeout: float,
    nudge: Callable[[Listener], Any],
    accepts: Callable[[Any], bool] | None = None,
) -> Any:
    """``wait`` for an asyncio waiter; ``nudge(listener)`` returns an awaitable. A value
    delivered to a wait that is cancelled goes to another waiter (``Listener.give_back``)."""
    found = listener(node, key)
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def deliver(value: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(_resolve, future, value)

    waiter = Waiter(deliver, accepts)
    if found.register(key, waiter):
        try:
            await nudge(found)
        except BaseException:
            found.nudged = False
            found.unregister(key, waiter)
            raise
    try:
        await asyncio.wait_for(asyncio.shield(future), timeout)
    except asyncio.TimeoutError:
        pass
    except BaseException:
        found.give_back(key, waiter)
        raise
    value = found.unregister(key, waiter)
    return None if value is None else [key, value]


def _nudge(found: Listener, nudge: Callable[[Listener], Any]) -> None:
    try:
        nudge(found)
    except RedisUnavailable:
        found.nudged = False
        raise


def _resolve(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _after_fork() -> None:
    # The parent's listener threads do not exist in the child.
    global _listeners_lock
    _listeners.clear()
    _listeners_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
