"""What the sync and asyncio semaphores share: options, key layout, the reading of script
replies, and the lock machinery they reuse (holds, signals, waiting, the renewer)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from secrets import token_hex
from typing import Any, NamedTuple

from redis.exceptions import RedisError

from ..exceptions import LockError, RedisUnavailable
from ..locks import keys as _keys
from ..locks.base import Hold, LockBase
from ..locks.keys import lock_base, shard_count
from ..redis.clients import run_script
from ..redis.scripts import LuaScript
from .keys import (
    Permit,
    SemaphoreKeys,
    parse_permit,
    permit_of,
    semaphore_keys,
    token_of,
    validate_limit,
    validate_permits,
)
from .scripts import EXTEND, RELEASE, WAKE

logger = logging.getLogger("django_redislock.locks")


class SemaphoreState(NamedTuple):
    """A semaphore as Redis sees it now."""

    held: int  # live permits (a holder of n counts n)
    waiters: int  # waiters queued (some may have given up unnoticed)
    mine_ms: int  # ms left on the asking owner's permit, -1 when it holds none
    permits: list[Permit]  # the live holders when asked for, soonest to expire first

    @property
    def limit(self) -> int | None:
        """The limit the latest holder acquired with, None when nobody holds a permit."""
        return max(self.permits, key=lambda p: p.expires_ms).limit if self.permits else None


def parse_state(reply: Any) -> SemaphoreState:
    held, waiters, mine = (int(v) for v in reply[:3])
    permits = [parse_permit(reply[i], reply[i + 1]) for i in range(3, len(reply) - 1, 2)]
    return SemaphoreState(held, waiters, mine, [p for p in permits if p])


class SemaphoreBase(LockBase):
    """Options, key layout and owner state shared by ``Semaphore`` and ``AsyncSemaphore``."""

    noun = "semaphore"
    lost_reason = "its permit's TTL ran out or it was force-released"

    def __init__(
        self,
        name: str,
        *,
        limit: int,
        ttl: float | None = None,
        timeout: float | None = None,
        auto_renew: bool = False,
        fair: bool = False,
        fencing: bool = False,
        permits: int = 1,
        using: str | None = None,
    ) -> None:
        self.limit = validate_limit(limit)
        self.permits = validate_permits(permits, self.limit)
        super().__init__(
            name,
            ttl=ttl,
            timeout=timeout,
            auto_renew=auto_renew,
            fair=fair,
            fencing=fencing,
            using=using,
        )

    def __repr__(self) -> str:
        permits = f" permits={self.permits}" if self.permits > 1 else ""
        return (
            f"<{type(self).__name__} {self.name!r} limit={self.limit}{permits} ttl={self.lock_ttl}>"
        )

    def _new_token(self) -> str:
        """A fresh token for an acquire of this semaphore's ``permits``."""
        return token_of(token_hex(8), self.permits)

    def _would_wait(self, held: int) -> bool:
        return held + self.permits > self.limit

    def _setup(self, client: Any) -> None:
        self._base = lock_base(self.name, shard_count(client))
        self._layout = semaphore_keys(self._base, self.name)
        self._client = client

    @property
    def layout(self) -> SemaphoreKeys:
        """This semaphore's keys."""
        if self._client is None:
            self._setup(self._connect())
        return self._layout

    def _wake_key(self, token: str) -> str:
        return self._layout.wake(token)

    def _wake_up_fence(self, token: str, value: Any) -> int | None:
        return int(value)  # a waiter's own list: the fence

    def _wake_failed(self, exc: Exception) -> None:
        logger.warning(
            "Could not wake a waiter semaphore %r handed permits to (%s); it finds them at its "
            "next re-check.",
            self.name,
            exc,
        )

    def _acquire_argv(self, token: str, register: bool, queued: bool) -> tuple[Any, ...]:
        """ARGV of ``scripts.ACQUIRE``."""
        return (
            token,
            f"{self.limit}|{_keys.OWNER}",
            self.ttl_ms,
            self.name,
            self.limit,
            *self._flags,
            self.registration_ms if register else 0,
            "1" if queued else "0",
        )

    def _permit(self, token: str, fence: int) -> str:
        return permit_of(token, fence, self.limit, _keys.OWNER)

    def _release_args(self, permit: str) -> tuple[Any, ...]:
        return permit, self.name, self.limit if permit else "", self._flags[0]

    @staticmethod
    def _outcome(reply: Any) -> Any:
        """What the waiting loop takes from an ACQUIRE reply: the fence, or [wait ms]."""
        return reply[0] if reply[0] >= 0 else reply[1:2]

    def _woken(self, reply: Any, head: int) -> list[tuple[tuple[str], tuple[Any, Any]]]:
        """The WAKE calls owed for the hand-offs after the first ``head`` items of ``reply``."""
        return self._layout.wakings(reply[head:]) if len(reply) > head else []

    def _call(
        self, client: Any, script: LuaScript, keys: Sequence[str], args: Any, head: int
    ) -> Any:
        """Run ``script`` over the sync ``client``, then wake every waiter it handed a permit
        to (listed after the first ``head`` items of its reply). Returns the reply."""
        reply = run_script(client, script, keys, args)
        for wake in self._woken(reply, head):
            try:
                run_script(client, WAKE, *wake)
            except (RedisError, RedisUnavailable) as exc:
                self._wake_failed(exc)
        return reply

    def _release_token(self, client: Any, permit: str) -> Any:
        """Free ``permit`` ("": every permit) over the sync ``client``."""
        return self._call(client, RELEASE, self.layout.releasing, self._release_args(permit), 1)

    def _release_handed(self, client: Any, token: str, fence: int) -> None:
        self._release_token(client, self._permit(token, fence))

    def _reenter(self, owner: tuple[Any, ...], hold: Hold) -> bool:
        raise LockError(
            f"This owner already holds a permit of semaphore {self.name!r}; release it first "
            "(a thread or task holds one permit per Semaphore object).",
            self.name,
        )

    def _extend_args(self, hold: Hold, ttl: float | None) -> tuple[Any, ...]:
        return hold.token, self._ttl_ms_of(ttl), self.name

    def _extended(self, hold: Hold, reply: Any) -> None:
        if not reply:
            if not hold.lost:
                self.lost(hold, "extend")
            raise self._not_owned("extend")

    def renewal(self, hold: Hold, now: int) -> tuple[Any, ...]:
        keys = self.layout.extending
        return ("EVAL", EXTEND.source, len(keys), *keys, *self._extend_args(hold, None))

    def _forced(self, reply: Any) -> bool:
        if reply[0] != 1:
            return False
        logger.warning("Semaphore %r was force-released.", self.name)
        return True

    def release_owner(self, owner: tuple[Any, ...]) -> None:
        """Release the permit of ``owner`` over the sync client, from any thread (see
        ``LockBase.release_owner``)."""
        hold = self._begin_release(owner)
        if hold is not None:
            self._end_release(hold, self._release_token(self.renew_client, hold.token)[0])
