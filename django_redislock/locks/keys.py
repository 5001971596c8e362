"""The Redis key layout of a lock and its shard, and the codec of a lock's value (its name
follows ``names.validate_name``). Nothing else in the package builds a lock's key or reads
its value.

Key layout of one lock (``base`` = ``<prefix>:{L<shard>}:``, so every key of a lock, its
shard's indexes included, shares one hash tag and every script runs on Redis Cluster):

    base l:<name>    string  the lock: "<token>|<acquired ms>|<fence>|<pid>|<host>", PX TTL
    base q:<name>    zset    waiters: token -> arrival number (FIFO)
    base a:<name>    hash    waiters' registrations: token -> "<deadline ms>|<ttl ms>|
                             <fencing 0/1>|<pid>|<host>"; a waiter whose deadline (server
                             clock) passed is dead, and dropped when met. The hash expires
                             no sooner than its latest deadline.
    base f:<name>    string  the last fence handed out (expires a minute after it)
    base h:<name>    list    the waiters' wake-ups: the script that hands the lock to a waiter
                             pushes "<token><fence>|<hops>" there itself; every waiter blocks
                             on it (Redis serves them in arrival order) and one popping
                             another's wake-up passes it on (``scripts``). It holds at most the
                             wake-up of the current hand-off and expires with it``
    base index       zset    lock name -> expiry (epoch ms), for listing without KEYS/SCAN;
                             an entry whose lock ended unreleased leaves it with the next
                             acquire on the shard or the next listing, once stale
    base names       zset    lock name -> 0, so ordered by name: prefix search by lex range
    base names:swept string  the expiry up to which ended locks left ``names`` (``scripts.SWEEP``)
"""

from __future__ import annotations

import os
import socket
import zlib
from typing import Any, NamedTuple

from ..conf import conf

# Index entries whose expiry passed this long ago are deleted (by an acquire, up to
# ``PRUNE_BATCH`` at a time, and by the listing). The margin keeps an entry whose writer's
# clock ran a little behind until its lock has surely expired.
STALE_MARGIN_MS = 60_000
PRUNE_BATCH = 16


def shard_count(client: Any) -> int:
    """How many shards (hash tags) locks are spread over: ``LOCK_SHARDS`` on Cluster, so
    that they can use that many masters; one elsewhere."""
    from ..redis.clients import is_cluster

    return conf.LOCK_SHARDS if is_cluster(client) else 1


def shard_base(shard: int) -> str:
    return f"{conf.KEY_PREFIX}:{{L{shard}}}:"


def lock_base(name: str, shards: int) -> str:
    shard = zlib.crc32(name.encode()) % shards if shards > 1 else 0
    return shard_base(shard)


class ShardKeys(NamedTuple):
    """A shard's indexes: its locks by expiry, by name, and how far ended locks were swept
    from the names."""

    expiries: str
    names: str
    swept: str


class LockKeys(NamedTuple):
    """A lock's keys, with its shard's indexes, and which of them each script takes."""

    lock: str
    waiters: str
    expiries: str
    fence: str
    names: str
    registrations: str
    wake: str
    base: str

    @property
    def acquiring(self) -> tuple[str, ...]:
        return (*self[:7], f"{self.lock}:corrupt")

    @property
    def releasing(self) -> tuple[str, ...]:
        return self[:7]

    @property
    def extending(self) -> tuple[str, str, str]:
        return self.lock, self.expiries, self.names

    @property
    def giving_up(self) -> tuple[str, ...]:
        return self.lock, self.waiters, self.registrations, self.wake


def index_keys(base: str) -> ShardKeys:
    return ShardKeys(f"{base}index", f"{base}names", f"{base}names:swept")


def lock_keys(base: str, name: str) -> LockKeys:
    shard = index_keys(base)
    return LockKeys(
        f"{base}l:{name}",
        f"{base}q:{name}",
        shard.expiries,
        f"{base}f:{name}",
        shard.names,
        f"{base}a:{name}",
        f"{base}h:{name}",
        base,
    )


class LockValue(NamedTuple):
    """A lock's value, ``<token>|<acquired ms>|<fence>|<pid>|<host>`` (written by the scripts;
    ``token`` keeps its trailing ``|``, as the scripts take it)."""

    token: str
    acquired_ms: int
    fence: int
    pid: int
    host: str


def text(value: Any) -> str:
    """A reply (a lock value, a name) as str."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def parse_value(value: Any) -> LockValue | None:
    """The lock value ``value`` (bytes or str), or None when it is missing or not ours."""
    if value is None:
        return None
    try:
        token, acquired_ms, fence, pid, host = text(value).split("|", 4)
        return LockValue(f"{token}|", int(acquired_ms), int(fence), int(pid), host)
    except ValueError:
        return None


class WakeUp(NamedTuple):
    """A wake-up popped from a lock's ``h:`` list: the hand-off to ``token`` with ``fence``."""

    token: str
    fence: int


def parse_wake_up(value: Any) -> WakeUp | None:
    """The wake-up ``value`` ("<token><fence>|<hops>", written by the scripts), or None."""
    token, _, rest = text(value).partition("|")
    fence = rest.partition("|")[0]
    return WakeUp(f"{token}|", int(fence)) if fence.isdigit() else None


def fence_for(mine: bytes, value: Any) -> int | None:
    """The fence of wake-up ``value`` when it is addressed to the waiter whose token is
    ``mine`` (encoded), else None. (``parse_wake_up`` and a comparison would do; this runs
    on the waiter's path right after its wake-up, where every step costs.)"""
    if type(value) is not bytes:
        value = str(value).encode()
    if not value.startswith(mine):
        return None
    fence = value[len(mine) :].partition(b"|")[0]
    return int(fence) if fence.isdigit() else None


def held_by(value: Any, token: str) -> bool:
    """Whether lock value ``value`` is held by ``token``."""
    parsed = parse_value(value)
    return parsed is not None and parsed.token == token


def _owner_ident() -> str:
    return f"{os.getpid()}|{socket.gethostname()}"


OWNER = _owner_ident()
PID = os.getpid()


def _after_fork() -> None:
    global OWNER, PID
    OWNER = _owner_ident()
    PID = os.getpid()


os.register_at_fork(after_in_child=_after_fork)
