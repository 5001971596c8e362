"""Name and seconds validation: the rules every lock, semaphore, stock and rate-limit name
follows (so that it is usable in a Redis key and a Cluster hash tag), and the checks of a
duration in seconds."""

from __future__ import annotations

import math
from typing import Any

MAX_NAME_LENGTH = 200


def validate_name(name: Any, what: str = "Lock") -> str:
    """``name`` if it is usable as the name of a ``what`` (a lock, or a stock: the same
    rules), else a TypeError/ValueError saying why."""
    if not isinstance(name, str):
        raise TypeError(f"{what} name must be a str, not {type(name).__name__}.")
    if not name:
        raise ValueError(f"{what} name must not be empty.")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(
            f"{what} name is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}."
        )
    if "{" in name or "}" in name:
        raise ValueError(
            f"{what} name {name!r} contains a brace; braces would change the Redis Cluster "
            "hash tag of its keys."
        )
    if not name.isprintable() or any(c.isspace() for c in name):
        raise ValueError(
            f"{what} name {name!r} contains whitespace or control characters; use e.g. ':' "
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
