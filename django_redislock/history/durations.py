"""The duration histogram of a minute: fixed log-scale buckets, a factor of sqrt(2) wide,
from 1 ms to about 70 minutes, whence percentiles are estimated.

Bucket 0 holds runs under 1 ms; bucket k (1 to ``TOP - 1``) those from 2^((k-1)/2) ms to
2^(k/2) ms; ``TOP`` those of 2^((TOP-1)/2) ms (about 70 min) or more. A percentile is
read as the geometric middle of the bucket that holds it (nearest rank): for a duration of
1 ms to 70 min, the estimate is within a factor 2^(1/4) of the true value, i.e. off by
at most 19 %. Under 1 ms it reads 0.5 ms; above the top, the top bucket's lower bound.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

TOP = 45  # the last bucket: 2^22 ms (69.9 min) and more
RELATIVE_ERROR = 2**0.25 - 1  # the most a percentile's estimate is off, 1 ms to TOP


def bucket(seconds: float) -> int:
    """The bucket of a run that took ``seconds``."""
    ms = seconds * 1000.0
    if not ms >= 1.0:  # (NaN too)
        return 0
    if math.isinf(ms):
        return TOP
    return min(TOP, 1 + int(2.0 * math.log2(ms)))


def estimate(index: int) -> float:
    """The duration (s) a bucket stands for in a percentile."""
    if index <= 0:
        return 0.0005
    if index >= TOP:
        return 2 ** ((TOP - 1) / 2) / 1000.0
    return 2 ** ((index - 1) / 2 + 0.25) / 1000.0


def percentile(counts: Mapping[int, int], fraction: float) -> float | None:
    """The ``fraction`` (0 to 1) percentile of the runs counted by bucket (nearest rank);
    None when none ran."""
    total = sum(n for n in counts.values() if n > 0)
    if total <= 0:
        return None
    rank = max(1, math.ceil(fraction * total))
    seen = 0
    for index in sorted(counts):
        if counts[index] > 0:
            seen += counts[index]
            if seen >= rank:
                return estimate(index)
    return estimate(max(counts))  # (not reached)


def merged(histograms: Iterable[Mapping[int, int]]) -> dict[int, int]:
    """The sum of several histograms (minutes read as one)."""
    total: dict[int, int] = {}
    for histogram in histograms:
        for index, count in histogram.items():
            total[index] = total.get(index, 0) + count
    return total
