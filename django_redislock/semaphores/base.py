"""What the sync and asyncio semaphores share: options, key layout, the reading of script
replies, and the lock machinery they reuse (``locks.shared_lock_base``: holds, signals,
waiting, the renewer)."""

from __future__ import annotations

from secrets import token_hex
from typing import Any, NamedTuple

from ..exceptions import LockError
from ..locks import keys as _keys
from ..locks.base import Hold
from ..locks.keys import lock_base, shard_count
from ..locks.shared_lock_base import SharedLockBase, SharedLockScripts
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
from .scripts import ACQUIRE, EXTEND, GIVE_UP, RELEASE, STATE


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


class SemaphoreBase(SharedLockBase[SemaphoreKeys]):
    """Options, key layout and owner state shared by ``Semaphore`` and ``AsyncSemaphore``."""

    noun = "semaphore"
    _family = "semaphore"
    lost_reason = "its permit's TTL ran out or it was force-released"
    _scripts = SharedLockScripts(ACQUIRE, EXTEND, GIVE_UP, RELEASE, STATE)

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

    def _holder_argv(self) -> tuple[Any, ...]:
        return f"{self.limit}|{_keys.OWNER}", self.ttl_ms, self.name, self.limit

    def _held_token(self, token: str, fence: int) -> str:
        return permit_of(token, fence, self.limit, _keys.OWNER)

    def _release_args(self, permit: str) -> tuple[Any, ...]:
        return permit, self.name, self.limit if permit else "", self._flags[0]

    def _reenter(self, owner: tuple[Any, ...], hold: Hold) -> bool:
        raise LockError(
            f"This owner already holds a permit of semaphore {self.name!r}; release it first "
            "(a thread or task holds one permit per Semaphore object).",
            self.name,
        )

    def _extend_args(self, hold: Hold, ttl: float | None) -> tuple[Any, ...]:
        return hold.token, self._ttl_ms_of(ttl), self.name
