"""The per-task options (a task's, its ``using()``'s, a job's own): their names, each one
checked (``TypeError``/``ValueError`` naming it), and the ones a job carries in its metadata.

Options the worker decides (``WORKER_OPTIONS``) are kept in a job's metadata under their own
names, as ``time_limit`` already was; ``retry_on`` there is a list of exception class paths.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from importlib import import_module
from typing import Any

from django.utils.module_loading import import_string

from ..ratelimit.rate import parse_rate
from .arguments import MAX_DELAY
from .time_limits import checked_time_limit

WORKER_OPTIONS = ("max_attempts", "retry_backoff", "retry_backoff_max", "retry_on", "time_limit")
ENQUEUE_OPTIONS = ("expires", "unique_for", "unique_by_args", "debounce")
LIMIT_OPTIONS = ("concurrency_key", "concurrency_limit", "rate_key", "rate")  # next issue's
TASK_OPTIONS = WORKER_OPTIONS + ENQUEUE_OPTIONS + LIMIT_OPTIONS
# The worker options a job may carry of its own, besides time_limit (kept in its metadata).
OWN_OPTIONS = ("max_attempts", "retry_backoff", "retry_backoff_max", "retry_on")
OPTION_NAMES = frozenset(TASK_OPTIONS)
MAX_ATTEMPTS = 1000  # as the queue setting allows

ExceptionClasses = tuple[type[BaseException], ...]


def _whole(name: str, value: Any, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be a whole number, not {type(value).__name__}.")
    if not low <= value <= high:
        raise ValueError(f"{name} must be from {low} to {high}, not {value!r}.")
    return value


def checked_seconds(name: str, value: Any, *, zero: bool) -> float:
    """``value`` of option (or field) ``name``: a number of seconds >= 0 (``zero``) or > 0,
    at most a century; TypeError or ValueError naming ``name`` otherwise."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}.")
    low_ok = value >= 0 if zero else value > 0
    if not (low_ok and value <= MAX_DELAY):  # NaN fails too
        least = ">= 0" if zero else "> 0"
        raise ValueError(f"{name} must be {least} and at most a century, not {value!r}.")
    return value


def _key(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{name} must be a non-empty str, not {value!r:.60}.")
    return value


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, not {value!r:.60}.")
    return value


def _rate(name: str, value: Any) -> Any:
    try:
        parse_rate(value)  # as RateLimit reads it; the value is kept as given
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{name}: {exc}") from exc
    return value


def retry_on_classes(value: Any, name: str = "retry_on") -> ExceptionClasses:
    """``value`` (an exception class or its dotted path, or a list or tuple of them) as a
    tuple of exception classes; TypeError or ValueError naming ``name`` and the entry."""
    entries = value if isinstance(value, (list, tuple)) else (value,)
    return tuple(_exception_class(entry, name) for entry in entries)


def _exception_class(entry: Any, name: str) -> type[BaseException]:
    if isinstance(entry, str):
        try:
            entry = imported(entry)
        except ImportError as exc:
            raise ValueError(f"{name}: {entry!r} cannot be imported ({exc}).") from exc
    if not isinstance(entry, type) or not issubclass(entry, BaseException):
        raise TypeError(f"{name}: {entry!r:.60} is not an exception class.")
    class_path(entry, name)  # a class the job could not name is refused now, not at enqueue
    return entry


def imported(path: str) -> Any:
    """What dotted ``path`` names: a module's attribute, or a class nested in one
    (``shop.models.Order.DoesNotExist``); ImportError when it names nothing."""
    try:
        return import_string(path)
    except ImportError as exc:
        parts = path.split(".")
        for cut in range(len(parts) - 2, 0, -1):  # the longest module first
            try:
                found = import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for part in parts[cut:]:
                    found = getattr(found, part)
            except AttributeError:
                break
            return found
        raise exc


def class_path(cls: type[BaseException], name: str = "retry_on") -> str:
    """The dotted path a job keeps for ``cls``: it must import back as ``cls``."""
    path = f"{cls.__module__}.{cls.__qualname__}"
    try:
        found = imported(path)
    except ImportError:
        found = None
    if found is not cls:
        raise ValueError(f"{name}: {path} cannot be imported by that path (a local class?).")
    return path


_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "max_attempts": lambda n, v: _whole(n, v, 1, MAX_ATTEMPTS),
    "retry_backoff": lambda n, v: checked_seconds(n, v, zero=True),
    "retry_backoff_max": lambda n, v: checked_seconds(n, v, zero=True),
    "retry_on": lambda n, v: retry_on_classes(v, n),
    "time_limit": lambda n, v: checked_time_limit(v, n),
    "expires": lambda n, v: checked_seconds(n, v, zero=False),
    "unique_for": lambda n, v: checked_seconds(n, v, zero=False),
    "unique_by_args": _flag,
    "debounce": lambda n, v: checked_seconds(n, v, zero=False),
    "concurrency_key": _key,
    "concurrency_limit": lambda n, v: _whole(n, v, 1, 1_000_000),
    "rate_key": _key,
    "rate": _rate,
}


