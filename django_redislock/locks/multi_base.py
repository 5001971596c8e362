"""What ``MultiLock`` and ``AsyncMultiLock`` share: the names and their locks, the shards they
fall on, the scripts' arguments and replies, owner state and errors. The two classes only
add the I/O.

A multi-lock is one ordinary lock per name (so ``Lock``, the renewer and the admin see each
name as any other), kept in lock order: sorted by name, the one order every process agrees
on. Taking the names is deadlock-free because nobody waits for a name while holding a later
one: the one-script path takes every name of a shard at once or none (it never waits while
holding), and the ordered path takes them one by one in lock order, waiting for each.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from itertools import chain
from secrets import token_hex
from typing import Any, ClassVar, NamedTuple

from ..exceptions import LockError, LockNotOwned, LockTimeout
from ..names import validate_name, validate_seconds
from ..signals import lock_busy
from . import keys as lock_keys
from .base import Hold, LockBase
from .options import now_ms

logger = logging.getLogger("django_redislock.locks")

# The most names one MultiLock takes: its scripts hand Redis a few values per name at once,
# and Lua takes some thousands at most.
MAX_NAMES = 1000


class Shard(NamedTuple):
    """Locks of one shard, in lock order, with the KEYS each multi-lock script takes."""

    locks: tuple[Any, ...]
    names: tuple[str, ...]
    acquiring: tuple[str, ...]
    releasing: tuple[str, ...]


def shards_of(locks: Iterable[LockBase]) -> list[Shard]:
    """``locks`` grouped by the shard their keys are on, in lock order."""
    grouped: dict[str, list[LockBase]] = {}
    for lock in locks:
        grouped.setdefault(lock.base, []).append(lock)
    return [
        Shard(
            tuple(group),
            tuple(lock.name for lock in group),
            tuple(chain.from_iterable(lock.keys.acquiring for lock in group)),
            tuple(chain.from_iterable(lock.keys.releasing for lock in group)),
        )
        for group in grouped.values()
    ]


def validate_names(names: Any) -> tuple[str, ...]:
    """``names`` as a tuple in lock order, or a TypeError/ValueError saying what is wrong."""
    if isinstance(names, (str, bytes)):
        raise TypeError(
            f"names must be a list of lock names, not a single {type(names).__name__} "
            f"({names!r}); for one name, use Lock."
        )
    try:
        given = list(names)
    except TypeError:
        raise TypeError(
            f"names must be a list of lock names, not {type(names).__name__}."
        ) from None
    if not given:
        raise ValueError("names must not be empty: a MultiLock needs at least one name.")
    if len(given) > MAX_NAMES:
        raise ValueError(f"names lists {len(given)} names; a MultiLock takes {MAX_NAMES} at most.")
    seen: set[str] = set()
    for name in given:
        if validate_name(name) in seen:
            raise ValueError(f"names lists {name!r} more than once; give each name once.")
        seen.add(name)
    return tuple(sorted(given))


def new_token() -> str:
    return f"{token_hex(8)}|"


class MultiLockBase:
    """Options, locks and owner state shared by ``MultiLock`` and ``AsyncMultiLock``."""

    # The lock class of each name (``Lock`` or ``AsyncLock``).
    _lock_class: ClassVar[type[Any]]

    def __init__(
        self,
        names: Iterable[str],
        *,
        ttl: float | None = None,
        timeout: float | None = None,
        auto_renew: bool = False,
        fair: bool = False,
        fencing: bool = False,
        using: str | None = None,
    ) -> None:
        ordered = validate_names(names)
        options = {"ttl": ttl, "timeout": timeout, "auto_renew": auto_renew, "fair": fair}
        self._locks: tuple[Any, ...] = tuple(
            self._lock_class(name, **options, fencing=fencing, using=using) for name in ordered
        )
        lead = self._locks[0]
        self.timeout: float = lead.timeout
        self.fencing = lead.fencing
        self._flags = ("1" if lead.fair else "0", "1" if lead.fencing else "0")
        # Owners (as ``current_owner()`` gives them) that took every name and have not
        # released them yet.
        self._owners: set[tuple[Any, ...]] = set()
        self._shards: list[Shard] | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {list(self.names)!r} ttl={self._locks[0].lock_ttl}>"

    @property
    def names(self) -> tuple[str, ...]:
        """The names, in lock order (sorted): the order the ordered path takes them in."""
        return tuple(lock.name for lock in self._locks)

    @property
    def fences(self) -> dict[str, int] | None:
        """Each name's fencing token (strictly increasing per name) while this owner holds
        them, when ``fencing=True``; else None."""
        if not self.fencing or self._locks[0].current_owner() not in self._owners:
            return None
        fences = {lock.name: lock.fence for lock in self._locks}
        return None if None in fences.values() else fences

    def _layout(self) -> list[Shard]:
        """The shards of every name (known once the locks have their client)."""
        if self._shards is None:
            self._shards = shards_of(self._locks)
        return self._shards

    def _validate_timeout(self, timeout: float | None) -> float:
        if timeout is None:
            return self.timeout
        return validate_seconds(timeout, "timeout", allow_zero=True, allow_inf=True)

    def _validate_ttl(self, ttl: float | None) -> None:
        if ttl is not None:
            validate_seconds(ttl, "ttl", allow_zero=False, allow_inf=False)

    def _acquire_args(self, token: str, shard: Shard) -> tuple[Any, ...]:
        """ARGV of ``MULTI_ACQUIRE``."""
        now = now_ms()
        return (
            token,
            lock_keys.OWNER,
            self._locks[0].ttl_ms,
            now,
            *self._flags,
            now - lock_keys.STALE_MARGIN_MS,
            lock_keys.PRUNE_BATCH,
            *shard.names,
        )

    @staticmethod
    def _release_args(shard: Shard, tokens: Sequence[str]) -> list[Any]:
        """ARGV of ``MULTI_RELEASE``: each name of ``shard`` with its token in ``tokens``."""
        args: list[Any] = [now_ms()]
        for token, name in zip(tokens, shard.names, strict=True):
            args += (token, name)
        return args

    def _adopt(self, owner: tuple[Any, ...], token: str, fences: Sequence[int], by: Any) -> None:
        """Every lock holds its name for ``owner``, as the one script took them (``by``: the
        thread or task the renewer keeps them for). If that fails half-way, the locks that
        took on their hold forget it, and the caller frees the names in Redis."""
        locks, adopted = self._locks, 0
        try:
            for lock in locks:
                lock.adopt(owner, token, fences[adopted], by)
                adopted += 1
        except BaseException:
            for lock in locks[:adopted]:
                lock.begin_release(owner)
            raise
        self._owners.add(owner)

    def _begin_release(
        self, owner: tuple[Any, ...], locks: Sequence[Any]
    ) -> tuple[list[Shard], dict[str, Hold]]:
        """Forget ``owner``'s holds of ``locks``: the shards to free them on, and each name's
        hold."""
        holds: dict[str, Hold] = {}
        for lock in locks:
            hold = lock.begin_release(owner)
            if hold is not None:  # (never None: a multi-lock's locks are not reentrant)
                holds[lock.name] = hold
        if len(holds) == len(self._locks):
            return self._layout(), holds
        return shards_of(lock for lock in locks if lock.name in holds), holds

    @staticmethod
    def _end_release(shard: Shard, holds: dict[str, Hold], codes: Sequence[Any]) -> list[str]:
        """Settle each lock of ``shard`` with its code from ``MULTI_RELEASE``; the names that
        turned out lost."""
        lost = []
        for lock, code in zip(shard.locks, codes, strict=True):
            try:
                lock.end_release(holds[lock.name], code)
            except LockNotOwned:
                lost.append(lock.name)
        return lost

    def _busy(self, position: int, timeout: float) -> None:
        """``lock_busy`` for the name the one script found busy (``position``, from 1), as a
        ``Lock`` of that name sends it. (On the ordered path, that lock sends it itself.)"""
        if lock_busy.receivers:
            lock = self._locks[position - 1]
            lock_busy.send(type(lock), lock=lock, name=lock.name, timeout=timeout)

    @staticmethod
    def _tokens(shard: Shard, holds: dict[str, Hold]) -> list[str]:
        return [holds[name].token for name in shard.names]

    def _already_held(self) -> LockError:
        return LockError(
            f"MultiLock {list(self.names)!r} is already held by this owner; release it first.",
            ", ".join(self.names),
        )

    def _timeout_error(self, timeout: float) -> LockTimeout:
        return LockTimeout(
            f"MultiLock {list(self.names)!r} was not acquired within {timeout}s.",
            ", ".join(self.names),
        )

    def _not_owned(self, action: str, lost: Sequence[str] | None = None) -> LockNotOwned:
        if lost is None:
            return LockNotOwned(
                f"Cannot {action} MultiLock {list(self.names)!r}: this owner does not hold it.",
                ", ".join(self.names),
            )
        done = "the others were released" if action == "release" else "the others were extended"
        return LockNotOwned(
            f"Cannot {action} MultiLock {list(self.names)!r} whole: this owner no longer holds "
            f"{list(lost)!r} (TTL ran out or force-released); {done}.",
            ", ".join(lost),
        )

    @staticmethod
    def _log_clean_up_failure(names: Sequence[str]) -> None:
        logger.warning(
            "Could not free locks %r of an abandoned MultiLock acquire; they end within their TTL.",
            list(names),
        )
