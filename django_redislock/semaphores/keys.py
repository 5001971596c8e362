"""The Redis key layout of a semaphore and the codec of its permits. Nothing else in the
package builds a semaphore's key or reads a permit.

A semaphore lives in its lock shard (``base`` = ``<prefix>:{L<shard>}:``, see ``locks.keys``), so
every key of it shares one hash tag and every script runs on Redis Cluster:

    base s:<name>    zset    permits: "<token><fence>|<limit>|<pid>|<host>" -> expiry (epoch
                             ms, server clock); ``<token>`` is "<hex>|", or "<hex>*<n>|" for
                             a holder of n permits, whose other n - 1 members have the token
                             "<hex>*<n>.<i>|" (i = 2..n). A permit whose expiry passed is
                             reclaimed by the next script that meets it; the key expires no
                             sooner than its latest permit.
    base sq:<name>   zset    waiters, as a lock's ``q:`` (token -> arrival number)
    base sa:<name>   hash    waiters' registrations, as a lock's ``a:``, the owner part being
                             "<limit>|<pid>|<host>"
    base sf:<name>   string  the last fence handed out (fencing=True); it expires a minute
                             after the last fenced grant, when the fences' clock floor (see
                             ``lua.CLOCK``) has passed it
    base sh:<name>   list    the waiters' wake-ups, as a lock's ``h:``: the script that hands
                             permits to waiters pushes "<permit>|<hops>" there for each of
                             them (``<permit>`` is its first holders member, so it starts
                             with "<token><fence>|"); every waiter blocks on it and one
                             popping another's wake-up passes it on (``scripts``). It holds
                             the wake-ups of hand-offs not yet popped and expires no sooner
                             than the permits they announce
    base sems        zset    semaphore name -> latest permit expiry, for the admin's listing.
                             A release that frees a semaphore's last live permit removes its
                             entry; an entry whose expiry passed (the holders died or let
                             their permits lapse) is dropped by the next acquire on the shard
                             (a few at a time) or the next listing (all).

Once a semaphore's permits are released or lapsed (and a fenced one's last grant is a minute
old), none of these keys is left for it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..locks.keys import text

# A limit is a count of concurrent holders: far above any sane one, and low enough that a
# script reclaiming every expired permit at once stays short.
MAX_LIMIT = 10_000


def validate_permits(permits: Any, limit: int) -> int:
    if not isinstance(permits, int) or isinstance(permits, bool):
        raise TypeError(f"permits must be an int, not {type(permits).__name__}.")
    if not 1 <= permits <= limit:
        raise ValueError(f"permits must be between 1 and the limit ({limit}), not {permits}.")
    return permits


def validate_limit(limit: Any) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise TypeError(f"limit must be an int, not {type(limit).__name__}.")
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}.")
    return limit


class SemaphoreKeys(NamedTuple):
    """A semaphore's keys, and which of them each script takes."""

    holders: str
    waiters: str
    registrations: str
    fence: str
    listing: str
    wake: str
    base: str

    @property
    def acquiring(self) -> tuple[str, ...]:
        return self[:6]

    @property
    def releasing(self) -> tuple[str, ...]:
        return self[:6]

    @property
    def extending(self) -> tuple[str, str]:
        return self.holders, self.listing

    @property
    def giving_up(self) -> tuple[str, ...]:
        return self.holders, self.waiters, self.registrations, self.wake

    @property
    def reading(self) -> tuple[str, str]:
        return self.holders, self.waiters


def semaphore_keys(base: str, name: str) -> SemaphoreKeys:
    return SemaphoreKeys(
        f"{base}s:{name}",
        f"{base}sq:{name}",
        f"{base}sa:{name}",
        f"{base}sf:{name}",
        f"{base}sems",
        f"{base}sh:{name}",
        base,
    )


def permit_of(token: str, fence: int, limit: int, owner: str) -> str:
    """The permit (holders member) that ``token`` got with ``fence``; ``owner`` is
    "<pid>|<host>"."""
    return f"{token}{fence}|{limit}|{owner}"


def token_of(hex_id: str, permits: int) -> str:
    """The token of a holder of ``permits`` permits (see the layout above)."""
    return f"{hex_id}|" if permits == 1 else f"{hex_id}*{permits}|"


class Permit(NamedTuple):
    """One live holder as ``Semaphore.holders()`` shows it, with how many permits it holds."""

    expires_ms: int
    fence: int
    limit: int
    pid: int
    host: str
    permits: int = 1


def parse_permit(expiry: Any, member: Any) -> Permit | None:
    """The holder whose first member is ``member``, expiring at ``expiry`` ms; None when
    ``member`` is another of its members, or unreadable."""
    try:
        token, fence, limit, pid, host = text(member).split("|", 4)
        _, star, permits = token.partition("*")
        if "." in permits:
            return None  # one of a multi-permit holder's other members
        count = int(permits) if star else 1
        return Permit(int(float(expiry)), int(fence), int(limit), int(pid), host, count)
    except ValueError:
        return None
