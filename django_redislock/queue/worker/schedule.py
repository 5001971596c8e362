"""``REDISLOCK['SCHEDULE']``: periodic jobs, enqueued exactly once per tick however many
workers run the scheduler.

An entry runs a task every N seconds (ticks at whole multiples of N since the epoch) or on
a ``cron`` expression (croniter, in ``TIME_ZONE``)::

    "SCHEDULE": {
        "sweep-unpaid": {"task": "shop.tasks.sweep_unpaid", "every": 60},
        "nightly": {"task": "shop.tasks.report", "cron": "0 3 * * *", "queue": "reports"},
    }

Each tick is claimed and enqueued in one atomic step on the queue (the job id is
``schedule:<name>:<tick ms>``), so racing schedulers enqueue it once. A new entry starts at
its next tick. After downtime only the latest missed tick is enqueued, unless the entry has
``"catch_up": True`` (then every missed tick, at most ``MAX_CATCH_UP``).

An entry can be paused, resumed and run now (``schedule_state``: the admin and
``manage.py redislock_schedule``); a paused entry's claim is a tick no scheduler reaches, so
the scheduler skips it without a look of its own.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any

from django.utils import timezone

from ...conf import conf
from ...exceptions import RedisUnavailable
from ...redis.clients import call
from ..queue import get_queue

logger = logging.getLogger("django_redislock.queue.schedule")  # the name users' LOGGING knows

MAX_CATCH_UP = 100
ENTRY_OPTIONS = ("task", "every", "cron", "args", "kwargs", "queue", "priority", "catch_up")
# The longest the scheduler sleeps between looks (a changed clock or a new tick is seen).
MAX_SLEEP = 1.0


@dataclass(frozen=True)
class Entry:
    name: str
    task: str
    every: float | None = None
    cron: str | None = None
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    queue: str = "default"
    priority: int = 0
    catch_up: bool = False

    @classmethod
    def from_setting(cls, name: str, options: Mapping[str, Any]) -> Entry:
        unknown = set(options) - set(ENTRY_OPTIONS)
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(sorted(map(repr, unknown)))}")
        task = options.get("task")
        if not isinstance(task, str) or "." not in task:
            raise ValueError("'task' must be the dotted path of a @task, e.g. 'shop.tasks.sweep'")
        every, cron = options.get("every"), options.get("cron")
        if (every is None) == (cron is None):
            raise ValueError("give exactly one of 'every' (seconds) and 'cron' (an expression)")
        if every is not None:
            every = _seconds(every)
        if cron is not None:
            _cron(cron, timezone.now())  # raises ValueError when invalid
        args, kwargs = options.get("args", []), options.get("kwargs", {})
        if not isinstance(args, (list, tuple)) or not isinstance(kwargs, dict):
            raise ValueError("'args' must be a list and 'kwargs' a dict")
        if not all(isinstance(key, str) for key in kwargs):
            raise ValueError("the keys of 'kwargs' must be strings")
        try:
            # Every tick stores them as JSON: what does not survive the trip fails here once,
            # not at each tick.
            args, kwargs = json.loads(json.dumps(list(args))), json.loads(json.dumps(kwargs))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"'args' and 'kwargs' must be JSON-serializable ({exc})") from exc
        queue = options.get("queue", "default")
        if not isinstance(queue, str):
            raise ValueError(f"'queue' must be the name of a queue, not {queue!r}")
        priority = options.get("priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool) or abs(priority) > 100:
            raise ValueError(f"'priority' must be an int from -100 to 100, not {priority!r}")
        catch_up = options.get("catch_up", False)
        if not isinstance(catch_up, bool):
            raise ValueError(f"'catch_up' must be True or False, not {catch_up!r}")
        return cls(name, task, every, cron, args, kwargs, queue, priority, catch_up)

    def latest(self, now: float) -> float:
        """The latest tick at or before ``now`` (epoch seconds)."""
        if self.every is not None:
            return math.floor(now / self.every) * self.every
        assert self.cron is not None
        base = datetime.fromtimestamp(now + 0.001, tz=dt_timezone.utc)
        return _cron(self.cron, base).get_prev(datetime).timestamp()  # type: ignore[no-any-return]

    def next_after(self, tick: float) -> float:
        """The first tick after ``tick``."""
        if self.every is not None:
            return tick + self.every
        assert self.cron is not None
        base = datetime.fromtimestamp(tick, tz=dt_timezone.utc)
        return _cron(self.cron, base).get_next(datetime).timestamp()  # type: ignore[no-any-return]

    def job(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "args": self.args,
            "kwargs": self.kwargs,
            "priority": self.priority,
        }


def _seconds(every: Any) -> float:
    if isinstance(every, (int, float)) and not isinstance(every, bool):
        try:
            seconds = float(every)
        except OverflowError:  # an int beyond any float
            seconds = math.inf
        if 0 < seconds < math.inf:
            return seconds
    raise ValueError(f"'every' must be a positive number of seconds, not {every!r}")


def _cron(expression: Any, base: datetime) -> Any:
    try:
        from croniter import croniter
    except ImportError as exc:
        raise ValueError("'cron' needs croniter: pip install 'django-redislock[schedule]'") from exc
    if not isinstance(expression, str) or not croniter.is_valid(expression):
        raise ValueError(f"'cron' is not a valid cron expression: {expression!r}")
    return croniter(expression, timezone.localtime(base) if timezone.is_aware(base) else base)


def entries() -> list[Entry]:
    """The valid SCHEDULE entries; each invalid one is logged (``manage.py check`` reports
    it as E012) and left out, so it never stops the others."""
    valid = []
    for name, options in conf.SCHEDULE.items():
        try:
            if not isinstance(name, str) or not isinstance(options, Mapping):
                raise ValueError("it must be a str name with a dict of options")
            valid.append(Entry.from_setting(name, options))
        except ValueError as exc:
            logger.error("Schedule entry %r is invalid and will not run: %s.", name, exc)
    return valid


class Scheduler:
    """Enqueues the SCHEDULE's due ticks. Run by every worker (``--no-schedule`` to opt
    out); any number may run at once."""

    def __init__(self, using: str | None = None) -> None:
        self.using = using
        self.entries = entries()
        self.enqueued = 0
        # The last failure logged per entry, so a tick that fails at every look (each up
        # to MAX_SLEEP apart) is logged once, not every second.
        self._failed: dict[str, tuple[float, str]] = {}

    def run_pending(self, now: float | None = None) -> float:
        """Enqueue every entry's due tick; returns the seconds until the next tick. An
        entry that fails is logged and retried at the next look while the others run on;
        RedisUnavailable is raised only when every entry failed for it."""
        now = time.time() if now is None else now
        soonest = math.inf
        unreachable: list[tuple[Entry, RedisUnavailable]] = []
        for entry in self.entries:
            try:
                self._run_entry(entry, now)
                self._failed.pop(entry.name, None)
            except RedisUnavailable as exc:  # on Cluster, maybe only this entry's node
                unreachable.append((entry, exc))
            except Exception as exc:
                self._log_failure(entry, now, exc)
            soonest = min(soonest, entry.next_after(entry.latest(now)) - now)
        if unreachable and len(unreachable) == len(self.entries):
            raise unreachable[-1][1]
        for entry, error in unreachable:
            self._log_failure(entry, now, error)
        return max(0.0, soonest)

    def _log_failure(self, entry: Entry, now: float, exc: Exception) -> None:
        failure = (entry.latest(now), f"{type(exc).__name__}: {exc}")
        if self._failed.get(entry.name) != failure:
            self._failed[entry.name] = failure
            logger.error(
                "Schedule entry %r failed (the others still run): %s",
                entry.name,
                failure[1],
                exc_info=exc,
            )

    def _run_entry(self, entry: Entry, now: float) -> None:
        queue = get_queue(entry.queue, self.using)
        latest = entry.latest(now)
        latest_ms = round(latest * 1000)
        claim = queue.keys.tick(entry.name)
        claimed = call(queue.client, "GET", claim)
        if claimed is None:
            # A new entry starts at its next tick: claim the current one without running it.
            call(queue.client, "SET", claim, latest_ms, "NX")
            return
        last_ms = int(claimed)
        if last_ms >= latest_ms:  # claimed already, or paused (claimed up to FOREVER)
            return
        ticks = [latest]
        if entry.catch_up:
            ticks, tick = [], entry.next_after(last_ms / 1000)
            while tick <= latest + 0.0005 and len(ticks) < MAX_CATCH_UP:
                ticks.append(tick)
                tick = entry.next_after(tick)
        for tick in ticks:
            tick_ms = round(tick * 1000)
            job = queue.enqueue_tick(
                entry.name,
                tick_ms,
                {
                    **entry.job(),
                    "job_id": f"schedule:{entry.name}:{tick_ms}",
                    "at": datetime.fromtimestamp(tick, tz=dt_timezone.utc),
                },
            )
            if job is not None:
                self.enqueued += 1
                logger.info(
                    "Scheduled %s: enqueued %s for %s.",
                    entry.name,
                    job.id,
                    datetime.fromtimestamp(tick, tz=dt_timezone.utc),
                )

    def run(self, stopping: threading.Event) -> None:
        """Run until ``stopping`` is set, waking at each tick."""
        delay = 0.1
        while not stopping.is_set():
            try:
                wait = self.run_pending()
                delay = 0.1
            except RedisUnavailable as exc:
                logger.warning("Scheduler: %s.", exc)
                wait, delay = delay, min(delay * 2, 5.0)
            except Exception:  # a bad entry or a bug must not stop the worker
                logger.exception("Scheduler failed; retrying.")
                wait, delay = delay, min(delay * 2, 5.0)
            stopping.wait(min(wait, MAX_SLEEP) + 0.0005)
