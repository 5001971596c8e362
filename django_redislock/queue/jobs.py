"""A job as the queue stores it: its states, the fields of its hash, and the codec between a
``Job`` and what Redis holds (checked on the way in, never trusted on the way out)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any

MAX_TRACEBACK = 16000  # characters of a traceback kept (its end: where it was raised)


class JobState(str, Enum):
    """A job's state, with the letter its hash stores (field ``s``). A member equals, and
    hashes as, its name: ``JobState.READY == "ready"``."""

    READY = "ready", "r"
    SCHEDULED = "scheduled", "s"
    RUNNING = "running", "x"
    DEAD = "dead", "d"
    DONE = "done", "k"  # finished, kept for RESULT_TTL with its return value
    UNKNOWN = "unknown", ""  # what Redis holds is not a job's hash

    letter: str

    def __new__(cls, name: str, letter: str) -> JobState:
        state = str.__new__(cls, name)
        state._value_ = name
        state.letter = letter
        return state

    def __format__(self, spec: str) -> str:
        return str.__format__(self.value, spec)

    __str__ = str.__str__
    __hash__ = str.__hash__

    @classmethod
    def of_letter(cls, letter: str) -> JobState:
        return _BY_LETTER.get(letter, cls.UNKNOWN)


_BY_LETTER = {state.letter: state for state in JobState if state.letter}
# The states a pending job is listed in (each has its sorted set), in the admin's order.
LISTED_STATES = (JobState.READY, JobState.SCHEDULED, JobState.RUNNING, JobState.DEAD)


class Field:
    """The fields of a job's hash. Short names keep it in Redis's compact encoding."""

    TASK = "t"  # dotted path
    ARGS = "ar"  # JSON list
    KWARGS = "kw"  # JSON object; absent: none
    META = "m"  # JSON object; absent: none
    PRIORITY = "pr"  # absent: 0
    ATTEMPTS = "a"  # attempts started; absent: 0
    STATE = "s"  # a JobState letter
    DUE = "sc"  # epoch ms
    ENQUEUED = "e"  # epoch ms
    STARTED = "st"  # the last attempt's start, epoch ms
    WORKERS = "ws"  # the worker of each started attempt, comma-separated
    LEASE = "l"  # the lease token while leased
    WORKER = "w"  # the worker holding the lease
    STARTED_LEASE = "sl"  # the lease under which the current attempt was charged
    ERROR = "err"  # the last error
    ERROR_CLASS = "ec"  # its exception class path
    TRACEBACK = "tb"
    ERRORS = "eh"  # every failed attempt's error, one JSON object a line
    FINISHED = "f"  # done or dead, epoch ms
    RESULT = "v"  # a done job's return value, JSON
    # A follow-up run, asked for while the job ran (enqueue with replace=True): the job it
    # becomes once this run ends (absent: none).
    NEXT_TASK = "nt"
    NEXT_ARGS = "na"
    NEXT_KWARGS = "nk"  # "" for none
    NEXT_META = "nm"  # "" for none
    NEXT_PRIORITY = "np"
    NEXT_DUE = "nd"  # epoch ms
    NEXT_ENQUEUED = "ne"  # epoch ms
    CANCEL = "cx"  # a running job asked to stop: "who asked, epoch ms"

    @classmethod
    def names(cls) -> dict[str, str]:
        """Each field's Python name (lower case) and stored name."""
        return {k.lower(): v for k, v in vars(cls).items() if k.isupper()}


_DIGITS = (bytes, str)
_EXACT = 2**53  # integers a float holds exactly


def text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def number(value: Any, default: int = 0) -> int:
    """A number field as read from Redis; ``default`` when absent or not a number."""
    if type(value) is int and -_EXACT < value < _EXACT:  # a script's integer reply
        return value  # (exact through a float too)
    if type(value) in _DIGITS and 0 < len(value) <= 15:  # the usual: an integer's digits
        try:  # (up to 15 characters, int() and int(float()) agree: no rounding)
            return int(value)
        except ValueError:
            pass
    try:
        return int(float(text(value))) if value not in (None, b"", "") else default
    except (TypeError, ValueError, OverflowError):
        return default


