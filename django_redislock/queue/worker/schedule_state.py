"""Operating a SCHEDULE entry: pause it, resume it, run it now, and read its state (paused
or not, its last tick, its last run's job) for the admin and ``redislock_schedule``.

A pause lives in Redis (see ``schedule_keys``): every scheduler skips the entry's ticks from
the moment ``pause_entry`` returns, workers restarted meanwhile too. ``resume_entry`` runs
the entry again from its next tick: the ticks passed while it was paused are never run,
even with ``catch_up``. A run now is one job, ``schedule:<name>:now:<nonce>``, enqueued
once per nonce (a number that only grows: the admin's confirmation form carries one, so a
form posted twice enqueues one job), paused or not.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...conf import conf
from ...redis.clients import call, run_script
from ...redis.failures import unavailable_as_error
from ..jobs import Job, JobState
from ..queue import get_queue
from ..replies import number, text
from .schedule import Entry
from .schedule_keys import FOREVER, PAUSE_ENTRY, RESUME_ENTRY, entry_keys, run_now_entry

logger = logging.getLogger("django_redislock.queue.schedule")

# How many times ``run_entry_now`` without a nonce tries a fresher one when another run now
# claimed a later nonce at the same moment.
NONCE_TRIES = 5


def entry_named(name: str) -> Entry:
    """The SCHEDULE entry ``name``; ValueError naming the entries when there is no such
    valid entry."""
    schedule = conf.SCHEDULE
    if not isinstance(name, str) or name not in schedule:
        known = ", ".join(sorted(map(str, schedule))) or "none"
        raise ValueError(f"No entry {name!r} in REDISLOCK['SCHEDULE'] (its entries: {known}).")
    options = schedule[name]
    if not isinstance(options, Mapping):
        raise ValueError(f"Schedule entry {name!r} is invalid: its options are no dict.")
    try:
        entry = Entry.from_setting(name, options)
    except ValueError as exc:
        raise ValueError(f"Schedule entry {name!r} is invalid: {exc}.") from exc
    if entry.queue not in conf.QUEUES:
        raise ValueError(f"Schedule entry {name!r} names queue {entry.queue!r}, not in QUEUES.")
    return entry


def new_nonce() -> int:
    """A run now's nonce: the time in epoch µs (a later run now gets a larger one)."""
    return int(time.time() * 1_000_000)


def checked_nonce(nonce: Any) -> int:
    """``nonce`` (an int, or its digits) as an int; ValueError naming it when it is none."""
    if isinstance(nonce, str) and nonce.isascii() and nonce.isdigit() and len(nonce) <= 16:
        nonce = int(nonce)
    if not isinstance(nonce, int) or isinstance(nonce, bool) or not 0 < nonce < FOREVER:
        raise ValueError(f"nonce must be a whole number from 1 to {FOREVER - 1}, not {nonce!r}.")
    return nonce


def run_now_id(name: str, nonce: int) -> str:
    return f"schedule:{name}:now:{nonce}"


def pause_entry(entry: Entry, *, by: str | None = None, using: str | None = None) -> bool:
    """Skip ``entry``'s ticks until ``resume_entry``; True when it was not paused yet.
    ``by``: who asked (shown in the admin)."""
    queue = get_queue(entry.queue, using)
    keys = entry_keys(queue.keys, entry.name)
    paused = bool(run_script(queue.client, PAUSE_ENTRY, keys[:2], (by or "", FOREVER)))
    if paused:
        logger.info("Schedule entry %r paused%s.", entry.name, f" by {by}" if by else "")
    return paused


def resume_entry(entry: Entry, *, using: str | None = None, now: float | None = None) -> bool:
    """End ``pause_entry``: the next tick (after ``now``) is the first to run. True when it
    was paused."""
    queue = get_queue(entry.queue, using)
    keys = entry_keys(queue.keys, entry.name)
    latest = round(entry.latest(time.time() if now is None else now) * 1000)
    resumed = bool(run_script(queue.client, RESUME_ENTRY, keys[:2], (latest, FOREVER)))
    if resumed:
        logger.info("Schedule entry %r resumed: it runs again from its next tick.", entry.name)
    return resumed


def run_entry_now(
    entry: Entry, nonce: int | str | None = None, *, using: str | None = None
) -> Job | None:
    """Enqueue one job of ``entry`` now, once per ``nonce``: None when that nonce (or a
    later one) was enqueued already. Without a nonce, one job is always enqueued."""
    queue = get_queue(entry.queue, using)
    given = nonce is not None
    chosen = checked_nonce(nonce) if given else new_nonce()
    for _ in range(1 if given else NONCE_TRIES):
        job = queue.enqueue_tick(
            run_now_entry(entry.name),
            chosen,
            {**entry.job(), "job_id": run_now_id(entry.name, chosen)},
        )
        if job is not None:
            logger.info("Schedule entry %r run now: enqueued %s.", entry.name, job.id)
            return job
        if given:
            return None
        # Another run now claimed a later nonce meanwhile (or this host's clock is behind).
        claimed = number(call(queue.client, "GET", entry_keys(queue.keys, entry.name).run_now))
        chosen = max(new_nonce(), claimed + 1)
    raise RuntimeError(f"Schedule entry {entry.name!r}: no run-now nonce could be claimed.")


