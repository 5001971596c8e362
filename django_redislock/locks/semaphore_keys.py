"""The Redis key layout of a semaphore and the codec of its permits. Nothing else in the
package builds a semaphore's key or reads a permit.

A semaphore lives in its lock shard (``base`` = ``<prefix>:{L<shard>}:``, see ``keys``), so
every key of it shares one hash tag and every script runs on Redis Cluster:

    base s:<name>    zset    permits: holder token -> expiry (epoch ms, server clock); a
                             permit whose expiry passed is reclaimed by the next script that
                             meets it. The key expires no sooner than its latest permit.
    base sv:<name>   hash    holder token -> "<acquired ms>|<fence>|<pid>|<host>", and
                             ``limit`` -> the limit of the latest acquire (for a force release
                             and the admin); expires with ``s:``.
    base sq:<name>   zset    waiters, as a lock's ``q:`` (token -> arrival number)
    base sa:<name>   hash    waiters' registrations, as a lock's ``a:``
    base sf:<name>   string  the last fence handed out (never expires)
    base w:<token>   list    a waiter's wake-up, as a lock's (``scripts.WAKE``)
    base sems        zset    semaphore name -> latest permit expiry, for the admin's listing
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .keys import text

# A limit is a count of concurrent holders: far above any sane one, and low enough that a
# script reclaiming every expired permit at once stays short.
MAX_LIMIT = 10_000


def validate_limit(limit: Any) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise TypeError(f"limit must be an int, not {type(limit).__name__}.")
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}.")
    return limit


class SemaphoreKeys(NamedTuple):
    """A semaphore's keys, and which of them each script takes."""

    holders: str
    info: str
    waiters: str
    registrations: str
    fence: str
    listing: str
    base: str

    def wake(self, token: str) -> str:
        """The list waiter ``token`` blocks on: a hand-off to it pushes the fence there."""
        return f"{self.base}w:{token}"

    def acquiring(self, token: str) -> tuple[str, ...]:
        return (*self[:6], self.wake(token))

    @property
    def releasing(self) -> tuple[str, ...]:
        return self[:6]

    @property
    def extending(self) -> tuple[str, str, str]:
        return self.holders, self.info, self.listing

    def giving_up(self, token: str) -> tuple[str, ...]:
        return self.holders, self.info, self.waiters, self.registrations, self.wake(token)

    @property
    def reading(self) -> tuple[str, str, str]:
        return self.holders, self.info, self.waiters

    def wakings(self, handoffs: list[Any]) -> list[tuple[tuple[str], tuple[Any, Any]]]:
        """KEYS and ARGV of one ``WAKE`` per hand-off in ``handoffs`` (``token, fence, ttl``
        triples, as the scripts reply them)."""
        return [
            ((self.wake(text(handoffs[i])),), (handoffs[i + 1], handoffs[i + 2]))
            for i in range(0, len(handoffs) - 2, 3)
        ]


def semaphore_keys(base: str, name: str) -> SemaphoreKeys:
    return SemaphoreKeys(
        f"{base}s:{name}", f"{base}sv:{name}", f"{base}sq:{name}", f"{base}sa:{name}",
        f"{base}sf:{name}", f"{base}sems", base,
    )  # fmt: skip


class Permit(NamedTuple):
    """One live permit as ``Semaphore.holders()`` shows it."""

    expires_ms: int
    acquired_ms: int
    fence: int
    pid: int
    host: str


def parse_permit(expiry: Any, value: Any) -> Permit | None:
    """The permit stored as ``value`` expiring at ``expiry`` ms, or None when unreadable."""
    if value is None:
        return None
    try:
        acquired_ms, fence, pid, host = text(value).split("|", 3)
        return Permit(int(float(expiry)), int(acquired_ms), int(fence), int(pid), host)
    except ValueError:
        return None