def checked_option(name: str, value: Any) -> Any:
    """``value`` of option ``name``, checked and normalised (``retry_on``: a tuple of
    classes); None stays None (unset). TypeError for an unknown name."""
    check = _CHECKS.get(name)
    if check is None:
        raise TypeError(f"Unknown task option {name!r} (options: {', '.join(TASK_OPTIONS)}).")
    return None if value is None else check(name, value)


def job_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """A job's own worker options (``enqueue``'s keyword arguments, None for unset) as its
    metadata keeps them: checked, ``retry_on`` as class paths."""
    kept: dict[str, Any] = {}
    for name, value in given.items():
        if value is None:
            continue
        checked = checked_option(name, value)
        kept[name] = [class_path(c) for c in checked] if name == "retry_on" else value
    return kept


def with_options(meta: Any, **given: Any) -> Any:
    """A job's ``meta`` carrying its own worker options (``given``: None for unset); those
    ``meta`` itself holds (a job's meta enqueued again) are checked too. A ``meta`` of the
    wrong type is left for ``encoded_meta`` to refuse."""
    kept = job_options(given)
    if not isinstance(meta, Mapping):
        return {**kept} if kept and meta is None else meta
    for name in OWN_OPTIONS:
        if name in meta and name not in kept:
            try:
                read_option(name, meta[name])
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"meta[{name!r}]: {exc}") from exc
    return {**meta, **kept} if kept else meta


def stored_value(name: str, value: Any) -> Any:
    """A task's option value as a job's metadata keeps it (JSON)."""
    if name == "retry_on" and value is not None:
        return [class_path(c) for c in value]
    return value


@lru_cache(maxsize=256)
def _stored_classes(paths: tuple[str, ...]) -> ExceptionClasses:
    return retry_on_classes(paths)


def read_option(name: str, value: Any) -> Any:
    """An option as read back from a job's metadata, checked as at enqueue: ValueError or
    TypeError naming it when what Redis holds is not a valid value."""
    if name == "retry_on" and isinstance(value, list):
        if not all(isinstance(path, str) for path in value):
            raise TypeError("retry_on must be a list of exception class paths.")
        return _stored_classes(tuple(value))
    if name == "retry_on" and value is not None:
        raise TypeError(f"retry_on must be a list of exception class paths, not {value!r:.60}.")
    return checked_option(name, value)


def option_changes(task: Any, meta: Mapping[str, Any]) -> dict[str, Any]:
    """The options a job's metadata holds that ``task`` (as declared) differs in: with them,
    the task the job was enqueued as. A corrupt value is left out (the worker sets such a
    job aside)."""
    changes: dict[str, Any] = {}
    for name in OPTION_NAMES.intersection(meta):
        try:
            value = read_option(name, meta[name])
        except (TypeError, ValueError):
            continue
        if name == "rate" and isinstance(value, list):  # a tuple, as JSON gave it back
            value = tuple(value)
        if hasattr(task, name) and value != getattr(task, name):
            changes[name] = value
    return changes
