"""Filters of the admin pages."""

from __future__ import annotations

import json
import math
from typing import Any

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

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


# A name longer than this (no real module or function has one) may also break inside it,
# every this many characters, rather than widen its column without bound.
LONGEST_NAME = 60


@register.filter(is_safe=True)
def wrap_dots(path: Any) -> SafeString:
    """A dotted path (a task's) that wraps only after its dots: each is followed by
    ``<wbr>``, so a narrow column breaks ``shop.tasks.close`` as ``shop.`` / ``tasks.close``,
    never inside a name (give it the ``path`` class: no other break is allowed)."""
    names = str(path).split(".")
    return mark_safe(  # each piece is escaped
        ".<wbr>".join(
            "<wbr>".join(
                conditional_escape(name[i : i + LONGEST_NAME])
                for i in range(0, max(len(name), 1), LONGEST_NAME)
            )
            for name in names
        )
    )
