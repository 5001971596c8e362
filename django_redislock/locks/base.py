"""What the sync and asyncio locks share: options, key layout, owner state and the reading
of script replies."""

from __future__ import annotations

import logging
import time
from typing import Any

from ..exceptions import LockError, RedisUnavailable, ReplicasNotConfirmed
from ..redis.clients import UNAVAILABLE, is_cluster, run_script
from ..signals import lock_acquired
from . import keys as _keys
from . import renewer as _renewer
from .keys import LockKeys, held_by, lock_base, lock_keys, shard_count
from .options import LockCore, now_ms
from .scripts import EXTEND, RELEASE

logger = logging.getLogger("django_redislock.locks")


class Hold:
    """One owner's hold on a lock."""

    __slots__ = ("count", "fence", "lost", "token")

    def __init__(self, token: str, fence: int) -> None:
        self.token = token
        self.fence = fence
        self.count = 1
        self.lost = False


# Holds of reentrant locks, which belong to their thread (or task): keyed by (process, thread,
# connection, name), so any instance re-enters. Other locks keep their holds on the instance,
# keyed by (process, thread). The process id keeps a forked child from inheriting holds.
_reentrant_holds: dict[tuple[Any, ...], Hold] = {}


class LockBase(LockCore):
    """Options, key layout and owner state shared by the sync and asyncio locks."""

    def __init__(
        self,
        name: str,
        *,
        ttl: float | None = None,
        timeout: float | None = None,
        auto_renew: bool = False,
        reentrant: bool = False,
        fair: bool = False,
        fencing: bool = False,
        wait_replicas: int = 0,
        using: str | None = None,
    ) -> None:
        super().__init__(name, ttl, timeout)
        if not isinstance(wait_replicas, int) or isinstance(wait_replicas, bool):
            raise TypeError(f"wait_replicas must be an int, not {type(wait_replicas).__name__}.")
        if wait_replicas < 0:
            raise ValueError(f"wait_replicas must be >= 0, not {wait_replicas}.")
        self.auto_renew = bool(auto_renew)
        self.reentrant = bool(reentrant)
        self.fair = bool(fair)
        self.fencing = bool(fencing)
        self.wait_replicas = wait_replicas
        self.using = using
        # A waiter's registration outlives several of its fallback re-checks; a waiter that
        # dies drops out of the queue when it lapses.
        self.registration_ms = max(500, int(self.retry_delay * 5000))
        self._flags = ("1" if self.fair else "0", "1" if self.fencing else "0")
        self._holds: dict[tuple[Any, ...], Hold] = _reentrant_holds if self.reentrant else {}
        self._client: Any = None

    def _setup(self, client: Any) -> None:
        self._base = lock_base(self.name, shard_count(client))
        self._keys = lock_keys(self._base, self.name)
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._setup(self._connect())
        return self._client

    def _connect(self) -> Any:
        raise NotImplementedError

    @property
    def renew_client(self) -> Any:
        """A sync client for the renewer thread (which serves sync and asyncio locks alike)."""
        raise NotImplementedError

    @property
    def base(self) -> str:
        """The hash-tagged prefix shared by every key of this lock."""
        if self._client is None:
            self._setup(self._connect())
        return self._base

    @property
    def keys(self) -> LockKeys:
        if self._client is None:
            self._setup(self._connect())
        return self._keys

    def _args(
        self, token: str, register: bool, queued: bool, scale: float = 1.0
    ) -> tuple[Any, ...]:
        """``scale``: how much longer than the plain one the waiter's fallback is (``crowd``),
        and so its registration."""
        register_ms = int(self.registration_ms * scale) if register else 0
        return self._acquire_args(token, self._flags, register_ms, queued)

    def _block_for(self, deadline: float, pttl: int, scale: float = 1.0) -> float:
        """How long a waiter's next BLPOP blocks: until its jittered fallback re-check, the
        holder's TTL or its ``deadline`` (monotonic), whichever comes first; 0 once that
        passed."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return 0.0
        block = min(remaining, self._fallback_delay() * scale)
        if pttl > 0:
            block = min(block, pttl / 1000 + 0.001)
        return max(block, 0.0005)

    def _wake_key(self, token: str) -> str:
        """The list waiter ``token`` blocks on."""
        raise NotImplementedError

    def _release_args(self, token: str) -> tuple[Any, ...]:
        return token, self.name, now_ms()

    def _forced(self, reply: Any) -> bool:
        """Whether a force release (``RELEASE`` with no token) freed a held lock."""
        if reply not in (1, 2):
            return False
        logger.warning("Lock %r was force-released.", self.name)
        return True

    def _owner(self, task: Any) -> tuple[Any, ...]:
        if self.reentrant:
            return (_keys.PID, task, self.using, self.name)
        return (_keys.PID, task)

    def _forget(self, owner: tuple[Any, ...]) -> None:
        hold = self._holds.pop(owner, None)
        # A reentrant hold may be released by another instance than the auto_renew one.
        if hold is not None and (self.auto_renew or self.reentrant):
            _renewer.renewer.discard(hold)

    def _reenter(self, owner: tuple[Any, ...], hold: Hold) -> bool:
        if not self.reentrant:
            raise LockError(
                f"Lock {self.name!r} is already held by this owner; pass reentrant=True to "
                "acquire it again, or release it first.",
                self.name,
            )
        hold.count += 1
        return True

    def _acquired(
        self, owner: tuple[Any, ...], token: str, fence: int, started: float | None = None
    ) -> Hold:
        hold = self._holds[owner] = Hold(token, fence)
        if lock_acquired.receivers:  # (checked here too: a call less on a hand-off's path)
            self._signal_acquired(fence or None, started)
        return hold

    # Hooks for ``MultiLock``, which takes or frees several locks' names in one script: each
    # lock then keeps (or gives up) its hold as if it had run that script itself.

    def adopt(self, owner: tuple[Any, ...], token: str, fence: int, renew_for: Any) -> None:
        """Hold this lock for ``owner`` (``current_owner()``) with ``token`` and ``fence``, as
        another script took it; with ``auto_renew``, renewed while ``renew_for`` (the thread
        or asyncio task) lives."""
        hold = self._acquired(owner, token, fence)
        if self.auto_renew:
            _renewer.renewer.add(self, hold, renew_for)

    def begin_release(self, owner: tuple[Any, ...]) -> Hold | None:
        """Before another script frees this lock for ``owner``: forget its hold (the renewer
        too) and return it, None when a reentrant hold only counted down; LockNotOwned when
        ``owner`` holds none."""
        return self._begin_release(owner)

    def end_release(self, hold: Hold, reply: Any) -> None:
        """After that script, with its reply for this lock (as ``RELEASE``'s: 0 when ``hold``
        no longer held it, which is reported and raised as LockNotOwned)."""
        self._end_release(hold, reply)

    def lost(self, hold: Hold, where: str) -> None:
        """Report that ``hold`` turned out to be lost (TTL ran out, or taken over)."""
        hold.lost = True
        self._report_lost(where)

    def renewal(self, hold: Hold, now: int) -> tuple[Any, ...]:
        """The command the renewer pipelines to reset ``hold``'s TTL (``now``: epoch ms)."""
        return (
            "EVAL",
            EXTEND.source,
            3,
            *self.keys.extending,
            hold.token,
            self.ttl_ms,
            self.name,
            now,
        )

    def _owns_value(self, hold: Hold | None, value: Any) -> bool:
        return hold is not None and not hold.lost and held_by(value, hold.token)

    def _confirm_replicas(self, hold: Hold) -> None:
        """Wait until ``wait_replicas`` replicas have the lock, else raise (the caller then
        releases it). Blocking, on the sync client: AsyncLock runs it in a thread."""
        # WAIT counts the writes of its own connection, so re-assert the lock (a write) and
        # WAIT on one connection, in one round trip; on Cluster, on the lock's node.
        client = self.renew_client
        if is_cluster(client):
            client = client.get_redis_connection(client.get_node_from_key(self.keys[0]))
        pipe = client.pipeline(transaction=False)
        pipe.execute_command(
            "EVAL",
            EXTEND.source,
            3,
            *self.keys.extending,
            hold.token,
            self.ttl_ms,
            self.name,
            now_ms(),
        )
        pipe.execute_command("WAIT", self.wait_replicas, max(1, min(self.ttl_ms // 3, 2000)))
        try:
            extended, acked = pipe.execute()
        except UNAVAILABLE as exc:
            raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc
        if extended and acked >= self.wait_replicas:
            return
        raise ReplicasNotConfirmed(
            f"Lock {self.name!r}: only {acked} of {self.wait_replicas} replicas confirmed the "
            "acquisition in time, so it was released again.",
            self.name,
        )

    def _begin_release(self, owner: tuple[Any, ...]) -> Hold | None:
        """The hold to free in Redis, or None when a reentrant hold only counted down."""
        hold = self._holds.get(owner)
        if hold is None:
            raise self._not_owned("release")
        if hold.count > 1 and not hold.lost:
            hold.count -= 1
            return None
        self._forget(owner)
        return hold

    def _extended(self, hold: Hold, reply: Any) -> None:
        """After an extend script: LockNotOwned (the loss reported once) unless it
        extended ``hold``."""
        if not reply:
            if not hold.lost:
                self.lost(hold, "extend")
            raise self._not_owned("extend")

    def _end_release(self, hold: Hold, reply: Any) -> None:
        if not reply:
            if not hold.lost:
                self.lost(hold, "release")
            raise self._not_owned("release")
        self._released()

    def release_owner(self, owner: tuple[Any, ...]) -> None:
        """Release the hold of ``owner`` (from ``current_owner``) over the sync client, from any
        thread: ``@redis_locked`` releases so when a streaming response is closed, which may
        happen on another thread than the view's."""
        hold = self._begin_release(owner)
        if hold is not None:
            # (``_keys`` is set: the hold was acquired.)
            args = self._release_args(hold.token)
            reply = run_script(self.renew_client, RELEASE, self._keys.releasing, args)
            self._end_release(hold, reply)
