"""Lock names, their validation, and the Redis key layout of a lock (see ``scripts``)."""

from __future__ import annotations

import math
import os
import socket
import zlib
from typing import Any

from ..conf import conf

MAX_NAME_LENGTH = 200
CLUSTER_SHARDS = 16


def validate_name(name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"Lock name must be a str, not {type(name).__name__}.")
    if not name:
        raise ValueError("Lock name must not be empty.")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(
            f"Lock name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}."
        )
    if "{" in name or "}" in name:
        raise ValueError(
            f"Lock name {name!r} contains a brace; braces would change the Redis Cluster "
            "hash tag of its keys."
        )
    if not name.isprintable() or any(c.isspace() for c in name):
        raise ValueError(
            f"Lock name {name!r} contains whitespace or control characters; use e.g. ':' "
            "or '-' to separate its parts."
        )
    return name


def validate_seconds(value: Any, argument: str, *, allow_zero: bool, allow_inf: bool) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{argument} must be a number of seconds, not {type(value).__name__}.")
    if math.isnan(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{argument} must be {bound}, not {value!r}.")
    if math.isinf(value) and not allow_inf:
        raise ValueError(f"{argument} must be finite, not {value!r}.")
    return float(value)


def shard_count(client: Any) -> int:
    from ..redis.clients import is_cluster

    return CLUSTER_SHARDS if is_cluster(client) else 1


def shard_base(shard: int) -> str:
    return f"{conf.KEY_PREFIX}:{{L{shard}}}:"


def lock_base(name: str, shards: int) -> str:
    shard = zlib.crc32(name.encode()) % shards if shards > 1 else 0
    return shard_base(shard)


def index_keys(base: str) -> tuple[str, str, str]:
    """(index, names, names:swept) keys of a shard: its locks by expiry, by name, and how far
    ended locks were swept from the names (see ``scripts``)."""
    return f"{base}index", f"{base}names", f"{base}names:swept"


def lock_keys(base: str, name: str) -> tuple[str, str, str, str]:
    """(lock, waiters, index, fence) keys of lock ``name``."""
    return f"{base}l:{name}", f"{base}q:{name}", f"{base}index", f"{base}f:{name}"


def _owner_ident() -> str:
    return f"{os.getpid()}|{socket.gethostname()}"


OWNER = _owner_ident()
PID = os.getpid()


def _after_fork() -> None:
    global OWNER, PID
    OWNER = _owner_ident()
    PID = os.getpid()


os.register_at_fork(after_in_child=_after_fork)
