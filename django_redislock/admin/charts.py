"""Charts drawn on the server as inline SVG (no script, no library): a task's runs and
failures, and its durations' p50 and p95, over time; and the sparkline of its last day. Each
line is an SVG path's ``d`` in a fixed viewBox, coloured by the admin's CSS variables (the
template's classes), so dark mode follows the admin's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

WIDTH, HEIGHT = 720, 160
TICKS = 6


@dataclass(frozen=True)
class Line:
    label: str
    css: str  # its class in the template: the colour
    d: str  # the path ("" when it has no point)


@dataclass(frozen=True)
class Chart:
    lines: list[Line]
    top: float  # what the chart's top stands for
    ticks: list[tuple[float, datetime]]  # x, the moment it marks
    width: int = WIDTH
    height: int = HEIGHT


def path(values: Sequence[float | None], top: float, width: float, height: float) -> str:
    """``values`` spread evenly from left to right, 0 at the bottom and ``top`` at the top;
    a None breaks the line (a point alone is a short dash)."""
    if not values or top <= 0:
        return ""
    step = width / max(1, len(values) - 1)
    parts: list[str] = []
    drawing = False
    for at, value in enumerate(values):
        if value is None:
            drawing = False
            continue
        x = at * step
        y = height - min(value, top) / top * height
        if drawing:
            parts.append(f"L{x:.1f} {y:.1f}")
        else:
            # a lone point still shows: a short dash of its own
            parts.append(f"M{x:.1f} {y:.1f}h0.1")
            drawing = True
    return " ".join(parts)


def chart(
    series: Sequence[tuple[str, str, Sequence[float | None]]], starts: Sequence[float]
) -> Chart:
    """A chart of ``series`` (label, class, values), the n-th value of each at epoch
    ``starts[n]``; the top is the highest value."""
    top = max((v for _, _, values in series for v in values if v is not None), default=0.0)
    lines = [Line(label, css, path(values, top, WIDTH, HEIGHT)) for label, css, values in series]
    ticks = []
    if len(starts) > 1:
        step = WIDTH / (len(starts) - 1)
        for n in range(TICKS):
            at = round(n * (len(starts) - 1) / (TICKS - 1))
            ticks.append((at * step, datetime.fromtimestamp(starts[at], tz=timezone.utc)))
    return Chart(lines, top, ticks)


def sparkline(values: Sequence[int], width: int = 120, height: int = 24) -> str:
    """The path of a small line of ``values`` (runs an hour), "" when all are 0."""
    return path(values, float(max(values, default=0)), width, height)
