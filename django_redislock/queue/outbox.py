"""Delivering a queue's outbox: what its scripts could not do themselves, for want of a key
(on Redis Cluster a script reaches only its own queue's slot, and only the keys it was given).

Three kinds of entries (``depend_lua`` and DEPEND write them):

- ``t``: tell a dependant (in this queue or another) that its dependency ended;
- ``r``: register a job of this queue as the dependant of a job in another queue (which may
  have ended already: the dependant is then told at once);
- ``e``: wake those who ``join`` a job that ended.

Every delivery is idempotent (``TELL``, ``REGISTER`` check what they were told before), so an
entry is removed only after it was delivered, and one delivered twice (two workers sweeping
at once, a worker killed between the delivery and the removal) changes nothing. The worker
that left entries delivers them at once; every worker also sweeps its queues' outboxes
every ``SWEEP_EVERY`` seconds, and whoever enqueues jobs with dependencies in another queue
delivers their registrations itself.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import redis
from django.core.exceptions import ImproperlyConfigured

from ..exceptions import RedisUnavailable
from ..redis.failures import UNAVAILABLE
from .depend_scripts import REGISTER, TELL, WAKE_JOINERS
from .jobs import JobState
from .replies import text

if TYPE_CHECKING:
    from .queue import Queue

logger = logging.getLogger("django_redislock.queue.outbox")

OUTBOX_MARK = "{outbox}"  # in a script's lost ids: it left something in the outbox
SWEEP_EVERY = 1.0  # seconds between a worker's sweeps of its queues' outboxes
BATCH = 200  # entries read at a time
KEPT_PASSES = 10  # batches of kept registrations one delivery looks past, at most
# A registration whose dependency is not found yet may be one written by the same workflow
# in another queue a moment later: it is tried again, until this old.
UNKNOWN_GRACE_MS = 60_000
DONE, DEAD, WAITING = JobState.DONE.letter, JobState.DEAD.letter, JobState.WAITING.letter
ENDED = (DONE, DEAD)
# Refusals that say Redis cannot take the command now, not that it is wrong.
TRANSIENT = ("OOM", "READONLY", "LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN")


def split_ref(ref: str, here: str) -> tuple[str, str]:
    """(queue, id) of a ref as a job of queue ``here`` names it."""
    queue, tab, job_id = ref.partition("\t")
    return (queue, job_id) if tab else (here, ref)


def ref_from(queue: str, job_id: str, here: str) -> str:
    """How a job of queue ``here`` names job ``job_id`` of ``queue``."""
    return job_id if queue == here else f"{queue}\t{job_id}"


def deliver(queue: Queue, *, rounds: int = 100) -> int:
    """Deliver ``queue``'s outbox, then those of the queues where a dependant ended dead in
    turn (its own dependants to tell). Returns how many entries were delivered. Raises
    RedisUnavailable (whatever was not delivered stays, for the next sweep)."""
    delivered = 0
    todo: list[Queue] = [queue]
    passes: dict[str, int] = defaultdict(int)  # batches of kept entries passed, per queue
    while todo and rounds > 0:
        rounds -= 1
        source = todo.pop(0)
        try:
            count, more = _deliver_batch(source, passes[source.name] < KEPT_PASSES)
        except (*UNAVAILABLE, OSError) as exc:  # (its plain commands, as the scripts raise)
            raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc
        delivered += count
        if not count:
            passes[source.name] += 1
        for other in more:
            if all(other.name != q.name for q in todo):
                todo.append(other)
    return delivered


def deliver_now(queue: Queue) -> None:
    """``deliver``, right after a call that left something in ``queue``'s outbox: if Redis
    fails meanwhile, what is left stays for the workers' sweep (the call itself was done,
    and must not look failed)."""
    try:
        deliver(queue)
    except RedisUnavailable as exc:
        logger.info("Left %r's outbox to the workers' sweep: %s", queue.name, exc)


def _deliver_batch(source: Queue, pass_kept: bool) -> tuple[int, list[Queue]]:
    """One batch of ``source``'s outbox delivered: (how many, the queues to look at next).
    A registration kept for later goes to the back, so that it holds up nothing behind it
    (``pass_kept``: a batch of them only, looked past to what follows); a malformed entry
    is dropped, and logged."""
    client, keys = source.client, source.keys
    entries = client.lrange(keys.outbox, 0, BATCH - 1)
    if not entries:
        return 0, []
    tells: dict[str, list[Any]] = defaultdict(list)
    delivered: list[Any] = []
    kept: list[Any] = []
    now_ms = int(time.time() * 1000)
    for raw in entries:
        kind, _, rest = text(raw).partition("\n")
        parts = rest.split("\n", 3)
        try:
            if kind == "t" and len(parts) == 4 and _ids(parts[0], parts[1]) and parts[2] in ENDED:
                target, dependant = split_ref(parts[0], source.name)
                parent = ref_from(source.name, parts[1], target)
                tells[target] += (dependant, parent, parts[2], parts[3])
            elif kind == "e" and len(parts) == 2 and _ids(parts[0]) and parts[1].isdigit():
                source.run(WAKE_JOINERS, [keys.end(parts[0])], [parts[1]])
            elif kind == "r" and len(parts) == 3 and _ids(parts[0], parts[1]):
                if not _registered(source, parts, now_ms, tells):
                    kept.append(raw)  # not found yet: tried again later
                    continue
            else:
                logger.error("Dropped a malformed entry of %r's outbox: %.300r", source.name, raw)
        except ImproperlyConfigured as exc:  # a queue not configured (any more)
            logger.error("Dropped an entry of %r's outbox: %s (%.300r)", source.name, exc, raw)
        delivered.append(raw)
    full = len(entries) == BATCH
    more = [source] if full and (delivered or (kept and pass_kept)) else []
    for target, values in tells.items():
        try:
            queue = source if target == source.name else _queue(target, source)
        except ImproperlyConfigured as exc:
            logger.error("Could not tell the dependants in queue %r: %s", target, exc)
            continue
        for start in range(0, len(values), 4000):  # (1000 jobs a call)
            chunk = values[start : start + 4000]
            if _told(queue, chunk) and queue not in more:
                more.append(queue)
    pipe = client.pipeline(transaction=False)
    for raw in delivered:
        pipe.lrem(keys.outbox, 1, raw)
    pipe.execute()
    if kept and (delivered or full):  # to the back, in one step (never lost in between)
        moving = client.pipeline(transaction=True)
        for raw in kept:
            moving.lrem(keys.outbox, 1, raw)
            moving.rpush(keys.outbox, raw)
        moving.execute()
    return len(delivered), more


def _told(queue: Queue, chunk: list[Any]) -> bool:
    """TELL the dependants of ``chunk`` (4 values each); whether that left something in
    the queue's outbox. A refusal that is Redis's state (out of memory, a replica...) is
    raised as RedisUnavailable, and the entries stay; any other is logged, and they go."""
    keys = [k for i in chunk[::4] for k in (queue.keys.job(i), queue.keys.corrupt(i))]
    try:
        return bool(queue.run(TELL, keys, chunk))
    except redis.ResponseError as exc:
        if str(exc).startswith(TRANSIENT):
            raise RedisUnavailable(f"Redis refused to tell dependants ({exc})") from exc
        logger.error("Could not tell %d dependant(s) in %r: %s", len(chunk) // 4, queue.name, exc)
        return False


def _ids(*refs: str) -> bool:
    """Whether each of ``refs`` (an id, or "<queue>\t<id>") could name a job: non-empty,
    printable but for one tab, no braces (they would change a key's Cluster slot)."""
    for ref in refs:
        queue, _, job_id = ref.rpartition("\t")
        if not job_id or len(job_id) > 200 or "{" in ref or "}" in ref:
            return False
        if not job_id.isprintable() or (queue and not queue.isprintable()):
            return False
    return True


def _registered(source: Queue, parts: list[str], now_ms: int, tells: dict[str, list[Any]]) -> bool:
    """Deliver a registration ``parts`` (the dependency's ref, the dependant's id, when it
    was written): False to keep it for later (its dependency not found yet)."""
    target, parent_id = split_ref(parts[0], source.name)
    dependency = _queue(target, source)
    found = text(
        dependency.run(
            REGISTER,
            [dependency.keys.job(parent_id), dependency.keys.result(parent_id)],
            [ref_from(source.name, parts[1], target)],
        )
    )
    if found == WAITING:
        return True
    if found in (DONE, DEAD):
        tells[source.name] += (parts[1], parts[0], found, "")
        return True
    try:
        written = int(parts[2])
    except ValueError:
        written = 0
    if now_ms - written < UNKNOWN_GRACE_MS:
        return False
    tells[source.name] += (parts[1], parts[0], DEAD, "it does not exist")
    return True


def _queue(name: str, like: Queue) -> Queue:
    return like.other(name)
