"""What the locks that several owners may hold at once share: semaphores (each holder has
permits) and the two sides of a read-write lock (readers together, or one writer).

Each hold is a token in the lock's own keys, taken, released, extended and read by a family
of five scripts (``SharedLockScripts``); a release hands what it frees to the waiters it
satisfies. The family keeps what differs (its key layout, script arguments, state and what
a second acquire by the same owner means) and inherits the rest from here, and the sync or
asyncio acquire, release and reads from ``shared_lock``."""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar

from ..redis.clients import run_script
from ..redis.scripts import LuaScript
from .base import Hold, LockBase

logger = logging.getLogger("django_redislock.locks")


class SharedLockScripts(NamedTuple):
    """The scripts of one kind of shared lock."""

    acquire: LuaScript
    extend: LuaScript
    give_up: LuaScript
    release: LuaScript
    state: LuaScript


class SharedLockKeys(Protocol):
    """The keys each script of a shared lock takes, in its order."""

    @property
    def wake(self) -> str: ...

    @property
    def acquiring(self) -> tuple[str, ...]: ...

    @property
    def extending(self) -> tuple[str, ...]: ...

    @property
    def giving_up(self) -> tuple[str, ...]: ...

    @property
    def releasing(self) -> tuple[str, ...]: ...

    @property
    def reading(self) -> tuple[str, ...]: ...


class SharedLockState(Protocol):
    """What the shared acquire and reads take from a ``STATE`` reply."""

    @property
    def mine_ms(self) -> int: ...  # ms left on the asking holder's hold, -1 when none


KeysT = TypeVar("KeysT", bound=SharedLockKeys)


class SharedLockBase(LockBase, Generic[KeysT]):
    """Options, key layout and owner state of a shared lock, sync or asyncio."""

    # Set by each kind: its scripts, and what log lines call it ("semaphore").
    _scripts: ClassVar[SharedLockScripts]
    _family: ClassVar[str]
    _layout: KeysT

    @property
    def layout(self) -> KeysT:
        """This lock's keys."""
        if self._client is None:
            self._setup(self._connect())
        return self._layout

    def _wake_key(self, token: str) -> str:
        return self._layout.wake

    def _new_token(self) -> str:
        """A fresh token for an acquire."""
        raise NotImplementedError

    def _held_token(self, token: str, fence: int) -> str:
        """What the hold that acquire ``token`` got (with ``fence``) is known by in Redis."""
        raise NotImplementedError

    def _acquire_argv(
        self, token: str, register: bool, queued: bool, passing: str = "", scale: float = 1.0
    ) -> tuple[Any, ...]:
        """ARGV of the ``acquire`` script; ``passing``: a wake-up of another waiter to pass
        on; ``scale``: as ``LockBase._args``'s."""
        register_ms = int(self.registration_ms * scale) if register else 0
        queue = "1" if queued else "0"
        return (token, *self._holder_argv(), *self._flags, register_ms, queue, passing)

    def _holder_argv(self) -> tuple[Any, ...]:
        """The ARGV of the ``acquire`` script between the token and the flags: who holds,
        for how long, of which lock."""
        raise NotImplementedError

    def _outcome(self, reply: Any) -> Any:
        """What the waiting loop takes from an ``acquire`` reply: the fence, or [wait ms]."""
        return reply[0] if reply[0] >= 0 else reply[1:2]

    def _give_up_argv(self, token: str, passing: str) -> tuple[Any, ...]:
        return token, passing

    def _extend_args(self, hold: Hold, ttl: float | None) -> tuple[Any, ...]:
        raise NotImplementedError

    def _fences(self) -> bool:
        """Whether this lock's holds carry a fencing token."""
        return self.fencing

    # --- a second hold of the same owner ------------------------------------------------------

    def _conflicting_hold(self, owner: tuple[Any, ...]) -> Hold | None:
        """Another hold of ``owner`` that an acquire must not wait behind (none here): the
        acquire asks Redis whether it is still held and passes the answer to
        ``_settle_conflict``."""
        return None

    def _settle_conflict(self, owner: tuple[Any, ...], hold: Hold, live: bool) -> None:
        """Refuse the acquire while ``hold`` (``_conflicting_hold``'s) is ``live``."""

    # --- releases and renewals over the sync client ----------------------------------------------

    def _release_token(self, client: Any, held: str) -> Any:
        """Free ``held`` ("": every holder) over the sync ``client``; the waiters it goes to
        are woken by the same call. (``_layout`` is set: ``client`` was asked for.)"""
        args = self._release_args(held)
        return run_script(client, self._scripts.release, self._layout.releasing, args)

    def _release_handed(self, client: Any, token: str, fence: int) -> None:
        self._release_token(client, self._held_token(token, fence))

    def release_owner(self, owner: tuple[Any, ...]) -> None:
        """Release the hold of ``owner`` over the sync client, from any thread (see
        ``LockBase.release_owner``)."""
        hold = self._begin_release(owner)
        if hold is not None:
            self._end_release(hold, self._release_token(self.renew_client, hold.token))

    def renewal(self, hold: Hold, now: int) -> tuple[Any, ...]:
        keys = self.layout.extending
        args = self._extend_args(hold, None)
        return ("EVAL", self._scripts.extend.source, len(keys), *keys, *args)

    def _forced(self, reply: Any) -> bool:
        if reply != 1:
            return False
        logger.warning("%s %r was force-released.", self._family.capitalize(), self.name)
        return True
