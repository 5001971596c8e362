"""System checks for the ``REDISLOCK`` setting: every mistake is reported by ``manage.py
check`` with an id and a hint, not discovered at request time."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error

from ..conf import DEFAULTS, ON_REDIS_ERROR_CHOICES, user_settings
from ..redis import sentinel
from ..redis.clients import SUPPORTED_CACHES, cache_kind
from ..redis.durability import redis_durability_warnings, unverified
from .metrics import check_metrics, check_metrics_token
from .queues import check_queues, check_schedule
from .tasks_backend import check_tasks_backend
from .values import Bounds, short

URL_SCHEMES = ("redis://", "rediss://", "unix://", *sentinel.SCHEMES)
# Redis Cluster's hash slots: more shards could not land on more masters.
MAX_LOCK_SHARDS = 16384
PREFIX_RE = re.compile(r"^[A-Za-z0-9_.:\-]{1,64}$")


def _number(key: str, bounds: Bounds) -> Callable[[Any], Iterable[Error]]:
    kind = "a whole number" if bounds.whole else "a number of seconds"

    def check(value: Any) -> Iterable[Error]:
        if not bounds.is_number(value):
            yield Error(
                f"REDISLOCK['{key}'] must be {kind}, not {short(value)}.",
                hint=f"Set REDISLOCK['{key}'] to {bounds.describe()}, such as {DEFAULTS[key]!r}.",
                id="django_redislock.E003",
            )
        elif not bounds.contains(value):
            yield Error(
                f"REDISLOCK['{key}'] is {short(value)}; it must be {bounds.describe()}.",
                hint=f"Use {bounds.describe()}, such as {DEFAULTS[key]!r}.",
                id="django_redislock.E004",
            )

    return check


def _type(key: str, types: tuple[type, ...], example: str) -> Callable[[Any], Iterable[Error]]:
    def check(value: Any) -> Iterable[Error]:
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            yield Error(
                f"REDISLOCK['{key}'] has the wrong type: {type(value).__name__}.",
                hint=f"Set it to {example}.",
                id="django_redislock.E003",
            )

    return check


def _check_url(value: Any) -> Iterable[Error]:
    if value is None:
        return
    if not isinstance(value, str):
        yield Error(
            f"REDISLOCK['URL'] has the wrong type: {type(value).__name__}.",
            hint="Set it to a string such as 'redis://localhost:6379/0', or to None.",
            id="django_redislock.E003",
        )
    elif not value.startswith(URL_SCHEMES):
        yield Error(
            f"REDISLOCK['URL'] {value!r} is not a Redis URL.",
            hint="It must start with redis://, rediss://, unix:// or redis+sentinel://.",
            id="django_redislock.E007",
        )
    else:
        yield from _check_sentinel_url("REDISLOCK['URL']", value)


def _check_sentinel_url(where: str, url: str) -> Iterable[Error]:
    if not sentinel.is_sentinel_url(url):
        return
    try:
        sentinel.parse(url)
    except ValueError as exc:
        yield Error(
            f"{where} is a malformed Sentinel URL: {exc}",
            hint="Write it as redis+sentinel://host:port,host:port/service_name/db (the "
            "sentinels, the name they monitor the master under, the database).",
            id="django_redislock.E020",
        )


def _check_prefix(value: Any) -> Iterable[Error]:
    if not isinstance(value, str) or not PREFIX_RE.match(value):
        yield Error(
            f"REDISLOCK['KEY_PREFIX'] {value!r} is not a valid key prefix.",
            hint="Use 1-64 characters from letters, digits and _ . : - (no braces, no spaces).",
            id="django_redislock.E008",
        )


def _check_status(value: Any) -> Iterable[Error]:
    if not isinstance(value, int) or isinstance(value, bool) or not 400 <= value <= 599:
        yield Error(
            f"REDISLOCK['BUSY_STATUS'] {value!r} is not an HTTP error status.",
            hint="Use an int from 400 to 599; 409 (Conflict) or 429 (Too Many Requests) fit best.",
            id="django_redislock.E004",
        )


def _check_on_error(value: Any) -> Iterable[Error]:
    if value not in ON_REDIS_ERROR_CHOICES:
        yield Error(
            f"REDISLOCK['ON_REDIS_ERROR'] {value!r} is not a known policy.",
            hint=f"Use one of {', '.join(repr(c) for c in ON_REDIS_ERROR_CHOICES)}.",
            id="django_redislock.E004",
        )


def _check_nodes(value: Any) -> Iterable[Error]:
    if not isinstance(value, (list, tuple)):
        yield Error(
            "REDISLOCK['REDLOCK_NODES'] must be a list.",
            hint="List cache aliases or redis:// URLs of independent masters.",
            id="django_redislock.E003",
        )
        return
    caches = getattr(settings, "CACHES", {})
    for node in value:
        if not isinstance(node, str) or not (node.startswith(URL_SCHEMES) or node in caches):
            yield Error(
                f"REDISLOCK['REDLOCK_NODES'] entry {node!r} is neither a cache alias nor a "
                "Redis URL.",
                hint="Each entry must be a key of CACHES or a redis://, rediss://, unix:// or "
                "redis+sentinel:// URL.",
                id="django_redislock.E010",
            )
        elif isinstance(caches, dict) and node in caches:
            yield from _check_redis_cache("REDISLOCK['REDLOCK_NODES']", node, caches[node])
        else:
            yield from _check_sentinel_url(f"REDISLOCK['REDLOCK_NODES'] entry {node!r}", node)


VALIDATORS: dict[str, Callable[[Any], Iterable[Error]]] = {
    "CACHE": _type("CACHE", (str,), "the alias of a Redis cache in CACHES"),
    "URL": _check_url,
    "CLUSTER": _type("CLUSTER", (bool,), "True or False"),
    "KEY_PREFIX": _check_prefix,
    # A TTL under 10 ms expires during the round trips that take and release the lock.
    "LOCK_TTL": _number("LOCK_TTL", Bounds(0.01)),
    "LOCK_TIMEOUT": _number("LOCK_TIMEOUT", Bounds(0, allow_inf=True)),
    # A waiter blocks on Redis for up to this long at a time: under 1 ms it only spins.
    "LOCK_RETRY_DELAY": _number("LOCK_RETRY_DELAY", Bounds(0.001, maximum=60)),
    # One shard per Cluster hash slot at most; listing sweeps every shard.
    "LOCK_SHARDS": _number("LOCK_SHARDS", Bounds(1, maximum=MAX_LOCK_SHARDS, whole=True)),
    "REDLOCK_NODES": _check_nodes,
    "BUSY_STATUS": _check_status,
    "ON_REDIS_ERROR": _check_on_error,
    "QUEUES": check_queues,
    "SCHEDULE": check_schedule,
    "SPIN_WAIT": _number("SPIN_WAIT", Bounds(0, maximum=0.01)),
    "MAX_CONNECTIONS": _number("MAX_CONNECTIONS", Bounds(4, maximum=1_000_000, whole=True)),
    "METRICS": check_metrics,
    "METRICS_TOKEN": check_metrics_token,
    "HISTORY": _type("HISTORY", (bool,), "True or False"),
}
assert set(VALIDATORS) == set(DEFAULTS)


def _check_connection(raw: dict[str, Any]) -> Iterable[Error]:
    url = raw.get("URL")
    if isinstance(url, str) and sentinel.is_sentinel_url(url) and raw.get("CLUSTER"):
        yield Error(
            "REDISLOCK['CLUSTER'] is True but REDISLOCK['URL'] is a Sentinel URL.",
            hint="A Sentinel group is not a Redis Cluster: set CLUSTER to False, or URL to the "
            "redis:// URL of one node of the cluster.",
            id="django_redislock.E021",
        )
    if url is not None:
        return
    if raw.get("CLUSTER"):
        yield Error(
            "REDISLOCK['CLUSTER'] is True but REDISLOCK['URL'] is not set.",
            hint="Set REDISLOCK['URL'] to the redis:// URL of one node of the cluster.",
            id="django_redislock.E011",
        )
    alias = raw.get("CACHE", DEFAULTS["CACHE"])
    if not isinstance(alias, str):
        return
    caches = getattr(settings, "CACHES", {})
    if not isinstance(caches, dict):
        return  # Django's own checks report a malformed CACHES
    if alias not in caches:
        yield Error(
            f"REDISLOCK['CACHE'] names the cache {alias!r}, which is not in CACHES.",
            hint="Name a Redis cache alias from CACHES, or set REDISLOCK['URL'].",
            id="django_redislock.E005",
        )
    else:
        yield from _check_redis_cache("REDISLOCK['CACHE']", alias, caches[alias])


def _check_redis_cache(where: str, alias: str, cache: Any) -> Iterable[Error]:
    backend = cache.get("BACKEND") if isinstance(cache, dict) else None
    if cache_kind(backend) is None:
        named = repr(backend) if isinstance(backend, str) else short(backend)  # a path: whole
        yield Error(
            f"The cache {alias!r} named by {where} is not a Redis cache (BACKEND {named}).",
            hint=f"Use a cache whose BACKEND is {SUPPORTED_CACHES}, or set REDISLOCK['URL'].",
            id="django_redislock.E006",
        )


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    raw = user_settings()
    if not isinstance(raw, dict):
        return [
            Error(
                f"REDISLOCK must be a dict, not {type(raw).__name__}.",
                hint="Set REDISLOCK = {'URL': 'redis://localhost:6379/0'} or leave it out.",
                id="django_redislock.E001",
            )
        ]
    errors: list[CheckMessage] = []
    for key, value in raw.items():
        if key not in VALIDATORS:
            errors.append(
                Error(
                    f"REDISLOCK has an unknown key {key!r}.",
                    hint=f"Known keys: {', '.join(DEFAULTS)}.",
                    id="django_redislock.E002",
                )
            )
        else:
            errors.extend(VALIDATORS[key](value))
    errors.extend(_check_connection(raw))
    errors.extend(check_tasks_backend(raw))
    return errors


def check_redis_durability(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The deploy check (``manage.py check --deploy``): warn when the Redis behind locks and
    queues may evict keys or lose them on restart."""
    if any(message.is_serious() for message in check_settings()):
        return []  # those errors come first: the connection they describe is not to be trusted
    from ..redis.clients import get_redis

    try:
        client = get_redis()
    except Exception as exc:
        return [unverified("the Redis of REDISLOCK", f"cannot connect ({exc})")]
    return redis_durability_warnings(client)


__all__ = ["check_redis_durability", "check_settings", "redis_durability_warnings"]
