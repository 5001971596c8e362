"""A reference model of the rate limiter, in exact arithmetic: the tests replay the hits the
server saw (their server times) through it and expect the very same decisions and waits."""

from __future__ import annotations

import math
from collections import deque
from fractions import Fraction
from typing import NamedTuple


class Seen(NamedTuple):
    """One hit as the script answered it: passed, the wait (us), the server time (us)."""

    allowed: bool
    wait: int
    now: int


class Model:
    """At most ``count`` units in any window of ``period`` us (a pass at t leaves the window
    at t + period), and when ``burst`` < ``count`` a GCRA with emission interval period /
    count letting ``burst`` through at once."""

    def __init__(self, count: int, period: int, burst: int | None = None) -> None:
        self.count, self.period = count, period
        self.burst = count if burst is None else burst
        self.passes: deque[int] = deque()  # server times of passed units, oldest first
        self.tat = Fraction(0)

    def hit(self, now: int, n: int = 1) -> tuple[bool, int]:
        while self.passes and self.passes[0] + self.period <= now:
            self.passes.popleft()
        wait = 0
        if len(self.passes) + n > self.count:
            # the unit that must leave for n to fit
            wait = self.passes[len(self.passes) + n - self.count - 1] + self.period - now
        interval = Fraction(self.period, self.count)
        tat = max(self.tat, Fraction(now)) + n * interval
        if self.burst < self.count and tat - now > self.burst * interval:
            wait = max(wait, math.ceil(tat - now - self.burst * interval))
        if wait:
            return False, wait
        self.passes.extend([now] * n)
        self.tat = tat if self.burst < self.count else self.tat
        return True, 0

    def replay(self, seen: list[Seen], n: int = 1) -> None:
        """Assert that every hit got what the model gives at its time, in order."""
        for i, hit in enumerate(seen):
            assert (hit.allowed, hit.wait) == self.hit(hit.now, n), (i, hit)

    def state(self, now: int) -> tuple[int, int, int]:
        """What is left at ``now``: units free, us until one is, us until all are."""
        passes = [p for p in self.passes if p + self.period > now]
        free = self.count - len(passes)
        one = 0 if free else passes[0] + self.period - now
        every = passes[-1] + self.period - now if passes else 0
        if self.burst < self.count:
            interval = Fraction(self.period, self.count)
            debt = max(self.tat - now, Fraction(0))
            spaced = math.floor((self.burst * interval - debt) / interval)
            free = min(free, max(spaced, 0))
            if spaced < 1:
                one = max(one, math.ceil(debt + interval - self.burst * interval))
            every = max(every, math.ceil(debt))
        return free, one, every
