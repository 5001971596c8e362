"""A task's arguments and its return value as a job carries them: JSON, normalised as the
Tasks framework normalises them (tuples, bytes, any mapping or sequence)."""

from __future__ import annotations

import json
from typing import Any

from ..queue.job_codec import dumps_scalars
from .results import SCALARS, normalize_json

dumps = json.JSONEncoder(separators=(",", ":")).encode


def to_json(value: Any) -> str:
    """``value`` as JSON text, accepting what the framework's ``normalize_json`` accepts
    (tuples, bytes, any mapping or sequence); TypeError or ValueError otherwise."""
    if value is None:  # what most tasks return
        return "null"
    try:  # plain JSON types, the usual case: json's C encoder checks them at once
        return dumps(value)
    except TypeError:
        return dumps(normalize_json(value))


def arguments(args: Any, kwargs: Any) -> tuple[list[Any], dict[str, Any], str, str]:
    """A task's arguments as the worker will receive them (normalised as the framework
    does, then through JSON: dict keys become strings), and as the job stores them (JSON
    text; "" for no kwargs)."""
    # The usual call passes scalars only: JSON would give them back unchanged, so they are
    # encoded once, and not decoded.
    for value in args:
        if type(value) not in SCALARS:
            break
    else:
        for key, value in kwargs.items():
            if type(key) is not str or type(value) not in SCALARS:
                break
        else:
            args, kwargs = list(args), dict(kwargs)
            return args, kwargs, dumps_scalars(args), dumps_scalars(kwargs) if kwargs else ""
    try:
        text = to_json([args, kwargs])
    except TypeError as exc:
        raise TypeError(f"Task arguments must be JSON-serializable: {exc}") from exc
    args, kwargs = json.loads(text)
    return args, kwargs, dumps(args), dumps(kwargs) if kwargs else ""


def returned(value: Any, text: str) -> Any:
    """A task's return value as its result keeps it: ``text`` (``to_json(value)``) decoded;
    a plain scalar comes back as it went in, so it is not decoded."""
    return value if type(value) in SCALARS else json.loads(text)
