"""Waiting for a job to end: ``join`` and ``ajoin``, mixed into ``Queue``.

A waiter counts itself in the job's hash (JOIN), so that the job's end leaves a wake-up for
it in the outbox, which the worker that ended it delivers to the job's join list at once;
the waiter blocks on that list (``wait_for_push``: no connection held when many wait) and
looks again every ``JOIN_RECHECK`` seconds, in case a wake-up was lost.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from typing import Any

from ..exceptions import JobNotFound
from ..redis.aio import get_async_redis
from ..redis.aio import run_script as aio_run_script
from ..redis.aio import wait_for_push as aio_wait_for_push
from ..redis.clients import wait_for_push
from ..redis.scripts import LuaScript
from .depend_scripts import JOIN
from .jobs import Job, JobState
from .keys import QueueKeys
from .replies import text

JOIN_RECHECK = 2.0  # seconds: a join looks again this often, if no wake-up came
_ENDED = (JobState.DONE.letter, JobState.DEAD.letter)


class Joining:
    name: str
    client: Any
    using: str | None
    keys: QueueKeys

    def run(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        raise NotImplementedError

    def join(self, job_id: str, timeout: float | None = None) -> Job:
        """Wait until job ``job_id`` ends (done or dead) and return it as it ended; woken by
        its end (no polling). ``TimeoutError`` after ``timeout`` seconds (None: no limit);
        ``JobNotFound`` if there is no such job (``cancel`` deletes a job that had not
        started: its waiters get JobNotFound too)."""
        deadline = _deadline(timeout)
        keys = self._join_keys(job_id)
        state = text(self.run(JOIN, keys, ("1",)))
        try:
            while state not in _ENDED:
                wait = self._wait(job_id, state, deadline, timeout)
                wait_for_push(self.client, self.keys.end(job_id), wait)
                state = text(self.run(JOIN, keys, ("0",)))
        finally:
            if state and state not in _ENDED:
                self.run(JOIN, keys, ("-1",))
        return self.get(job_id)  # type: ignore[attr-defined,no-any-return]

    async def ajoin(self, job_id: str, timeout: float | None = None) -> Job:
        """``join`` for asyncio: the event loop is free while it waits."""
        deadline = _deadline(timeout)
        keys = (*self.keys.fixed, *self._join_keys(job_id))
        aclient = get_async_redis(self.using)
        state = text(await aio_run_script(aclient, JOIN, keys, ("1",)))
        try:
            while state not in _ENDED:
                wait = self._wait(job_id, state, deadline, timeout)
                await aio_wait_for_push(aclient, self.client, self.keys.end(job_id), wait)
                state = text(await aio_run_script(aclient, JOIN, keys, ("0",)))
        finally:
            if state and state not in _ENDED:
                await asyncio.shield(aio_run_script(aclient, JOIN, keys, ("-1",)))
        return await asyncio.to_thread(self.get, job_id)  # type: ignore[attr-defined]

    def _join_keys(self, job_id: str) -> list[str]:
        if not isinstance(job_id, str):
            raise TypeError(f"job_id must be a str, not {type(job_id).__name__}.")
        return [self.keys.job(job_id), self.keys.result(job_id)]

    def _wait(self, job_id: str, state: str, deadline: float, timeout: float | None) -> float:
        """How long to wait for a wake-up of a job found in ``state`` (not ended); raises
        JobNotFound (no such job) or TimeoutError (``deadline`` passed)."""
        if not state:
            raise JobNotFound(f"No job {job_id!r} in queue {self.name!r}.")
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"Job {job_id!r} did not end within {timeout} s.")
        return min(left, JOIN_RECHECK)


def _deadline(timeout: float | None) -> float:
    if timeout is None:
        return math.inf
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout != timeout:
        raise TypeError(f"timeout must be a number of seconds or None, not {timeout!r}.")
    return time.monotonic() + max(0.0, timeout)
