"""``get_queue(name)``: a reliable delayed job queue on Redis (at-least-once delivery)."""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from .conf import conf
from .connection import get_redis, run_script
from .exceptions import JobNotFound
from .queue_scripts import (
    ACK,
    CANCEL,
    ENQUEUE,
    PAGE,
    POP,
    READY_AGE,
    RENEW,
    REQUEUE,
    SETTLE,
)

STATES = {"ready": "ready", "scheduled": "sched", "running": "run", "dead": "dead"}
_STATE_NAMES = {"r": "ready", "s": "scheduled", "x": "running", "d": "dead", "k": "done"}
MAX_JOB_ID = 200


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


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
    return f"{cls.__name__}: {error}", f"{cls.__module__}.{cls.__qualname__}"


def _payload(task: Any, args: Any, kwargs: Any) -> str:
    if not isinstance(task, str) or not task:
        raise TypeError(f"task must be a non-empty dotted path (str), not {task!r}.")
    if not isinstance(args, (list, tuple)):
        raise TypeError(f"args must be a list, not {type(args).__name__}.")
    if not isinstance(kwargs, Mapping):
        raise TypeError(f"kwargs must be a dict, not {type(kwargs).__name__}.")
    try:
        return json.dumps({"task": task, "args": list(args), "kwargs": dict(kwargs)})
    except (TypeError, ValueError) as exc:
        raise TypeError(f"args and kwargs of a job must be JSON-serializable ({exc}).") from exc


