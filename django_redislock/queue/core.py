"""``get_queue(name)``: a reliable delayed job queue on Redis (at-least-once delivery)."""

from __future__ import annotations

import base64
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ..conf import conf
from ..exceptions import JobNotFound
from ..redis.clients import get_redis, run_script
from .scripts import (
    CANCEL,
    ENQUEUE,
    MAX_BATCH,
    PAGE,
    POP,
    READY_AGE,
    RELEASE,
    RENEW,
    REQUEUE,
    SETTLE,
)

STATES = {"ready": "ready", "scheduled": "sched", "running": "run", "dead": "dead"}
_STATE_NAMES = {"r": "ready", "s": "scheduled", "x": "running", "d": "dead", "k": "done"}
MAX_JOB_ID = 200
_JOB_ARGUMENTS = frozenset({"task", "args", "kwargs", "job_id", "delay", "at", "priority", "meta"})
MAX_DELAY = 100 * 365.25 * 86400  # seconds
MAX_TRACEBACK = 16000  # characters of a traceback kept (its end: where it was raised)


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _int(value: Any, default: int = 0) -> int:
    """A number field as read from Redis; ``default`` when absent or not a number."""
    try:
        return int(float(_text(value))) if value not in (None, b"", "") else default
    except (TypeError, ValueError, OverflowError):
        return default


@dataclass(frozen=True)
class AttemptError:
    """What one failed attempt of a job raised."""

    error: str  # "ExceptionClass: message"
    error_class: str = ""  # dotted path of the exception class ("" when not an exception)
    traceback: str = ""
    worker: str = ""


def _attempt_errors(history: str) -> tuple[AttemptError, ...]:
    errors = []
    for line in history.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            text = {key: str(entry.get(key, "")) for key in "ectw"}
            errors.append(AttemptError(text["e"], text["c"], text["t"], text["w"]))
    return tuple(errors)


@dataclass(frozen=True)
class Job:
    """One job as read from Redis. ``lease`` is set on a job returned by ``pop``; ``state``
    is ready, scheduled, running, dead, or done (a finished job kept for RESULT_TTL, with
    its return value as JSON text in ``result``). Times are epoch ms (0: not yet)."""

    id: str
    queue: str
    task: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    attempts: int = 0
    state: str = "ready"
    score: int = 0  # due time, epoch ms
    enqueued: int = 0  # epoch ms
    started: int = 0  # the last attempt's start
    finished: int = 0  # done or dead
    lease: str | None = None
    worker: str | None = None
    workers: tuple[str, ...] = ()  # the worker of each attempt
    error: str = ""
    error_class: str = ""  # dotted path of the last error's exception class
    traceback: str = ""
    result: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # JSON kept with the job
    errors: tuple[AttemptError, ...] = ()  # every failed attempt's, oldest first

    @property
    def due_at(self) -> datetime:
        return datetime.fromtimestamp(self.score / 1000, tz=timezone.utc)

    @property
    def enqueued_at(self) -> datetime:
        return datetime.fromtimestamp(self.enqueued / 1000, tz=timezone.utc)


def _error(error: str | BaseException) -> tuple[str, str]:
    """An error as stored: its text, and its exception class path (when an exception)."""
    if isinstance(error, str):
        return error, ""
    cls = type(error)
    try:
        text = str(error)
    except Exception:  # a task's exception whose __str__ fails: its failure is kept all the same
        text = "<the exception's text could not be made>"
    return f"{cls.__name__}: {text}", f"{cls.__module__}.{cls.__qualname__}"


def _trimmed(traceback: str) -> str:
    if len(traceback) <= MAX_TRACEBACK:
        return traceback
    return "...\n" + traceback[-MAX_TRACEBACK:]


def _encoded(task: Any, args: Any, kwargs: Any) -> tuple[str, str, str]:
    """A job's task, args and kwargs as stored (JSON; "" for no kwargs)."""
    if not isinstance(task, str) or not task:
        raise TypeError(f"task must be a non-empty dotted path (str), not {task!r}.")
    if not isinstance(args, (list, tuple)):
        raise TypeError(f"args must be a list, not {type(args).__name__}.")
    if not isinstance(kwargs, Mapping):
        raise TypeError(f"kwargs must be a dict, not {type(kwargs).__name__}.")
    try:
        return task, _dumps(list(args)), _dumps(dict(kwargs)) if kwargs else ""
    except (TypeError, ValueError) as exc:
        raise TypeError(f"args and kwargs of a job must be JSON-serializable ({exc}).") from exc


