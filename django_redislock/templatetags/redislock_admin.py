"""Filters of the admin pages."""

from __future__ import annotations

import json
import math
from typing import Any

from django import template

register = template.Library()


@register.filter
def duration(seconds: float | None) -> str:
    """``0.25`` → "250 ms", ``75`` → "1 min 15 s", ``90000`` → "1 d 1 h"; None, or what is
    no finite number, → "—"."""
    try:
        seconds = abs(float(seconds))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "—"
    if math.isnan(seconds) or math.isinf(seconds):
        return "—"
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    for big, big_unit, small, small_unit in (
        (86400, "d", 3600, "h"),
        (3600, "h", 60, "min"),
        (60, "min", 1, "s"),
    ):
        if whole >= big:
            rest = (whole % big) // small
            return f"{whole // big} {big_unit}" + (f" {rest} {small_unit}" if rest else "")
    return f"{whole} s"


@register.filter
def as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