# --- reading -------------------------------------------------------------------------------

# A last run's job state, as the schedule shows it
OUTCOMES: dict[str, str] = {
    JobState.DONE: "succeeded",
    JobState.DEAD: "dead",
    JobState.RUNNING: "running",
}


@dataclass(frozen=True)
class LastRun:
    """The job of an entry's latest tick or run now (whichever came last and is kept)."""

    job_id: str
    asked_at: float  # epoch s: its tick, or when its run now was asked for
    run_now: bool
    job: Job

    @property
    def outcome(self) -> str:
        """succeeded, dead, running, failed (an attempt failed; it is retried), pending
        (not started yet) or unreadable."""
        if self.job.state in OUTCOMES:
            return OUTCOMES[self.job.state]
        if self.job.state == JobState.UNKNOWN:
            return "unreadable"
        return "failed" if self.job.failures or self.job.error else "pending"

    @property
    def outcome_at(self) -> float | None:
        """When it got its outcome (epoch s): finished, started, or due."""
        job = self.job
        moment = job.finished if job.state in (JobState.DONE, JobState.DEAD) else 0
        if job.state == JobState.RUNNING:
            moment = job.started
        elif not moment:
            moment = job.score or job.enqueued
        return moment / 1000 if moment else None


@dataclass(frozen=True)
class EntryState:
    entry: Entry
    last_tick: float | None  # epoch s: the last tick claimed (kept across a pause)
    paused: bool
    paused_by: str = ""
    paused_at: float | None = None  # epoch s
    last_run: LastRun | None = None  # None: no job of it is kept (or none ever ran)
    problem: str = ""  # the pause record is unreadable


def entry_states(entries: Sequence[Entry], using: str | None = None) -> list[EntryState]:
    """The state of each of ``entries``: two round trips, and one more per queue."""
    if not entries:
        return []
    queues = {entry.queue: get_queue(entry.queue, using) for entry in entries}
    with unavailable_as_error():
        pipe = queues[entries[0].queue].client.pipeline(transaction=False)
        for entry in entries:
            keys = entry_keys(queues[entry.queue].keys, entry.name)
            pipe.get(keys.tick)
            pipe.hgetall(keys.paused)
            pipe.get(keys.run_now)
        replies = pipe.execute(raise_on_error=False)
    read = [_read(entry, *replies[3 * n : 3 * n + 3]) for n, entry in enumerate(entries)]
    wanted: dict[str, list[str]] = {}
    for entry, (_, candidates) in zip(entries, read, strict=True):
        wanted.setdefault(entry.queue, []).extend(job_id for job_id, _, _ in candidates)
    found: dict[tuple[str, str], Job] = {}
    for name, ids in wanted.items():
        for job in queues[name].get_many(ids) if ids else []:
            if job is not None:
                found[name, job.id] = job
    states = []
    for entry, (state, candidates) in zip(entries, read, strict=True):
        runs = [
            LastRun(job_id, asked_at, run_now, found[entry.queue, job_id])
            for job_id, asked_at, run_now in candidates
            if (entry.queue, job_id) in found
        ]
        last = max(runs, key=lambda run: run.asked_at) if runs else None
        states.append(EntryState(**state, last_run=last))
    return states


def _read(
    entry: Entry, tick: Any, record: Any, run_now: Any
) -> tuple[dict[str, Any], list[tuple[str, float, bool]]]:
    """An entry's state from its three keys' replies, and the ids of the jobs that may be
    its last run (id, when asked for, whether a run now)."""
    state: dict[str, Any] = {"entry": entry, "paused": False, "last_tick": None}
    claimed = None if isinstance(tick, Exception) or tick is None else number(tick, -1)
    if claimed == FOREVER:
        state["paused"], claimed = True, None
    if isinstance(record, Exception):
        state.update(paused=True, problem=f"its pause record is unreadable ({record})")
    elif record:
        fields = {text(key): text(value) for key, value in record.items()}
        kept = fields.get("tick", "")
        state.update(
            paused=True,
            paused_by=fields.get("by", ""),
            paused_at=number(fields.get("at"), 0) / 1000 or None,
            last_tick=None,
        )
        claimed = int(kept) if kept.isdigit() else None
    if isinstance(tick, Exception):
        state["problem"] = f"its tick claim is unreadable ({tick})"
    candidates = []
    if claimed is not None and claimed > 0:
        state["last_tick"] = claimed / 1000
        candidates.append((f"schedule:{entry.name}:{claimed}", claimed / 1000, False))
    nonce = None if isinstance(run_now, Exception) or run_now is None else number(run_now, 0)
    if nonce and 0 < nonce < FOREVER:
        candidates.append((run_now_id(entry.name, nonce), nonce / 1_000_000, True))
    return state, candidates