def _job_id(job_id: Any) -> str:
    if job_id is None:
        return uuid.uuid4().hex
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
    if not isinstance(delay, (int, float)) or isinstance(delay, bool):
        raise TypeError(f"delay must be a number of seconds, not {type(delay).__name__}.")
    if math.isnan(delay) or math.isinf(delay) or delay < 0:
        raise ValueError(f"delay must be a finite number of seconds >= 0, not {delay!r}.")
    return -round(delay * 1000)


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
    ) -> Job:
        """Add a job; with ``job_id`` already pending, keep that one (or ``replace=True``).
        Returns the job as queued (``.score`` is its due time in epoch ms)."""
        spec = {"task": task, "args": args, "kwargs": kwargs or {}, "job_id": job_id,
                "delay": delay, "at": at, "priority": priority}  # fmt: skip
        return self.enqueue_many([spec], replace=replace)[0]

    def enqueue_many(
        self, jobs: Iterable[Mapping[str, Any]], *, replace: bool = False
    ) -> list[Job]:
        """Add many jobs in one round trip; each is a dict of ``enqueue``'s arguments."""
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
        made: list[Job] = []
        for spec in jobs:
            unknown = set(spec) - {"task", "args", "kwargs", "job_id", "delay", "at", "priority"}
            if unknown:
                raise TypeError(f"Unknown job argument(s): {', '.join(sorted(unknown))}.")
            payload = _payload(spec.get("task"), spec.get("args", ()), spec.get("kwargs") or {})
            job_id = _job_id(spec.get("job_id"))
            priority = _priority(spec.get("priority", 0))
            flat += [job_id, payload, priority, _due(spec.get("delay"), spec.get("at"))]
            made.append(self._job(job_id, json.loads(payload), priority=priority))
        if not made:
            return []
        reply = self._run(ENQUEUE, "1" if replace else "0", entry, tick_ms, *flat)
        if not reply:  # the tick was already claimed
            return []
        return [
            dataclasses.replace(
                job, score=int(reply[3 * i + 1]), state=_STATE_NAMES[_text(reply[3 * i + 2])]
            )
            for i, job in enumerate(made)
        ]

    def _job(self, job_id: str, payload: dict[str, Any], **extra: Any) -> Job:
        return Job(job_id, self.name, payload.get("task", ""), payload.get("args", []),
                   payload.get("kwargs", {}), **extra)  # fmt: skip

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
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError(f"count must be an int >= 0, not {count!r}.")
        lease_ms = max(1, round((self.lease if lease is None else lease) * 1000))
        reply = self._run(POP, count, lease_ms, worker or "-", self.max_attempts)
        wait = None if reply[0] < 0 else reply[0] / 1000
        jobs = []
        for i in range(1, len(reply), 8):
            job_id, payload, attempts, priority, due, token, enqueued, workers = reply[i : i + 8]
            job = self._loaded(_text(job_id), payload, state="running", attempts=int(attempts),
                               priority=int(priority), score=int(due), lease=_text(token),
                               worker=worker or None, enqueued=int(enqueued or 0),
                               workers=tuple(_text(workers).split(",")))  # fmt: skip
            jobs.append(job)
        return jobs, wait

    def _loaded(self, job_id: str, payload: Any, **extra: Any) -> Job:
        try:
            data = json.loads(payload)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except (TypeError, ValueError, UnicodeDecodeError):
            # Never anything but JSON: a job written by something else is left as text, and
            # the worker sends it to the dead set.
            data = {"task": "", "args": [], "kwargs": {}}
        return self._job(job_id, data, **extra)

    def ack(self, job: Job, result: str | None = None) -> bool:
        """Finish a popped job; with ``result`` (its return value as JSON text) the job is
        kept, done, for RESULT_TTL. False when its lease had run out (it may run again)."""
        ttl_ms = max(1, round(self.result_ttl * 1000))
        keep = "0" if result is None else "1"
        return bool(self._run(ACK, job.id, job.lease or "", keep, result or "", ttl_ms))

    def retry(self, job: Job, delay: float | None = None, error: str = "") -> bool:
        """Give a popped job back, due again after ``delay`` seconds (default: the backoff)."""
        if delay is None:
            delay = self.backoff(job)
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
        return self.retry_backoff * 2.0 ** max(0, job.attempts - 1)

    def bury(self, job: Job, error: str | BaseException, traceback: str = "") -> bool:
        """Send a popped job straight to the dead set (it can never succeed)."""
        text, error_class = _error(error)
        return self._settle(job, -1, text, traceback, error_class)

    def _settle(self, job: Job, delay_ms: int, *error: str) -> bool:
        return bool(self._run(SETTLE, job.id, job.lease or "", delay_ms, *error))

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
        reply = self._run(PAGE, self._set(state), int(offset), int(limit), "0")
        jobs, i = [], 0
        while i < len(reply):
            job_id, n = _text(reply[i]), int(reply[i + 1])
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
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.base + "j:" + job_id)
        pipe.hgetall(self.base + "result:" + job_id)
        for fields in pipe.execute():  # a pending job first: it was enqueued again
            if fields:
                return self._from_hash(job_id, {_text(k): v for k, v in fields.items()})
        raise JobNotFound(f"No job {job_id!r} in queue {self.name!r}.")

    def _from_hash(self, job_id: str, fields: dict[str, Any]) -> Job:
        def text(name: str) -> str:
            return _text(fields.get(name, b""))

        return self._loaded(job_id, fields.get("p", b""), priority=int(text("pr") or 0),
                            attempts=int(text("a") or 0),
                            state=_STATE_NAMES.get(text("s"), "unknown"),
                            score=int(text("sc") or 0), enqueued=int(text("e") or 0),
                            started=int(text("st") or 0), finished=int(text("f") or 0),
                            lease=text("l") or None, worker=text("w") or None,
                            workers=tuple(w for w in text("ws").split(",") if w),
                            error=text("err"), error_class=text("ec"), traceback=text("tb"),
                            result=text("v") if "v" in fields else None)  # fmt: skip

    def requeue(self, job_id: str) -> bool:
        """Run a scheduled or dead job now (a dead one with its attempts reset)."""
        return bool(self._run(REQUEUE, job_id))

    def delete(self, job_id: str) -> bool:
        """Delete a ready, scheduled or dead job; False when it is missing or running."""
        return bool(self._run(CANCEL, job_id, "", "rsd"))

    def purge(self, state: str, batch: int = 1000) -> int:
        """Delete every job in ``state``, ``batch`` per atomic step; returns how many."""
        removed = 0
        while True:
            n = int(self._run(PAGE, self._set(state), 0, batch, "1"))
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
