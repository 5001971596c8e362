"""``Redlock``: one lock over several independent Redis masters, held while a majority agrees.

Each step is sent to every node before any reply is read, so a round costs the slowest node's
round trip, and a node that is down or stalled only loses its vote (``NODE_TIMEOUT`` bounds a
round). On each node the lock is a plain ``Lock`` key written by the same scripts, so that
node's lock listing shows it. Acquire holds the lock when a majority (``N // 2 + 1``) took it
and its TTL, less the round's duration and a clock-drift allowance, is still positive: that
remainder is ``validity``. Otherwise it releases its token and retries after a jittered delay.

Survives: any minority of nodes down, stalled or cut off. Does not survive: a node restarted
without ``appendfsync always`` comes back having forgotten its locks, and another client may
then win a majority while the first still holds the lock. Keep a restarted node out of
service for the longest lock TTL before it rejoins.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from secrets import token_hex
from threading import get_ident
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from redis.exceptions import NoScriptError

from ..conf import conf
from ..exceptions import LockError, LockNotOwned, RedisUnavailable
from ..redis.clients import URL_SCHEMES
from ..redis.nodes import UNREACHABLE, fan_out, node_client
from ..redis.scripts import LuaScript
from . import keys as _keys
from .keys import held_by, lock_base, lock_keys
from .options import SyncContext, now_ms
from .scripts import ACQUIRE, EXTEND, RELEASE

# Allowance for the nodes' clocks running faster than ours: a share of the TTL, plus 2 ms for
# Redis's millisecond expiry granularity.
DRIFT_FACTOR = 0.01
DRIFT_FIXED = 0.002


def _validate_nodes(nodes: Any, where: str) -> list[str]:
    if not isinstance(nodes, (list, tuple)):
        raise TypeError(f"{where} must be a list of cache aliases or Redis URLs, not {nodes!r}.")
    if not nodes:
        raise ValueError(f"{where} must not be empty: list the independent masters to lock on.")
    for node in nodes:
        if not isinstance(node, str):
            raise TypeError(f"{where} entries must be str, not {node!r}.")
        if node not in settings.CACHES and not node.startswith(URL_SCHEMES):
            raise ValueError(
                f"{where} entry {node!r} is neither a cache alias in CACHES nor a redis://, "
                "rediss:// or unix:// URL."
            )
    if len(set(nodes)) != len(nodes):
        raise ValueError(f"{where} lists a node twice; each must be a distinct master.")
    return list(nodes)


def _nodes_of(nodes: Any) -> list[str]:
    if nodes is not None:
        return _validate_nodes(nodes, "nodes")
    try:
        return _validate_nodes(conf.REDLOCK_NODES, "REDISLOCK['REDLOCK_NODES']")
    except (TypeError, ValueError) as exc:
        raise ImproperlyConfigured(f"Redlock needs nodes: {exc} Or pass nodes=[...].") from exc


def _owner() -> tuple[int, int]:
    return (_keys.PID, get_ident())


class Redlock(SyncContext):
    """A lock held on a majority of independent Redis masters (not reentrant).
    ``with Redlock("name"):`` acquires (or raises LockTimeout) and releases on exit."""

    noun = "Redlock"
    lost_reason = "its nodes no longer hold it"
    # Never queued, so never handed over: fair mode and fencing off, no registration.
    flags = ("0", "0")

    def __init__(
        self,
        name: str,
        *,
        ttl: float | None = None,
        timeout: float | None = None,
        nodes: Sequence[str] | None = None,
    ) -> None:
        super().__init__(name, ttl, timeout)
        self.nodes = _nodes_of(nodes)
        self.quorum = len(self.nodes) // 2 + 1
        self.base = lock_base(self.name, 1)
        self.keys = lock_keys(self.base, self.name)  # the same on each node
        # Per (process, thread): (token, monotonic time at which the hold's validity ends).
        self._holds: dict[tuple[int, int], tuple[str, float]] = {}
        self._clients: list[Any] | None = None

    def __repr__(self) -> str:
        return f"<Redlock {self.name!r} ttl={self.lock_ttl} nodes={len(self.nodes)}>"

    def _send(self, commands: Sequence[tuple[Any, ...] | None]) -> list[Any]:
        if self._clients is None:
            self._clients = [node_client(node) for node in self.nodes]
        return fan_out(self._clients, commands)

    def _run(
        self, script: LuaScript, keys: Sequence[str], args: Sequence[Any], to: Any = None
    ) -> list[Any]:
        """Run ``script`` on every node (or on those ``to`` marks true) at once."""
        tail = (len(keys), *keys, *args)
        to = [True] * len(self.nodes) if to is None else to
        replies = self._send([("EVALSHA", script.sha, *tail) if go else None for go in to])
        # EVAL only where a node lacks the script (restarted, SCRIPT FLUSH): sending it every
        # time would resend kilobytes to every node in every round.
        missing = [isinstance(reply, NoScriptError) for reply in replies]
        if any(missing):
            again = self._send([("EVAL", script.source, *tail) if m else None for m in missing])
            replies = [b if m else a for a, b, m in zip(replies, again, missing, strict=True)]
        return replies

    def _query(self, *command: Any) -> list[Any]:
        return self._reachable(self._send([command] * len(self.nodes)), "query")

    def _reachable(self, replies: list[Any], action: str) -> list[Any]:
        if all(isinstance(reply, UNREACHABLE) for reply in replies):
            raise RedisUnavailable(
                f"Cannot {action} Redlock {self.name!r}: none of its {len(replies)} nodes is "
                f"reachable ({replies[0]})."
            )
        return replies

    def _release(self, token: str, to: Any = None) -> list[Any]:
        # A plain Lock of the same name on a node may have had waiters: the node's release
        # hands the lock to one and wakes it.
        return self._run(RELEASE, self.keys.releasing, (token, self.name, now_ms()), to)

    @staticmethod
    def _end(ttl_ms: int, start: float) -> float:
        """When the validity of a hold taken (or extended) by a round begun at ``start`` ends."""
        return start + ttl_ms / 1000 * (1 - DRIFT_FACTOR) - DRIFT_FIXED

    def acquire(self, timeout: float | None = None) -> bool:
        """Acquire the lock on a majority of nodes, waiting up to ``timeout`` seconds (None:
        the lock's timeout, 0: one round, ``math.inf``: forever); whether it is now held.
        Raises RedisUnavailable at once when no node at all answers."""
        timeout = self._validate_timeout(timeout)
        owner = _owner()
        hold = self._holds.get(owner)
        if hold is not None:
            if hold[1] > time.monotonic():
                raise LockError(
                    f"Redlock {self.name!r} is already held by this owner; release it first "
                    "(a Redlock is not reentrant).",
                    self.name,
                )
            del self._holds[owner]  # its validity ran out: acquire afresh
        started = time.monotonic()
        give_up = started + timeout
        while True:
            token, start = f"{token_hex(8)}|", time.monotonic()
            args = self._acquire_args(token, self.flags, 0, False)
            replies = self._run(ACQUIRE, self.keys.acquiring, args)
            end, now = self._end(self.ttl_ms, start), time.monotonic()
            if sum(1 for r in replies if type(r) is int) >= self.quorum and end > now:
                return self._acquired(owner, token, end, started)
            # Not where the node answered "busy" (it surely did not take it); everywhere else,
            # failed nodes included: a lost reply may hide a success.
            self._release(token, [not isinstance(r, list) for r in replies])
            self._reachable(replies, "acquire")
            if now >= give_up:
                break
            delay = min(self._fallback_delay(), give_up - now)
            busy = [r[0] for r in replies if isinstance(r, list) and r[0] >= 0]
            if busy:  # no use sleeping past the moment the first busy node frees up
                delay = min(delay, min(busy) / 1000 + 0.001)
            time.sleep(delay)
        self._busy(timeout)
        return False

    def _acquired(self, owner: tuple[int, int], token: str, end: float, started: float) -> bool:
        self._holds[owner] = (token, end)
        try:
            self._signal_acquired(None, started)
        except BaseException:
            del self._holds[owner]  # leave no lock held by nobody who knows it
            self._release(token)
            raise
        return True

    def release(self) -> None:
        """Release the lock on every node. LockNotOwned unless a majority released it: it had
        expired or been taken on the others, or they did not answer (there it expires)."""
        hold = self._holds.pop(_owner(), None)
        if hold is None:
            raise self._not_owned("release")
        replies = self._reachable(self._release(hold[0]), "release")
        released = sum(1 for r in replies if type(r) is int and r > 0)
        if released < self.quorum:
            self._released_on_a_minority(hold[1], released, replies)
        self._released()

    def _released_on_a_minority(self, end: float, released: int, replies: list[Any]) -> None:
        gone = sum(1 for r in replies if r == 0)  # nodes that surely did not hold it
        failed = len(replies) - released - gone
        if end > time.monotonic() and gone > len(replies) - self.quorum:
            self._report_lost("release")  # it should still have been held on a majority
        raise LockNotOwned(
            f"Cannot release Redlock {self.name!r}: only {released} of its {len(replies)} "
            f"nodes still held it for this owner, fewer than a majority ({self.quorum}); "
            f"{gone} no longer held it and {failed} could not be reached (there it expires "
            "with its TTL).",
            self.name,
        )

    def extend(self, ttl: float | None = None) -> None:
        """Reset the TTL to ``ttl`` seconds (default: the lock's ttl) on a majority of nodes,
        restoring the validity; else release it everywhere and raise LockNotOwned."""
        ttl_ms = self._ttl_ms_of(ttl)
        owner = _owner()
        hold = self._holds.get(owner)
        if hold is None:
            raise self._not_owned("extend")
        start = time.monotonic()
        args = (hold[0], ttl_ms, self.name, now_ms())
        replies = self._run(EXTEND, self.keys.extending, args)
        self._reachable(replies, "extend")
        end, now = self._end(ttl_ms, start), time.monotonic()
        if sum(1 for r in replies if r == 1) >= self.quorum and end > now:
            self._holds[owner] = (hold[0], end)
            return
        del self._holds[owner]
        self._release(hold[0])
        if hold[1] > now:
            self._report_lost("extend")
        raise self._not_owned("extend")

    def locked(self) -> bool:
        """Whether anybody holds the lock on a majority of nodes."""
        return sum(1 for r in self._query("EXISTS", self.keys[0]) if r == 1) >= self.quorum

    def owned(self) -> bool:
        """Whether this owner (thread) holds the lock: within its validity, on a majority."""
        hold = self._holds.get(_owner())
        if hold is None or hold[1] <= time.monotonic():
            return False
        values = self._query("GET", self.keys[0])
        return sum(1 for v in values if held_by(v, hold[0])) >= self.quorum

    def ttl(self) -> float | None:
        """Seconds until the lock expires on a majority of nodes, None if not on a majority."""
        pttls = self._query("PTTL", self.keys[0])
        left = sorted((r for r in pttls if type(r) is int and r >= 0), reverse=True)
        return left[self.quorum - 1] / 1000 if len(left) >= self.quorum else None

    @property
    def validity(self) -> float | None:
        """Seconds this owner's hold is still guaranteed (0.0 once that ran out), None when
        this owner does not hold the lock."""
        hold = self._holds.get(_owner())
        return None if hold is None else max(0.0, hold[1] - time.monotonic())
