"""The worker's steps (a fetch, a wait for work) run so that a failure never ends the
worker: Redis away (said once until it is back), or a bug, is logged and waited out with a
jittered backoff (up to ``BACKOFF_MAX``); a connection found closed under it is remade at
once, a few times in a row, before backing off."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import Any

import redis

from ...exceptions import RedisUnavailable

logger = logging.getLogger("django_redislock.queue.worker")  # the name users' LOGGING knows

BACKOFF_MAX = 5.0
# Connections found closed, one after the other (the waiter's, the channel's, the kept
# one: one CLIENT KILL closes them all), retried at once before backing off.
RECONNECT_AT_ONCE = 4


def closed_under_us(exc: BaseException) -> bool:
    """Redis unreachable because a connection that was open got closed, not because a new
    one could not be made (nor because Redis is loading its data)."""
    cause = exc.__cause__
    return (
        isinstance(exc, RedisUnavailable)
        and isinstance(cause, (redis.ConnectionError, OSError))
        and not isinstance(cause, redis.BusyLoadingError)
        and "connecting to" not in str(cause)
    )


class Retrying:
    """Runs steps, backing off after failures until ``stopping`` is set."""

    def __init__(self, stopping: threading.Event) -> None:
        self.stopping = stopping
        self.backoff = 0.1
        self.reconnects = 0  # failures in a row retried at once (connections found closed)
        self.said = ""  # the last warning while Redis is away: said once, not each retry

    def attempt(self, step: Callable[..., Any], *args: Any) -> Any:
        """``step(*args)``, or False after waiting out a backoff when it failed."""
        try:
            found = step(*args)
            self.backoff = 0.1
            self.reconnects = 0
            if self.said:
                self.said = ""
                logger.info("Redis is reachable again.")
            return found
        except Exception as exc:
            if closed_under_us(exc) and self.reconnects < RECONNECT_AT_ONCE:
                # A connection that worked was closed (CLIENT KILL, a proxy, a restart):
                # not a reason to wait; if Redis is really away, connecting fails next.
                self.reconnects += 1
                logger.info("%s; reconnecting.", exc)
                return False
            if isinstance(exc, RedisUnavailable):
                # Once until Redis is back (or the reason changes); each retry at DEBUG.
                level = logging.DEBUG if str(exc) == self.said else logging.WARNING
                self.said = str(exc)
                logger.log(level, "%s; retrying in %.1fs.", exc, self.backoff)
            else:
                logger.exception("Fetching jobs failed; retry in %.1fs.", self.backoff)
            self.stopping.wait(self.backoff * random.uniform(0.5, 1))
            self.backoff = min(self.backoff * 2, BACKOFF_MAX)
            return False
