"""Whether the Redis behind locks and queues keeps what it is given.

An evicted lock key is a broken mutex (a second holder gets in while the first still runs)
and an evicted job hash is a lost job; a Redis without persistence forgets both on restart.
Only ``maxmemory-policy noeviction`` is safe: the ``volatile-*`` policies evict keys that have
a TTL, and every lock has one.

``redis_durability_warnings`` backs the deploy check (``manage.py check --deploy``) and the
worker's start; it never raises.
"""

from __future__ import annotations

from typing import Any

import redis
from django.core.checks import CheckMessage
from django.core.checks import Warning as CheckWarning

from .clients import is_cluster

SAFE_POLICY = "noeviction"


def redis_durability_warnings(client: Any) -> list[CheckMessage]:
    """Warnings (``django_redislock.W001``…``W003``) about every primary behind ``client``:
    an evicting ``maxmemory-policy``, no persistence, or what could not be verified."""
    try:
        nodes = _primaries(client)
    except Exception as exc:  # unreachable, or a Cluster that cannot list its nodes
        return [unverified(f"the Redis at {_where(client)}", f"cannot reach it ({exc})")]
    warnings: list[CheckMessage] = []
    for where, node in nodes:
        try:
            warnings.extend(_node_warnings(where, node))
        except Exception as exc:  # this must never break `check --deploy` or a worker
            warnings.append(unverified(f"the Redis at {where}", f"cannot reach it ({exc})"))
    return warnings


def _primaries(client: Any) -> list[tuple[str, Any]]:
    if is_cluster(client):
        # Each primary has its own configuration: one evicting node loses the keys of its
        # slots, so every one is asked.
        return [
            (f"{node.host}:{node.port}", client.get_redis_connection(node))
            for node in client.get_primaries()
        ]
    return [(_where(client), client)]


def _where(client: Any) -> str:
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    if "host" in kwargs:
        return f"{kwargs['host']}:{kwargs.get('port', 6379)}"
    return repr(client)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _config(node: Any, name: str) -> str | None:
    """``CONFIG GET name``, or None where CONFIG is disabled or renamed (managed Redis)."""
    try:
        reply = node.config_get(name)
    except (redis.ConnectionError, redis.TimeoutError):
        raise
    except redis.RedisError:
        return None
    values = {_text(k): _text(v) for k, v in dict(reply or {}).items()}
    return values.get(name)


def _info(node: Any, section: str, field: str) -> str | None:
    try:
        reply = node.info(section)
    except (redis.ConnectionError, redis.TimeoutError):
        raise
    except redis.RedisError:
        return None
    return None if field not in reply else _text(reply[field])


def _node_warnings(where: str, node: Any) -> list[CheckMessage]:
    policy = _config(node, "maxmemory-policy") or _info(node, "memory", "maxmemory_policy")
    appendonly = _config(node, "appendonly")
    if appendonly is None:
        enabled = _info(node, "persistence", "aof_enabled")
        appendonly = None if enabled is None else ("yes" if enabled == "1" else "no")
    save = _config(node, "save")
    warnings: list[CheckMessage] = []
    unknown: list[str] = []
    if policy is None:
        unknown.append("maxmemory-policy")
    elif policy != SAFE_POLICY:
        warnings.append(
            CheckWarning(
                f"Redis at {where} has maxmemory-policy {policy!r}: once it reaches "
                "maxmemory it evicts keys, and an evicted lock lets a second holder in while "
                "the first still runs, an evicted job is lost.",
                hint="Set maxmemory-policy to noeviction on the Redis behind REDISLOCK (the "
                "volatile-* policies evict keys with a TTL, and every lock has one); give "
                "caches their own Redis.",
                id="django_redislock.W001",
            )
        )
    if appendonly == "yes" or (save is not None and save.strip()):
        pass  # AOF, or RDB snapshots at the configured save points
    elif appendonly == "no" and save is not None:
        warnings.append(
            CheckWarning(
                f"Redis at {where} runs without persistence (appendonly no, no save "
                "points): a restart forgets every held lock and every queued job.",
                hint="Turn on AOF (appendonly yes, appendfsync everysec); RDB save points "
                "alone lose what changed since the last snapshot.",
                id="django_redislock.W002",
            )
        )
    else:
        unknown.append("persistence")
    if unknown:
        reason = f"its {' and '.join(unknown)} cannot be read"
        warnings.append(unverified(f"the Redis at {where}", reason))
    return warnings


def unverified(redis_name: str, reason: str) -> CheckWarning:
    """W003: whether ``redis_name`` (e.g. "the Redis at host:port") keeps its keys is unknown."""
    return CheckWarning(
        f"Could not verify that {redis_name} neither evicts keys nor loses them on "
        f"restart: {reason}.",
        hint="Check by hand (e.g. in your provider's console) that maxmemory-policy is "
        "noeviction and that AOF or RDB persistence is on, then add "
        "'django_redislock.W003' to SILENCED_SYSTEM_CHECKS.",
        id="django_redislock.W003",
    )