_dumps = json.JSONEncoder(separators=(",", ":")).encode


def _meta(meta: Any) -> str:
    if meta is None or meta == {}:
        return ""
    if not isinstance(meta, Mapping):
        raise TypeError(f"meta must be a dict, not {type(meta).__name__}.")
    try:
        return _dumps(dict(meta))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"meta of a job must be JSON-serializable ({exc}).") from exc


def _decoded_meta(value: Any) -> dict[str, Any]:
    if not value:
        return {}
    try:
        meta = json.loads(value)
    except (TypeError, ValueError, UnicodeDecodeError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _decoded(task: Any, args: Any, kwargs: Any) -> tuple[str, list[Any], dict[str, Any]]:
    """A job's task, args and kwargs as read. Never anything but JSON: a job written by
    something else gets an empty task, and the worker sends it to the dead set."""
    try:
        task, args = _text(task), json.loads(args)
        kwargs = json.loads(kwargs) if kwargs else {}
        if task and isinstance(args, list) and isinstance(kwargs, dict):
            return task, args, kwargs
    except (TypeError, ValueError, UnicodeDecodeError):
        pass
    return "", [], {}


def _new_ids(count: int) -> Iterator[str]:
    # 120 random bits each, 20 URL-safe characters (15 bytes: base64 without padding); one
    # read of the OS's random source per batch.
    text = base64.urlsafe_b64encode(os.urandom(15 * count)).decode()
    return (text[i : i + 20] for i in range(0, 20 * count, 20))


def _job_id(job_id: Any) -> str:
    if not isinstance(job_id, str) or not job_id or len(job_id) > MAX_JOB_ID:
        raise ValueError(f"job_id must be a non-empty str of at most {MAX_JOB_ID} characters.")
    if not job_id.isprintable() or "{" in job_id or "}" in job_id:
        raise ValueError(f"job_id {job_id!r} contains braces or control characters.")
    return job_id


def _priority(priority: Any) -> int:
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise TypeError(f"priority must be an int, not {type(priority).__name__}.")
    if not -100 <= priority <= 100:
        raise ValueError(f"priority must be from -100 to 100, not {priority}.")
    return priority


def _due(delay: Any, at: Any) -> int:
    """The due argument of ENQUEUE: epoch ms for ``at``, minus the delay in ms for ``delay``."""
    if at is not None:
        if delay is not None:
            raise TypeError("Pass delay or at, not both.")
        if not isinstance(at, datetime) or at.tzinfo is None:
            raise TypeError(f"at must be an aware datetime, not {at!r}.")
        return max(1, round(at.timestamp() * 1000))
    if delay is None:
        return 0
    return -round(_checked_delay(delay) * 1000)


def _checked_delay(delay: Any) -> float:
    if not isinstance(delay, (int, float)) or isinstance(delay, bool):
        raise TypeError(f"delay must be a number of seconds, not {type(delay).__name__}.")
    if math.isnan(delay) or math.isinf(delay) or delay < 0:
        raise ValueError(f"delay must be a finite number of seconds >= 0, not {delay!r}.")
    if delay > MAX_DELAY:  # a due time past that overflows Redis's integer replies
        raise ValueError(f"delay must be at most {MAX_DELAY:.0f} s (100 years), not {delay!r}.")
    return delay


class Queue:
    """A named queue from ``REDISLOCK['QUEUES']``; see the README for the whole API."""

    def __init__(self, name: str, using: str | None = None) -> None:
        queues = conf.QUEUES
        if name not in queues:
            raise ImproperlyConfigured(
                f"Unknown queue {name!r}: add it to REDISLOCK['QUEUES'] (configured: "
                f"{', '.join(sorted(queues)) or 'none'})."
            )
        options = queues[name]
        self.name = name
        self.using = using
        self.lease = float(options["LEASE"])
        self.max_attempts = int(options["MAX_ATTEMPTS"])
        self.retry_backoff = float(options["RETRY_BACKOFF"])
        self.result_ttl = float(options["RESULT_TTL"])
        self.base = f"{conf.KEY_PREFIX}:{{Q:{name}}}:"
        self.client = get_redis(using)

    def __repr__(self) -> str:
        return f"<Queue {self.name!r}>"

    def key(self, suffix: str) -> str:
        return self.base + suffix

    def _run(self, script: Any, *args: Any) -> Any:
        # Every key a queue script touches shares the queue's hash tag; the first names the
        # slot for Redis Cluster.
        return run_script(self.client, script, (self.base + "ready",), (self.base, *args))

    # --- producing ---------------------------------------------------------------------

    def enqueue(
        self,
        task: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        job_id: str | None = None,
        delay: float | None = None,
        at: datetime | None = None,
        priority: int = 0,
        replace: bool = False,
        meta: Mapping[str, Any] | None = None,
    ) -> Job:
        """Add a job; with ``job_id`` already pending, keep that one (or ``replace=True``).
        Returns the job as queued (``.score`` is its due time in epoch ms). ``meta``: JSON
        kept with the job, for the code that enqueues and reads it (not passed to the task)."""
        spec = {"task": task, "args": args, "kwargs": kwargs or {}, "job_id": job_id,
                "delay": delay, "at": at, "priority": priority, "meta": meta}  # fmt: skip
        return self.enqueue_many([spec], replace=replace)[0]

    def enqueue_many(
        self, jobs: Iterable[Mapping[str, Any]], *, replace: bool = False
    ) -> list[Job]:
        """Add many jobs, each a dict of ``enqueue``'s arguments: all are checked before any
        is written, then sent in atomic batches of ``MAX_BATCH`` (one round trip each)."""
        return self._enqueue(jobs, replace, "", 0)

    def enqueue_tick(self, entry: str, tick_ms: int, job: Mapping[str, Any]) -> Job | None:
        """Enqueue ``job`` for a SCHEDULE entry's tick, unless that tick (or a later one) was
        already enqueued for it: then None."""
        made = self._enqueue([job], False, entry, tick_ms)
        return made[0] if made else None

    def _enqueue(
        self, jobs: Iterable[Mapping[str, Any]], replace: bool, entry: str, tick_ms: int
    ) -> list[Job]:
        flat: list[Any] = []
        made: list[tuple[str, str, Any, Any, int, Any]] = []
        fresh = "1"  # every id generated here: ENQUEUE need not look any up
        jobs = jobs if isinstance(jobs, (list, tuple)) else list(jobs)
        ids = _new_ids(len(jobs))
        for spec in jobs:
            if not spec.keys() <= _JOB_ARGUMENTS:
                unknown = ", ".join(sorted(set(spec) - _JOB_ARGUMENTS))
                raise TypeError(f"Unknown job argument(s): {unknown}.")
            task, args, kwargs = spec.get("task"), spec.get("args", ()), spec.get("kwargs") or {}
            encoded = _encoded(task, args, kwargs)
            job_id = spec.get("job_id")
            if job_id is None:
                job_id = next(ids)
            else:
                job_id, fresh = _job_id(job_id), "0"
            priority = _priority(spec.get("priority", 0))
            meta = spec.get("meta")
            due = _due(spec.get("delay"), spec.get("at"))
            flat += [job_id, *encoded, _meta(meta), priority, due]
            made.append((job_id, encoded[0], args, kwargs, priority, meta))
        reply: list[Any] = []
        for start in range(0, len(made), MAX_BATCH):
            batch = flat[7 * start : 7 * (start + MAX_BATCH)]
            answer = self._run(ENQUEUE, "1" if replace else "0", entry, tick_ms, fresh, *batch)
            if not answer:  # the tick was already claimed
                return []
            reply += answer
        return [
            Job(job_id, self.name, task, list(args), dict(kwargs), priority,
                state=_STATE_NAMES[_text(reply[4 * i + 2])], score=int(reply[4 * i + 1]),
                enqueued=int(reply[4 * i + 3]), meta=dict(meta or {}))
            for i, (job_id, task, args, kwargs, priority, meta) in enumerate(made)
        ]  # fmt: skip

    def cancel(self, job_id: str, score: int | None = None) -> bool:
        """Delete a ready or scheduled job; with ``score``, only if still due at that time."""
        return bool(self._run(CANCEL, job_id, "" if score is None else int(score), "rs"))

    # --- consuming ---------------------------------------------------------------------

    def pop(self, count: int = 1, lease: float | None = None, *, worker: str = "") -> list[Job]:
        """Lease up to ``count`` ready jobs (highest priority first). ``ack``, ``retry`` or
        ``fail`` each; a job whose lease runs out is delivered again."""
        return self.pop_and_wait(count, lease, worker=worker)[0]

    def pop_and_wait(
        self, count: int, lease: float | None = None, *, worker: str = ""
    ) -> tuple[list[Job], float | None]:
        """``pop``, and the seconds until the next scheduled job or lease expiry (0 when
        more are ready, None when nothing is pending)."""
        jobs, wait, _ = self.fetch(count, lease, worker=worker)
        return jobs, wait

    def fetch(
        self,
        count: int,
        lease: float | None = None,
        *,
        worker: str = "",
        finished: Sequence[tuple[Job, str | None]] = (),
        started: Sequence[Job] = (),
        charge: bool = True,
    ) -> tuple[list[Job], float | None, list[str]]:
        """``pop_and_wait`` after acknowledging ``finished`` (jobs with their result, as
        ``ack`` takes them) and charging the attempt of ``started`` (jobs leased ahead that
        start now), in one round trip per ``MAX_BATCH`` jobs; also returns the ids of the
        finished and started jobs whose lease had run out. ``charge=False`` leases jobs
        ahead: their attempt counts only once they are started."""
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"count must be an int >= 0, not {count!r}.")
        jobs: list[Job] = []
        lost: list[str] = []
        while True:
            take = min(count - len(jobs), MAX_BATCH)
            args = self.fetch_args(take, lease, worker, finished[:MAX_BATCH],
                                   started[:MAX_BATCH], charge)  # fmt: skip
            found, wait, gone = self.fetched(self._run(POP, *args), worker)
            finished, started = finished[MAX_BATCH:], started[MAX_BATCH:]
            jobs += found
            lost += gone
            more = len(found) == take and len(jobs) < count
            if not (more or finished or started):
                return jobs, wait, lost

    def fetch_args(
        self,
        count: int,
        lease: float | None,
        worker: str,
        finished: Sequence[tuple[Job, str | None]],
        started: Sequence[Job] = (),
        charge: bool = True,
    ) -> list[Any]:
        """POP's arguments after the base: at most ``MAX_BATCH`` of each kind."""
        if count > MAX_BATCH:
            raise ValueError(f"One POP takes at most {MAX_BATCH} jobs of each kind.")
        lease_ms = max(1, round((self.lease if lease is None else lease) * 1000))
        worker, ttl, *leases = self.start_args(worker, finished, started)
        return [count, lease_ms, worker, self.max_attempts, ttl, "1" if charge else "0",
                *leases]  # fmt: skip

    def start_args(
        self, worker: str, finished: Sequence[tuple[Job, str | None]], started: Sequence[Job]
    ) -> list[Any]:
        """START's arguments after the base: acknowledge ``finished``, charge ``started``
        (POP ends with the same)."""
        if max(len(finished), len(started)) > MAX_BATCH:
            raise ValueError(f"One START or POP takes at most {MAX_BATCH} jobs of each kind.")
        acks = [v for job, result in finished for v in (job.id, job.lease or "", result or "")]
        starts = [v for job in started for v in (job.id, job.lease or "")]
        return [worker or "-", max(1, round(self.result_ttl * 1000)), len(finished),
                len(started), *acks, *starts]  # fmt: skip

    def fetched(self, reply: Any, worker: str) -> tuple[list[Job], float | None, list[str]]:
        """``fetch``'s value from one POP reply."""
        wait = None if reply[0] < 0 else reply[0] / 1000
        lost = [_text(job_id) for job_id in reply[1]]
        jobs = []
        for i in range(2, len(reply), 10):
            job_id, task, args, kwargs, meta, attempts, priority, due, enqueued, workers = reply[
                i : i + 10
            ]
            attempts = _int(attempts)
            job = Job(_text(job_id), self.name, *_decoded(task, args, kwargs),
                      priority=_int(priority), attempts=attempts, state="running",
                      score=_int(due), enqueued=_int(enqueued),
                      lease=f"{worker or '-'}#{attempts}", worker=worker or None,
                      workers=tuple(_text(workers).split(",")),
                      meta=_decoded_meta(meta))  # fmt: skip
            jobs.append(job)
        return jobs, wait, lost

    def release(self, jobs: Sequence[Job]) -> int:
        """Give back popped jobs that did not start: ready again at the front of their
        priority, their attempt not counted. Returns how many were still leased."""
        given = 0
        for start in range(0, len(jobs), MAX_BATCH):
            pairs = [
                v for job in jobs[start : start + MAX_BATCH] for v in (job.id, job.lease or "")
            ]
            given += int(self._run(RELEASE, *pairs))
        return given

    def ack(self, job: Job, result: str | None = None) -> bool:
        """Finish a popped job; with ``result`` (its return value as JSON text) the job is
        kept, done, for RESULT_TTL. False when its lease had run out (it may run again)."""
        return not self.fetch(0, finished=[(job, result)])[2]

    def retry(self, job: Job, delay: float | None = None, error: str = "") -> bool:
        """Give a popped job back, due again after ``delay`` seconds (default: the backoff)."""
        delay = self.backoff(job) if delay is None else _checked_delay(delay)
        return self._settle(job, round(delay * 1000), error, "", "")

    def fail(self, job: Job, error: str | BaseException, traceback: str = "") -> bool:
        """Record a failure: retried after the backoff, or dead after ``MAX_ATTEMPTS``."""
        text, error_class = _error(error)
        if job.attempts >= self.max_attempts:
            return self.bury(job, error, traceback)
        delay_ms = round(self.backoff(job) * 1000)
        return self._settle(job, delay_ms, text, traceback, error_class)

    def backoff(self, job: Job) -> float:
        """Seconds before a failed job runs again: RETRY_BACKOFF, doubled per attempt."""
        # Capped: many attempts (or a damaged count) must not overflow the due time.
        return min(self.retry_backoff * 2.0 ** min(max(0, job.attempts - 1), 64), MAX_DELAY)

    def bury(self, job: Job, error: str | BaseException, traceback: str = "") -> bool:
        """Send a popped job straight to the dead set (it can never succeed)."""
        text, error_class = _error(error)
        return self._settle(job, -1, text, traceback, error_class)

    def _settle(
        self, job: Job, delay_ms: int, error: str, traceback: str, error_class: str
    ) -> bool:
        traceback = _trimmed(traceback)
        entry = ""
        if error:
            entry = _dumps({"e": error, "c": error_class, "t": traceback, "w": job.worker or ""})
        return bool(self._run(SETTLE, job.id, job.lease or "", delay_ms, error, traceback,
                              error_class, entry, job.worker or "-"))  # fmt: skip

    def renew(self, jobs: Sequence[Job], lease: float | None = None) -> list[str]:
        """Extend the leases of popped jobs; returns the ids whose lease was already lost."""
        if not jobs:
            return []
        lease_ms = max(1, round((self.lease if lease is None else lease) * 1000))
        pairs = [v for job in jobs for v in (job.id, job.lease or "")]
        return [_text(job_id) for job_id in self._run(RENEW, lease_ms, *pairs)]

    # --- looking and operating ---------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Jobs per state: ready, scheduled, running, dead."""
        pipe = self.client.pipeline(transaction=False)
        for suffix in STATES.values():
            pipe.zcard(self.base + suffix)
        return dict(zip(STATES, pipe.execute(), strict=True))

    def oldest_ready_age(self) -> float | None:
        """Seconds the longest-waiting ready job has been due (None: nothing is ready)."""
        age = int(self._run(READY_AGE))
        return None if age < 0 else age / 1000

    def jobs(self, state: str, offset: int = 0, limit: int = 50) -> list[Job]:
        """One page of jobs in ``state``, in the order they will run (dead: oldest first)."""
        for name, value in (("offset", offset), ("limit", limit)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, not {value!r}.")
        if limit > MAX_BATCH:
            raise ValueError(f"limit must be at most {MAX_BATCH}, not {limit}.")
        if limit == 0:
            return []
        reply = self._run(PAGE, self._set(state), offset, limit, "0")
        jobs, i = [], 0
        while i < len(reply):
            job_id, n = _text(reply[i]), int(reply[i + 1])
            if n < 0:  # not a hash: POP sets such a key aside when it meets it
                jobs.append(Job(job_id, self.name, "", state="unknown",
                                error="The job in Redis is not a hash."))  # fmt: skip
                i += 2
                continue
            fields = {_text(reply[j]): reply[j + 1] for j in range(i + 2, i + 2 + n, 2)}
            i += 2 + n
            jobs.append(self._from_hash(job_id, fields))
        return jobs

    def peek(self, count: int = 1) -> list[Job]:
        """The next ready jobs, not removed."""
        return self.jobs("ready", 0, count)

    def get(self, job_id: str) -> Job:
        """One job by id, in whatever state (done: kept for RESULT_TTL after it ran);
        JobNotFound if it is not in the queue."""
        if not isinstance(job_id, str):
            raise TypeError(f"job_id must be a str, not {type(job_id).__name__}.")
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.base + "j:" + job_id)
        pipe.hgetall(self.base + "result:" + job_id)
        for fields in pipe.execute(raise_on_error=False):  # a pending job first
            if isinstance(fields, Exception):  # not a hash
                return Job(job_id, self.name, "", state="unknown",
                           error="The job in Redis is not a hash.")  # fmt: skip
            if fields:
                return self._from_hash(job_id, {_text(k): v for k, v in fields.items()})
        raise JobNotFound(f"No job {job_id!r} in queue {self.name!r}.")

    def _from_hash(self, job_id: str, fields: dict[str, Any]) -> Job:
        def text(name: str) -> str:
            return _text(fields.get(name, b""))

        decoded = _decoded(fields.get("t"), fields.get("ar"), fields.get("kw"))
        return Job(job_id, self.name, *decoded, priority=_int(fields.get("pr")),
                   attempts=_int(fields.get("a")), state=_STATE_NAMES.get(text("s"), "unknown"),
                   score=_int(fields.get("sc")), enqueued=_int(fields.get("e")),
                   started=_int(fields.get("st")), finished=_int(fields.get("f")),
                   lease=text("l") or None, worker=text("w") or None,
                   workers=tuple(w for w in text("ws").split(",") if w),
                   error=text("err"), error_class=text("ec"), traceback=text("tb"),
                   result=text("v") if "v" in fields else None,
                   meta=_decoded_meta(fields.get("m")),
                   errors=_attempt_errors(text("eh")))  # fmt: skip

    def requeue(self, job_id: str) -> bool:
        """Run a scheduled or dead job now (a dead one with its attempts reset)."""
        return bool(self._run(REQUEUE, job_id))

    def delete(self, job_id: str) -> bool:
        """Delete a ready, scheduled or dead job; False when it is missing or running."""
        return bool(self._run(CANCEL, job_id, "", "rsd"))

    def purge(self, state: str, batch: int = 1000) -> int:
        """Delete every job in ``state``, ``batch`` per atomic step; returns how many."""
        if not isinstance(batch, int) or isinstance(batch, bool) or not 1 <= batch <= MAX_BATCH:
            raise ValueError(f"batch must be an int from 1 to {MAX_BATCH}, not {batch!r}.")
        state_set = self._set(state)
        removed = 0
        while True:
            n = int(self._run(PAGE, state_set, 0, batch, "1"))
            removed += n
            if n < batch:
                return removed

    @staticmethod
    def _set(state: str) -> str:
        if state not in STATES:
            raise ValueError(f"state must be one of {', '.join(STATES)}, not {state!r}.")
        return STATES[state]


def get_queue(name: str = "default", using: str | None = None) -> Queue:
    """The queue ``name`` from ``REDISLOCK['QUEUES']``."""
    if not isinstance(name, str):
        raise TypeError(f"Queue name must be a str, not {type(name).__name__}.")
    return Queue(name, using)