@dataclass(frozen=True)
class AttemptError:
    """What one failed attempt of a job raised."""

    error: str  # "ExceptionClass: message"
    error_class: str = ""  # dotted path of the exception class ("" when not an exception)
    traceback: str = ""
    worker: str = ""


@dataclass(frozen=True)
class Job:
    """One job as read from Redis. ``lease`` is set on a job returned by ``pop``; ``state``
    is a ``JobState`` name (done: a finished job kept for RESULT_TTL, with its return value
    as JSON text in ``result``). Times are epoch ms (0: not yet)."""

    id: str
    queue: str
    task: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    attempts: int = 0
    state: str = JobState.READY.value
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


def leased_job(
    job_id: str,
    queue: str,
    task: str,
    args: list[Any],
    kwargs: dict[str, Any],
    priority: int,
    attempts: int,
    score: int,
    enqueued: int,
    lease: str,
    worker: str | None,
    workers: tuple[str, ...],
    meta: dict[str, Any],
) -> Job:
    """``Job(...)`` of a job just leased (running; the other fields their defaults), made
    without a frozen dataclass's one ``object.__setattr__`` per field: its fields are a
    copy of a leased job's defaults, with this job's values put in (a fifth of the time,
    for every job a worker fetches)."""
    fields = _LEASED.copy()
    fields["id"] = job_id
    fields["queue"] = queue
    fields["task"] = task
    fields["args"] = args
    fields["kwargs"] = kwargs
    fields["priority"] = priority
    fields["attempts"] = attempts
    fields["score"] = score
    fields["enqueued"] = enqueued
    fields["lease"] = lease
    fields["worker"] = worker
    fields["workers"] = workers
    fields["meta"] = meta
    job = _new(Job)
    _set(job, "__dict__", fields)
    return job


# Every field of a leased job, in the dataclass's order; those not set by leased_job keep
# these values (immutable ones: the copies share them).
_LEASED: dict[str, Any] = {name: None for name in Job.__dataclass_fields__}
_LEASED.update(
    state=JobState.RUNNING.value,
    started=0,
    finished=0,
    error="",
    error_class="",
    traceback="",
    result=None,
    errors=(),
)
_new, _set = object.__new__, object.__setattr__


def not_a_hash(job_id: str, queue: str) -> Job:
    return Job(
        job_id, queue, "", state=JobState.UNKNOWN.value, error="The job in Redis is not a hash."
    )


def from_hash(job_id: str, queue: str, fields: Mapping[str, Any]) -> Job:
    """A job from its hash as read (field names decoded, values as Redis gave them)."""

    def get(name: str) -> str:
        return text(fields.get(name, b""))

    return Job(
        job_id,
        queue,
        *decoded(fields.get(Field.TASK), fields.get(Field.ARGS), fields.get(Field.KWARGS)),
        priority=number(fields.get(Field.PRIORITY)),
        attempts=number(fields.get(Field.ATTEMPTS)),
        state=JobState.of_letter(get(Field.STATE)).value,
        score=number(fields.get(Field.DUE)),
        enqueued=number(fields.get(Field.ENQUEUED)),
        started=number(fields.get(Field.STARTED)),
        finished=number(fields.get(Field.FINISHED)),
        lease=get(Field.LEASE) or None,
        worker=get(Field.WORKER) or None,
        workers=tuple(w for w in get(Field.WORKERS).split(",") if w),
        error=get(Field.ERROR),
        error_class=get(Field.ERROR_CLASS),
        traceback=get(Field.TRACEBACK),
        result=get(Field.RESULT) if Field.RESULT in fields else None,
        meta=decoded_meta(fields.get(Field.META)),
        errors=_attempt_errors(get(Field.ERRORS)),
    )


def _attempt_errors(history: str) -> tuple[AttemptError, ...]:
    errors = []
    for line in history.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            values = {key: str(entry.get(key, "")) for key in "ectw"}
            errors.append(AttemptError(values["e"], values["c"], values["t"], values["w"]))
    return tuple(errors)


