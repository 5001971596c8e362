"""The codec between a job and what its hash holds: the JSON of its arguments, metadata and
error history (checked on the way in, never trusted on the way out), a hash read back as a
``Job``, and an error as it is stored."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .jobs import AttemptError, Field, Job, JobState
from .replies import number, text

MAX_TRACEBACK = 16000  # characters of a traceback kept (its end: where it was raised)


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
        failures=number(fields.get(Field.FAILURES)),
        reason=get(Field.REASON),
        depends_on=tuple(ref for ref in get(Field.DEPENDS).split("\n") if ref),
        dependants=tuple(ref for ref in get(Field.DEPENDANTS).split("\n") if ref),
        run_when="finished" if get(Field.RUN_WHEN) == "f" else "succeeded",
        metadata=decoded_metadata(fields.get(Field.METADATA)),
        progress=decoded_progress(fields.get(Field.PROGRESS)),
    )


def decoded_metadata(value: Any) -> dict[str, Any]:
    """What a running job published (``save_metadata``): a dict, {} when none or unreadable."""
    if not value:
        return {}
    try:
        found = json.loads(value)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def decoded_progress(value: Any) -> tuple[int, int] | None:
    """(done, total) as ``set_progress`` stored it ("<done>/<total>"), None when none."""
    done, _, total = text(value or "").partition("/")
    if not (done.isdigit() and total.isdigit()):
        return None
    return int(done), int(total)


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
