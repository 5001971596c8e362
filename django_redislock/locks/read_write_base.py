"""What the sync and asyncio read-write locks share: the options and their two sides, and
each side's key layout, script arguments, replies and owner state.

A side (``rw.read()`` or ``rw.write()``) is a lock of its own to the rest of the package:
it waits as ``Lock`` does (``waiting``), its holds are kept alive by the renewer
(``renewer``) and it reports what ``Lock`` reports (signals, errors).

Not reentrant: a thread (or asyncio task) holds at most one side of a read-write lock at a
time. A second acquire of either side of the same name (through any instance) while it
holds one raises LockError at once: read then write would wait for itself until its
timeout (forever with ``math.inf``), and write then read too; the caller releases first."""

from __future__ import annotations

import logging
import threading
from secrets import token_hex
from typing import Any

from ..exceptions import LockError
from . import keys as _keys
from .base import Hold
from .keys import lock_base, shard_count
from .read_write_keys import (
    READ,
    WRITE,
    ReadWriteKeys,
    holder_of,
    index_member,
    read_write_keys,
    token_of,
)
from .read_write_scripts import ACQUIRE, EXTEND, GIVE_UP, RELEASE, STATE
from .shared_lock_base import SharedLockBase, SharedLockScripts

logger = logging.getLogger("django_redislock.locks")

# The holds of every read-write lock side in this process: (process, thread or task,
# connection, name) -> (side kind, hold, the thread that took it), so that any instance sees
# what its owner holds. (A thread's id is reused once it ended: a hold that a thread left
# behind does not count against the next thread of that id.)
_holds_by_name: dict[tuple[Any, ...], tuple[str, Hold, threading.Thread]] = {}

SIDE_WORDS = {READ: "read", WRITE: "write"}


class SideBase(SharedLockBase[ReadWriteKeys]):
    """Options, key layout and owner state shared by the sync and asyncio sides."""

    _family = "read-write lock"
    _scripts = SharedLockScripts(ACQUIRE, EXTEND, GIVE_UP, RELEASE, STATE)

    def __init__(
        self,
        name: str,
        kind: str,
        *,
        ttl: float | None = None,
        timeout: float | None = None,
        fair: bool = False,
        fencing: bool = False,
        auto_renew: bool = False,
        using: str | None = None,
    ) -> None:
        if kind not in SIDE_WORDS:
            raise ValueError(f"kind must be {READ!r} or {WRITE!r}, not {kind!r}.")
        super().__init__(
            name,
            ttl=ttl,
            timeout=timeout,
            auto_renew=auto_renew,
            fair=fair,
            fencing=fencing,
            using=using,
        )
        self.kind = kind
        self.noun = f"{SIDE_WORDS[kind]} side of read-write lock"
        self.member = index_member(self.name)
        # Readers take no fence: the flag their waiters register with says so.
        self._flags = (self._flags[0], self._flags[1] if kind == WRITE else "0")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {SIDE_WORDS[self.kind]} {self.name!r} ttl={self.lock_ttl}>"

    def _setup(self, client: Any) -> None:
        self._layout = read_write_keys(lock_base(self.name, shard_count(client)), self.name)
        self._client = client

    def _new_token(self) -> str:
        return token_of(self.kind, token_hex(8))

    def _held_token(self, token: str, fence: int) -> str:
        return holder_of(token, fence, _keys.OWNER)

    def _holder_argv(self) -> tuple[Any, ...]:
        return _keys.OWNER, self.ttl_ms, self.member

    def _outcome(self, reply: Any) -> Any:
        if reply[2]:
            logger.warning(
                "Read-write lock %r: %d key(s) of another type were in the way and were set "
                "aside (a writer's or readers' key, renamed to its ':corrupt' key) or deleted "
                "(a waiters' key).",
                self.name,
                reply[2],
            )
        return super()._outcome(reply)

    def _give_up_argv(self, token: str, passing: str) -> tuple[Any, ...]:
        return token, _keys.OWNER, passing, self.member, self._flags[0]

    def _release_args(self, holder: str) -> tuple[Any, ...]:
        return holder, self.member, self._flags[0]

    def _extend_args(self, hold: Hold, ttl: float | None) -> tuple[Any, ...]:
        return hold.token, self._ttl_ms_of(ttl), self.member

    def _fences(self) -> bool:
        return self.fencing and self.kind == WRITE

    # --- one side per owner and name ---------------------------------------------------------

    def _by_name(self, owner: tuple[Any, ...]) -> tuple[Any, ...]:
        return (*owner, self.using, self.name)

    def _conflicting_hold(self, owner: tuple[Any, ...]) -> Hold | None:
        """The hold of this name that ``owner`` took through another side or instance, if it
        may still be held (see the module's doc). The caller asks Redis before it refuses:
        a hold that lapsed unnoticed does not count, and is forgotten here."""
        found = _holds_by_name.get(self._by_name(owner))
        if found is None or found[1].lost or found[2] is not threading.current_thread():
            return None
        return found[1]

    def _settle_conflict(self, owner: tuple[Any, ...], hold: Hold, live: bool) -> None:
        """LockError when ``hold`` (``_conflicting_hold``'s) is ``live``; else it is
        forgotten."""
        key = self._by_name(owner)
        found = _holds_by_name.get(key)
        if found is None or found[1] is not hold:
            return
        if live:
            raise self._second_side(found[0])
        del _holds_by_name[key]

    def _second_side(self, held: str) -> LockError:
        return LockError(
            f"This owner already holds the {SIDE_WORDS[held]} side of read-write lock "
            f"{self.name!r}; release it before acquiring the {SIDE_WORDS[self.kind]} side "
            "(read-write locks are not reentrant: waiting here would wait for itself).",
            self.name,
        )

    def _reenter(self, owner: tuple[Any, ...], hold: Hold) -> bool:
        raise self._second_side(self.kind)

    def _acquired(
        self, owner: tuple[Any, ...], token: str, fence: int, started: float | None = None
    ) -> Hold:
        hold = super()._acquired(owner, token, fence, started)
        _holds_by_name[self._by_name(owner)] = (self.kind, hold, threading.current_thread())
        return hold

    def _forget(self, owner: tuple[Any, ...]) -> None:
        hold = self._holds.get(owner)
        super()._forget(owner)
        key = self._by_name(owner)
        found = _holds_by_name.get(key)
        if found is not None and found[1] is hold:
            del _holds_by_name[key]


class ReadWriteBase:
    """The options of a read-write lock and its two sides (``side_class`` instances)."""

    side_class: type[SideBase]

    def __init__(
        self,
        name: str,
        *,
        ttl: float | None = None,
        timeout: float | None = None,
        fair: bool = False,
        fencing: bool = False,
        auto_renew: bool = False,
        using: str | None = None,
    ) -> None:
        self._read, self._write = (
            self.side_class(
                name,
                kind,
                ttl=ttl,
                timeout=timeout,
                fair=fair,
                fencing=fencing,
                auto_renew=auto_renew,
                using=using,
            )
            for kind in (READ, WRITE)
        )
        self.name = self._read.name
        self.lock_ttl = self._read.lock_ttl
        self.timeout = self._read.timeout
        self.fair, self.fencing, self.auto_renew = bool(fair), bool(fencing), bool(auto_renew)
        self.using = using

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ttl={self.lock_ttl}>"