def attempt_error(error: str, error_class: str, traceback: str, worker: str) -> str:
    """One failed attempt as the error history stores it ("" for no error)."""
    return dumps({"e": error, "c": error_class, "t": traceback, "w": worker}) if error else ""


def error_text(error: str | BaseException) -> tuple[str, str]:
    """An error as stored: its text, and its exception class path (when an exception)."""
    if isinstance(error, str):
        return error, ""
    cls = type(error)
    try:
        message = str(error)
    except Exception:  # a task's exception whose __str__ fails: its failure is kept all the same
        message = "<the exception's text could not be made>"
    return f"{cls.__name__}: {message}", f"{cls.__module__}.{cls.__qualname__}"


def trimmed(traceback: str) -> str:
    if len(traceback) <= MAX_TRACEBACK:
        return traceback
    return "...\n" + traceback[-MAX_TRACEBACK:]


dumps = json.JSONEncoder(separators=(",", ":")).encode
# The same JSON for a list or dict of plain scalars (str, int, float, bool, None under str
# keys), without the encoder's per-call set-up or its check for cycles (such a value has
# none): a third of the time, for the arguments of the usual job.
_make: Any = getattr(json.encoder, "c_make_encoder", None)
_scalars = _make and _make(
    None, None, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
)


def dumps_scalars(value: list[Any] | dict[str, Any]) -> str:
    return "".join(_scalars(value, 0)) if _scalars is not None else dumps(value)


def encoded(task: Any, args: Any, kwargs: Any) -> tuple[str, str, str]:
    """A job's task, args and kwargs as stored (JSON; "" for no kwargs)."""
    if not isinstance(task, str) or not task:
        raise TypeError(f"task must be a non-empty dotted path (str), not {task!r}.")
    if not isinstance(args, (list, tuple)):
        raise TypeError(f"args must be a list, not {type(args).__name__}.")
    if not isinstance(kwargs, Mapping):
        raise TypeError(f"kwargs must be a dict, not {type(kwargs).__name__}.")
    try:
        return task, dumps(list(args)), dumps(dict(kwargs)) if kwargs else ""
    except (TypeError, ValueError) as exc:
        raise TypeError(f"args and kwargs of a job must be JSON-serializable ({exc}).") from exc


def encoded_meta(meta: Any) -> str:
    if meta is None or meta == {}:
        return ""
    if not isinstance(meta, Mapping):
        raise TypeError(f"meta must be a dict, not {type(meta).__name__}.")
    try:
        return dumps(dict(meta))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"meta of a job must be JSON-serializable ({exc}).") from exc


def decoded_meta(value: Any) -> dict[str, Any]:
    if not value:
        return {}
    try:
        meta = json.loads(value)
    except (TypeError, ValueError, UnicodeDecodeError):
        return {}
    return meta if isinstance(meta, dict) else {}


_scan: Any = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads(value: Any) -> Any:
    """``json.loads(value)``, without its detour through the encoding's detection and the
    whitespace around: for a value as written here (UTF-8 JSON of a list or an object, no
    space around), the C scanner alone; anything else through json.loads."""
    if type(value) is bytes and value[:1] in b"[{" and len(value) > 1 and value[1]:
        text = value.decode("utf-8", "surrogatepass")  # what json.loads detects then
        try:
            found, end = _scan(text, 0)
            if end == len(text):
                return found
        except StopIteration:
            pass
    return json.loads(value)


def decoded(task: Any, args: Any, kwargs: Any) -> tuple[str, list[Any], dict[str, Any]]:
    """A job's task, args and kwargs as read. Never anything but JSON: a job written by
    something else gets an empty task, and the worker sends it to the dead set."""
    try:
        task, args = text(task), _loads(args)
        kwargs = _loads(kwargs) if kwargs else {}
        if task and isinstance(args, list) and isinstance(kwargs, dict):
            return task, args, kwargs
    except (TypeError, ValueError, UnicodeDecodeError):
        pass
    return "", [], {}
