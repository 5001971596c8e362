"""System checks for the ``REDISLOCK`` setting: every mistake is reported by ``manage.py
check`` with an id and a hint, not discovered at request time."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error

from .conf import DEFAULTS, ON_REDIS_ERROR_CHOICES, QUEUE_DEFAULTS, user_settings

URL_SCHEMES = ("redis://", "rediss://", "unix://")
PREFIX_RE = re.compile(r"^[A-Za-z0-9_.:\-]{1,64}$")
QUEUE_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


def _error(msg: str, hint: str, number: int) -> Error:
    return Error(msg, hint=hint, id=f"django_redislock.E{number:03d}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(
    key: str,
    *,
    minimum: float,
    inclusive: bool,
    allow_inf: bool = False,
    maximum: float = math.inf,
) -> Callable[[Any], Iterable[Error]]:
    def check(value: Any) -> Iterable[Error]:
        if not _is_number(value) or math.isnan(value):
            yield _error(
                f"REDISLOCK['{key}'] must be a number of seconds, not {value!r}.",
                f"Set REDISLOCK['{key}'] to a number such as {DEFAULTS[key]!r}.",
                3,
            )
        elif (
            (value < minimum if inclusive else value <= minimum)
            or (math.isinf(value) and not allow_inf)
            or value > maximum
        ):
            bound = ">=" if inclusive else ">"
            yield _error(
                f"REDISLOCK['{key}'] is {value!r}; it must be {bound} {minimum}"
                + (f" and <= {maximum}" if maximum < math.inf else "")
                + ("" if allow_inf or maximum < math.inf else " and finite")
                + ".",
                f"Use a value such as {DEFAULTS[key]!r}.",
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
            if option not in QUEUE_DEFAULTS:
                yield _error(
                    f"{where} is not a known queue option.",
                    f"Known options: {', '.join(QUEUE_DEFAULTS)}.",
                    9,
                )
            elif not _is_number(option_value) or not 0 < option_value < math.inf:
                yield _error(
                    f"{where} is {option_value!r}; it must be a positive finite number.",
                    f"The default is {QUEUE_DEFAULTS[option]!r}.",
                    9,
                )
            elif option == "MAX_ATTEMPTS" and not isinstance(option_value, int):
                yield _error(f"{where} must be a whole number.", "For example 3.", 9)


def _check_schedule(value: Any) -> Iterable[Error]:
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        yield _error(
            "REDISLOCK['SCHEDULE'] must be a dict of entry name to a dict of options.",
            "For example {'sweep': {'task': 'shop.tasks.sweep', 'every': 60}}.",
            12,
        )
        return
    from .schedule import Entry

    raw_queues = user_settings().get("QUEUES", DEFAULTS["QUEUES"])
    queues = raw_queues if isinstance(raw_queues, dict) else {}
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
            yield _error(
                f"{where}: {exc}.",
                "Options: task (a @task path), every (seconds) or cron, and optionally args, "
                "kwargs, queue, priority, catch_up.",
                12,
            )
            continue
        if entry.queue not in queues:
            yield _error(
                f"{where} names the queue {entry.queue!r}, which is not in REDISLOCK['QUEUES'].",
                f"Add {entry.queue!r} to REDISLOCK['QUEUES'] or set 'queue' to one of "
                f"{', '.join(map(repr, sorted(queues))) or 'none'}.",
                12,
            )


VALIDATORS: dict[str, Callable[[Any], Iterable[Error]]] = {
    "CACHE": _type("CACHE", (str,), "the alias of a django-redis cache in CACHES"),
    "URL": _check_url,
    "CLUSTER": _type("CLUSTER", (bool,), "True or False"),
    "KEY_PREFIX": _check_prefix,
    "LOCK_TTL": _number("LOCK_TTL", minimum=0, inclusive=False),
    "LOCK_TIMEOUT": _number("LOCK_TIMEOUT", minimum=0, inclusive=True, allow_inf=True),
    "LOCK_RETRY_DELAY": _number("LOCK_RETRY_DELAY", minimum=0, inclusive=False),
    "REDLOCK_NODES": _check_nodes,
    "BUSY_STATUS": _check_status,
    "ON_REDIS_ERROR": _check_on_error,
    "QUEUES": _check_queues,
    "SCHEDULE": _check_schedule,
    "SPIN_WAIT": _number("SPIN_WAIT", minimum=0, inclusive=True, maximum=0.01),
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
    if alias not in caches:
        yield _error(
            f"REDISLOCK['CACHE'] names the cache {alias!r}, which is not in CACHES.",
            "Name a django-redis cache alias from CACHES, or set REDISLOCK['URL'].",
            5,
        )
    elif not str(caches[alias].get("BACKEND", "")).startswith("django_redis."):
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
