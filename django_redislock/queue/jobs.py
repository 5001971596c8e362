"""A job as the queue stores it: its states, the fields of its hash, the ``Job`` read back.
Its hash decoded, and the JSON it keeps, are ``job_codec``'s; a ``Job`` made in a hurry (as
a worker leases one, as ``enqueue`` returns one) is ``job_factories``'s; the scalars of what
Redis replies are ``replies``'."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from typing import Any


class JobState(str, Enum):
    """A job's state, with the letter its hash stores (field ``s``). A member equals, and
    hashes as, its name: ``JobState.READY == "ready"``."""

    READY = "ready", "r"
    SCHEDULED = "scheduled", "s"
    RUNNING = "running", "x"
    PARKED = "parked", "p"  # held back by its concurrency key's limit (``limit_lua``)
    WAITING = "waiting", "w"  # for its dependencies to end (``depend_lua``)
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
LISTED_STATES = (
    JobState.READY,
    JobState.SCHEDULED,
    JobState.RUNNING,
    JobState.DEAD,
    JobState.WAITING,
)


class Field:
    """The fields of a job's hash. Short names keep it in Redis's compact encoding."""

    TASK = "t"  # dotted path
    ARGS = "ar"  # JSON list
    KWARGS = "kw"  # JSON object; absent: none
    META = "m"  # JSON object; absent: none
    PRIORITY = "pr"  # absent: 0
    ATTEMPTS = "a"  # attempts started; absent: 0
    FAILURES = "fl"  # attempts failed (MAX_ATTEMPTS counts these; RetryLater is none); absent: 0
    REASON = "rn"  # why the job runs next: "retry <failures>", "RetryLater"; absent: first run
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
    NEXT_DEBOUNCED = "ndb"  # the debounce (ms) that set its due time; absent: not debounced
    CANCEL = "cx"  # a running job asked to stop: "who asked, epoch ms"
    # Its task's max_attempts, noted by the worker as it starts a job of none of its own
    # (enqueued by path), so that a lapse of its lease is judged by it (POP).
    MAX_ATTEMPTS = "ma"
    # Enqueue-decided options (``job_options``; ``expires`` lives in the metadata, a
    # ``unique_for`` window in its marker key):
    DEBOUNCED = "dbn"  # the debounce (ms) that set its due time; absent: not debounced
    # Keyed limits (``limit_lua``): the key whose permit a leased job holds; a parked job's
    # member of the parked set.
    PERMIT = "ck"
    PARKED = "pk"
    STAMP = "rs"  # a job leased ahead: its rate start as noted at its lease (moved at START)
    # Dependencies (``depend_lua``): the jobs this one waits for, as refs ("<id>" in its own
    # queue, "<queue>\t<id>" in another), newline-separated, in ``depends_on`` order; how
    # many have not ended yet; "f" when it runs once they finished however they ended
    # (absent: once they succeeded). Per dependency a field "@<ref>": "w" not ended yet, then
    # the state it ended in (done or dead).
    DEPENDS = "dp"
    WAITING_ON = "dw"
    RUN_WHEN = "rw"
    # The jobs waiting for this one, as refs, newline-separated; how many ``join`` calls
    # wait for it to end.
    DEPENDANTS = "dn"
    JOINED = "jw"
    # What a running job published of its progress (``TaskContext.save_metadata``,
    # ``set_progress``): a JSON object; "<done>/<total>".
    METADATA = "md"
    PROGRESS = "pg"

    @classmethod
    def names(cls) -> dict[str, str]:
        """Each field's Python name (lower case) and stored name."""
        return {k.lower(): v for k, v in vars(cls).items() if k.isupper()}


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
    failures: int = 0  # attempts failed (``attempts`` counts those started)
    reason: str = ""  # why it runs next: "retry <n>", "RetryLater" ("": its first run)
    depends_on: tuple[str, ...] = ()  # refs of the jobs it waits for ("queue\tid" elsewhere)
    dependants: tuple[str, ...] = ()  # refs of the jobs waiting for it
    run_when: str = "succeeded"  # or "finished": when its dependencies let it run
    metadata: dict[str, Any] = field(default_factory=dict)  # published while it ran
    progress: tuple[int, int] | None = None  # (done, total), published while it ran

    @property
    def due_at(self) -> datetime:
        return datetime.fromtimestamp(self.score / 1000, tz=timezone.utc)

    @property
    def enqueued_at(self) -> datetime:
        return datetime.fromtimestamp(self.enqueued / 1000, tz=timezone.utc)
