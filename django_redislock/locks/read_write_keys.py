"""The Redis key layout of a read-write lock and the codec of its holders and wake-ups.
Nothing else in the package builds these keys or reads these values.

A read-write lock lives in its lock shard (``base`` = ``<prefix>:{L<shard>}:``, see
``keys``), so every key of it, the shard's indexes included, shares one hash tag and every
script runs on Redis Cluster:

    base rww:<name>  string  the writer: "<token>|<acquired ms>|<fence>|<pid>|<host>" (a lock
                             value, read with ``keys.parse_value``), PX TTL; its token is
                             "w<hex>|"
    base rwr:<name>  zset    the readers: "<token>0|<pid>|<host>" -> expiry (epoch ms, server
                             clock); a reader's token is "r<hex>|". A reader whose expiry
                             passed is dropped by the next script that meets it; the key
                             expires no sooner than its latest reader.
    base rwq:<name>  zset    waiters, readers and writers alike: token -> arrival number
    base rwv:<name>  zset    the writers among them (token -> arrival number): "a writer
                             waits" is one look here, not a walk through the readers queued
    base rwa:<name>  hash    waiters' registrations, as a lock's ``a:`` ("<deadline ms>|<ttl
                             ms>|<fencing 0/1>|<pid>|<host>"); a waiter whose deadline passed
                             is dead, and dropped when met
    base rwh:<name>  list    wake-ups: the script that admits waiters pushes one
                             "<holder>|<hops>" per waiter it admitted (``<holder>`` starts
                             with "<token><fence>|"); every waiter blocks on it, and one
                             popping another's passes it on. It expires no sooner than the
                             holds it announces.
    base rwf:<name>  string  the last fence handed to a writer (fencing=True), kept a minute
    base rww:<name>:corrupt, base rwr:<name>:corrupt
                             where a writer or readers key of another type is set aside
                             (kept a day)
    base index, base names   the shard's lock indexes (``keys``), under the member
                             "<name> rw" (``index_member``): a name never holds a space, so
                             a read-write lock and a plain lock of the same name keep apart,
                             and a prefix search finds both. The entry's score is the latest
                             expiry of its holders; it leaves when the last holder does.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .keys import LockValue, parse_value, text

# Marks a read-write lock's entry in the shard's lock indexes (see above).
INDEX_SUFFIX = " rw"

READ = "r"
WRITE = "w"


def index_member(name: str) -> str:
    return f"{name}{INDEX_SUFFIX}"


def name_of_member(member: str) -> str | None:
    """The read-write lock name an index member stands for, None for a plain lock's."""
    return member[: -len(INDEX_SUFFIX)] if member.endswith(INDEX_SUFFIX) else None


class ReadWriteKeys(NamedTuple):
    """A read-write lock's keys, with its shard's indexes, in the order every script takes
    them (``ACQUIRE`` adds the two set-aside keys)."""

    writer: str
    readers: str
    waiters: str
    writers_waiting: str
    registrations: str
    wake: str
    fence: str
    expiries: str
    names: str

    @property
    def acquiring(self) -> tuple[str, ...]:
        return (*self, f"{self.writer}:corrupt", f"{self.readers}:corrupt")

    @property
    def extending(self) -> tuple[str, ...]:
        return self.writer, self.readers, self.expiries, self.names

    @property
    def giving_up(self) -> tuple[str, ...]:
        return tuple(self)

    @property
    def releasing(self) -> tuple[str, ...]:
        return tuple(self)

    @property
    def reading(self) -> tuple[str, ...]:
        return self.writer, self.readers, self.waiters


def read_write_keys(base: str, name: str) -> ReadWriteKeys:
    return ReadWriteKeys(
        f"{base}rww:{name}",
        f"{base}rwr:{name}",
        f"{base}rwq:{name}",
        f"{base}rwv:{name}",
        f"{base}rwa:{name}",
        f"{base}rwh:{name}",
        f"{base}rwf:{name}",
        f"{base}index",
        f"{base}names",
    )


def token_of(kind: str, hex_id: str) -> str:
    """The token of a reader (``READ``) or writer (``WRITE``) acquire."""
    return f"{kind}{hex_id}|"


def holder_of(token: str, fence: int, owner: str) -> str:
    """What a hold is known by in Redis: a reader's member of the readers zset, or a
    writer's token (``owner`` is "<pid>|<host>")."""
    return f"{token}0|{owner}" if token[0] == READ else token


class ReadWriteState(NamedTuple):
    """A read-write lock as Redis sees it now (``STATE``)."""

    readers: int  # live readers
    writer: LockValue | None  # the writer, None when no writer holds it
    writer_ms: int  # ms left on the writer, -1 when none
    waiters: int  # waiters queued (some may have given up unnoticed)
    mine_ms: int  # ms left on the asking holder's hold, -1 when it holds none


def parse_state(reply: Any) -> ReadWriteState:
    readers, writer_ms, waiters, mine = (int(v) for v in reply[:4])
    writer = parse_value(reply[4]) if len(reply) > 4 and reply[4] else None
    if writer is None and writer_ms >= 0:  # a writer value that is not ours
        writer = LockValue("", 0, 0, 0, f"(unreadable writer value: {text(reply[4])[:80]})")
    return ReadWriteState(readers, writer, writer_ms, waiters, mine)
