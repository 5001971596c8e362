"""System checks for the ``REDISLOCK`` setting: every mistake is reported by ``manage.py
check`` with an id and a hint, not discovered at request time."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error

from .conf import DEFAULTS, ON_REDIS_ERROR_CHOICES, QUEUE_DEFAULTS, conf, user_settings
from .durability import redis_durability_warnings, unverified

URL_SCHEMES = ("redis://", "rediss://", "unix://")
PREFIX_RE = re.compile(r"^[A-Za-z0-9_.:\-]{1,64}$")
QUEUE_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


def _error(msg: str, hint: str, number: int) -> Error:
    return Error(msg, hint=hint, id=f"django_redislock.E{number:03d}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# Durations beyond a year are a typo (or milliseconds written as seconds); a year of
# seconds is also far inside what Redis accepts as an expiry.
YEAR = 365 * 86400.0


@dataclass(frozen=True)
class Bounds:
    """The sane range of a number setting; ``minimum`` is excluded when ``above``."""

    minimum: float
    maximum: float = YEAR
    above: bool = False
    allow_inf: bool = False
    whole: bool = False

    def describe(self) -> str:
        low = f"{'>' if self.above else '>='} {self.minimum:g}"
        high = " or inf" if self.allow_inf else ""
        kind = "a whole number" if self.whole else "a number"
        top = "31536000 (a year)" if self.maximum == YEAR else f"{self.maximum:g}"
        return f"{kind} {low} and <= {top}{high}"

    def is_number(self, value: Any) -> bool:
        """A real number (not a bool, not NaN), whole when ``whole``."""
        if not _is_number(value) or (self.whole and not isinstance(value, int)):
            return False
        return isinstance(value, int) or not math.isnan(value)

    def contains(self, value: Any) -> bool:
        """``value`` (a real number) lies in range. An int too large for a float is out:
        the code that reads the setting would overflow converting it."""
        try:
            number = float(value)
        except OverflowError:
            return False
        if math.isinf(number) and number > 0 and self.allow_inf:
            return True
        low_ok = number > self.minimum if self.above else number >= self.minimum
        return low_ok and number <= self.maximum


def _number(key: str, bounds: Bounds) -> Callable[[Any], Iterable[Error]]:
    def check(value: Any) -> Iterable[Error]:
        if not bounds.is_number(value):
            yield _error(
                f"REDISLOCK['{key}'] must be a number of seconds, not {_short(value)}.",
                f"Set REDISLOCK['{key}'] to {bounds.describe()}, such as {DEFAULTS[key]!r}.",
                3,
            )
        elif not bounds.contains(value):
            yield _error(
                f"REDISLOCK['{key}'] is {_short(value)}; it must be {bounds.describe()}.",
                f"Use {bounds.describe()}, such as {DEFAULTS[key]!r}.",
                4,
            )

    return check


def _type(key: str, types: tuple[type, ...], example: str) -> Callable[[Any], Iterable[Error]]:
    def check(value: Any) -> Iterable[Error]:
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            yield _error(
                f"REDISLOCK['{key}'] has the wrong type: {type(value).__name__}.",
                f"Set it to {example}.",
                3,
            )

    return check


def _check_url(value: Any) -> Iterable[Error]:
    if value is None:
        return
    if not isinstance(value, str):
        yield _error(
            f"REDISLOCK['URL'] has the wrong type: {type(value).__name__}.",
            "Set it to a string such as 'redis://localhost:6379/0', or to None.",
            3,
        )
    elif not value.startswith(URL_SCHEMES):
        yield _error(
            f"REDISLOCK['URL'] {value!r} is not a Redis URL.",
            "It must start with redis://, rediss:// or unix://.",
            7,
        )


def _check_prefix(value: Any) -> Iterable[Error]:
    if not isinstance(value, str) or not PREFIX_RE.match(value):
        yield _error(
            f"REDISLOCK['KEY_PREFIX'] {value!r} is not a valid key prefix.",
            "Use 1-64 characters from letters, digits and _ . : - (no braces, no spaces).",
            8,
        )


def _check_status(value: Any) -> Iterable[Error]:
    if not isinstance(value, int) or isinstance(value, bool) or not 400 <= value <= 599:
        yield _error(
            f"REDISLOCK['BUSY_STATUS'] {value!r} is not an HTTP error status.",
            "Use an int from 400 to 599; 409 (Conflict) or 429 (Too Many Requests) fit best.",
            4,
        )


def _check_on_error(value: Any) -> Iterable[Error]:
    if value not in ON_REDIS_ERROR_CHOICES:
        yield _error(
            f"REDISLOCK['ON_REDIS_ERROR'] {value!r} is not a known policy.",
            f"Use one of {', '.join(repr(c) for c in ON_REDIS_ERROR_CHOICES)}.",
            4,
        )


def _check_nodes(value: Any) -> Iterable[Error]:
    if not isinstance(value, (list, tuple)):
        yield _error(
            "REDISLOCK['REDLOCK_NODES'] must be a list.",
            "List cache aliases or redis:// URLs of independent masters.",
            3,
        )
        return
    caches = getattr(settings, "CACHES", {})
    for node in value:
        if not isinstance(node, str) or not (node.startswith(URL_SCHEMES) or node in caches):
            yield _error(
                f"REDISLOCK['REDLOCK_NODES'] entry {node!r} is neither a cache alias nor a "
                "Redis URL.",
                "Each entry must be a key of CACHES or start with redis://, rediss:// or unix://.",
                10,
            )


def _check_queues(value: Any) -> Iterable[Error]:
    if not isinstance(value, dict):
        yield _error(
            "REDISLOCK['QUEUES'] must be a dict of queue name to options.",
            "For example {'default': {'LEASE': 300}}.",
            3,
        )
        return
    for name, options in value.items():
        if not isinstance(name, str) or not QUEUE_NAME_RE.match(name):
            yield _error(
                f"REDISLOCK['QUEUES'] has an invalid queue name {name!r}.",
                "Use 1-64 characters from letters, digits and _ . -",
                9,
            )
            continue
        if not isinstance(options, dict):
            yield _error(
                f"REDISLOCK['QUEUES'][{name!r}] must be a dict of options.",
                f"Known options: {', '.join(QUEUE_DEFAULTS)}.",
                9,
            )
            continue
        for option, option_value in options.items():
            where = f"REDISLOCK['QUEUES'][{name!r}][{option!r}]"
            if option not in QUEUE_BOUNDS:
                yield _error(
                    f"{where} is not a known queue option.",
                    f"Known options: {', '.join(QUEUE_DEFAULTS)}.",
                    9,
                )
                continue
            bounds = QUEUE_BOUNDS[option]
            if not bounds.is_number(option_value) or not bounds.contains(option_value):
                yield _error(
                    f"{where} is {_short(option_value)}; it must be {bounds.describe()}.",
                    f"The default is {QUEUE_DEFAULTS[option]!r}. {QUEUE_BOUNDS_WHY}",
                    9,
                )


# A lease shorter than a second expires while a busy worker still runs the job (then it runs
# twice); a result kept less than a second is gone before anyone reads it.
QUEUE_BOUNDS = {
    "LEASE": Bounds(1),
    "MAX_ATTEMPTS": Bounds(1, maximum=1000, whole=True),
    "RETRY_BACKOFF": Bounds(0, above=True),
    "RESULT_TTL": Bounds(1),
}
QUEUE_BOUNDS_WHY = (
    "LEASE and RESULT_TTL are seconds from 1 to a year, RETRY_BACKOFF seconds above 0, "
    "MAX_ATTEMPTS a whole number from 1 to 1000."
)
assert set(QUEUE_BOUNDS) == set(QUEUE_DEFAULTS)
# Ticks closer than this keep the scheduler doing nothing but Redis round trips.
EVERY_BOUNDS = Bounds(0.1)
SCHEDULE_HINT = (
    "Options: task (the path of a @task in an installed app), every (seconds, 0.1 to a "
    "year) or cron, and optionally args (a JSON list), kwargs (a JSON object), queue, "
    "priority, catch_up."
)


def _check_schedule(value: Any) -> Iterable[Error]:
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        yield _error(
            "REDISLOCK['SCHEDULE'] must be a dict of entry name to a dict of options.",
            "For example {'sweep': {'task': 'shop.tasks.sweep', 'every': 60}}.",
            12,
        )
        return
    from .schedule import Entry

    queues = conf.QUEUE_NAMES
    for name, options in value.items():
        where = f"REDISLOCK['SCHEDULE'][{name!r}]"
        if not isinstance(name, str) or not QUEUE_NAME_RE.match(name):
            yield _error(
                f"{where}: an entry name must be 1-64 letters, digits, '_', '.' or '-'.",
                "For example 'sweep-unpaid'.",
                12,
            )
            continue
        try:
            entry = Entry.from_setting(name, options)
        except ValueError as exc:
            yield _error(f"{where}: {exc}.", SCHEDULE_HINT, 12)
            continue
        if entry.every is not None and not EVERY_BOUNDS.contains(entry.every):
            yield _error(
                f"{where}: 'every' is {entry.every:g}; it must be {EVERY_BOUNDS.describe()}.",
                SCHEDULE_HINT,
                12,
            )
        if entry.queue not in queues:
            yield _error(
                f"{where} names the queue {entry.queue!r}, which is not in REDISLOCK['QUEUES'].",
                f"Add {entry.queue!r} to REDISLOCK['QUEUES'] or set 'queue' to one of "
                f"{', '.join(map(repr, queues)) or 'none'}.",
                12,
            )
        problem = _task_problem(entry.task)
        if problem:
            yield _error(f"{where}: {problem}", SCHEDULE_HINT, 12)


def _task_problem(path: str) -> str | None:
    """Why the worker would refuse to run ``path``, or None when it is a @task of an
    installed app."""
    from django.core.exceptions import ImproperlyConfigured

    try:
        # Lazily: on Django 5.2 without the Tasks backport, importing tasks raises.
        from .tasks import InvalidTask, resolve_task
    except ImproperlyConfigured as exc:
        return f"its task cannot run: {exc}"
    try:
        resolve_task(path)
    except InvalidTask as exc:
        return str(exc)
    except Exception as exc:  # the task's module itself fails to import
        return f"importing {path!r} raised {type(exc).__name__}: {exc}"
    return None


VALIDATORS: dict[str, Callable[[Any], Iterable[Error]]] = {
    "CACHE": _type("CACHE", (str,), "the alias of a django-redis cache in CACHES"),
    "URL": _check_url,
    "CLUSTER": _type("CLUSTER", (bool,), "True or False"),
    "KEY_PREFIX": _check_prefix,
    # A TTL under 10 ms expires during the round trips that take and release the lock.
    "LOCK_TTL": _number("LOCK_TTL", Bounds(0.01)),
    "LOCK_TIMEOUT": _number("LOCK_TIMEOUT", Bounds(0, allow_inf=True)),
    # A waiter blocks on Redis for up to this long at a time: under 1 ms it only spins.
    "LOCK_RETRY_DELAY": _number("LOCK_RETRY_DELAY", Bounds(0.001, maximum=60)),
    "REDLOCK_NODES": _check_nodes,
    "BUSY_STATUS": _check_status,
    "ON_REDIS_ERROR": _check_on_error,
    "QUEUES": _check_queues,
    "SCHEDULE": _check_schedule,
    "SPIN_WAIT": _number("SPIN_WAIT", Bounds(0, maximum=0.01)),
}
assert set(VALIDATORS) == set(DEFAULTS)


def _check_connection(raw: dict[str, Any]) -> Iterable[Error]:
    if raw.get("URL") is not None:
        return
    if raw.get("CLUSTER"):
        yield _error(
            "REDISLOCK['CLUSTER'] is True but REDISLOCK['URL'] is not set.",
            "Set REDISLOCK['URL'] to the redis:// URL of one node of the cluster.",
            11,
        )
    alias = raw.get("CACHE", DEFAULTS["CACHE"])
    if not isinstance(alias, str):
        return
    caches = getattr(settings, "CACHES", {})
    if not isinstance(caches, dict):
        return  # Django's own checks report a malformed CACHES
    if alias not in caches:
        yield _error(
            f"REDISLOCK['CACHE'] names the cache {alias!r}, which is not in CACHES.",
            "Name a django-redis cache alias from CACHES, or set REDISLOCK['URL'].",
            5,
        )
    elif not isinstance(caches[alias], dict) or not str(
        caches[alias].get("BACKEND", "")
    ).startswith("django_redis."):
        yield _error(
            f"The cache {alias!r} named by REDISLOCK['CACHE'] is not a django-redis cache.",
            "Use a cache with BACKEND 'django_redis.cache.RedisCache', or set REDISLOCK['URL'].",
            6,
        )


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    raw = user_settings()
    if not isinstance(raw, dict):
        return [
            _error(
                f"REDISLOCK must be a dict, not {type(raw).__name__}.",
                "Set REDISLOCK = {'URL': 'redis://localhost:6379/0'} or leave it out.",
                1,
            )
        ]
    errors: list[CheckMessage] = []
    for key, value in raw.items():
        if key not in VALIDATORS:
            errors.append(
                _error(
                    f"REDISLOCK has an unknown key {key!r}.",
                    f"Known keys: {', '.join(DEFAULTS)}.",
                    2,
                )
            )
        else:
            errors.extend(VALIDATORS[key](value))
    errors.extend(_check_connection(raw))
    return errors


def check_redis_durability(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The deploy check (``manage.py check --deploy``): warn when the Redis behind locks and
    queues may evict keys or lose them on restart."""
    if check_settings():
        return []  # those errors come first: the connection they describe is not to be trusted
    from .connection import get_redis

    try:
        client = get_redis()
    except Exception as exc:
        return [unverified("the Redis of REDISLOCK", f"cannot connect ({exc})")]
    return redis_durability_warnings(client)


__all__ = ["check_redis_durability", "check_settings", "redis_durability_warnings"]
