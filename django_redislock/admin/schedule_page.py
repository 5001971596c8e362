"""The admin's SCHEDULE page: each entry of ``REDISLOCK['SCHEDULE']``, its last tick (as
claimed in Redis by the schedulers) and its next one. One GET per entry, pipelined."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from django.http import HttpRequest, HttpResponse

from ..conf import conf
from ..queue.jobs import number
from ..queue.queue import get_queue
from ..queue.worker.schedule import Entry
from ..redis.clients import get_redis
from .rendering import Rendering


def _moment(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=timezone.utc)


class SchedulePage(Rendering):
    def schedule_view(self, request: HttpRequest) -> HttpResponse:
        def load() -> dict[str, Any]:
            rows: list[dict[str, Any]] = []
            entries: list[tuple[dict[str, Any], Entry]] = []
            for name, options in conf.SCHEDULE.items():
                row: dict[str, Any] = {"name": str(name)}
                rows.append(row)
                try:
                    if not isinstance(name, str) or not isinstance(options, Mapping):
                        raise ValueError("it must be a str name with a dict of options")
                    entry = Entry.from_setting(name, options)
                    if entry.queue not in conf.QUEUES:
                        raise ValueError(f"its queue {entry.queue!r} is not in QUEUES")
                except ValueError as exc:  # manage.py check reports it too (E012)
                    row["error"] = f"Invalid, it does not run: {exc}."
                    continue
                entries.append((row, entry))
            self._fill(entries, time.time())
            return {"entries": rows}

        return self._page(request, "schedule.html", "Schedule", load, {"tab": "schedule"})

    def _fill(self, entries: list[tuple[dict[str, Any], Entry]], now: float) -> None:
        if not entries:
            return
        pipe = get_redis().pipeline(transaction=False)
        for _, entry in entries:
            pipe.get(get_queue(entry.queue).keys.tick(entry.name))
        for (row, entry), claimed in zip(entries, pipe.execute(), strict=True):
            last = number(claimed, -1) / 1000 if claimed is not None else None
            if last is not None and last < 0:
                last = None
            latest = entry.latest(now)
            upcoming = entry.next_after(latest)
            row.update(
                entry=entry,
                how=f"every {entry.every:g} s" if entry.every is not None else entry.cron,
                last=_moment(last),
                last_ago=None if last is None else now - last,
                next=_moment(upcoming),
                next_in=upcoming - now,
                # A tick passed and not claimed: no scheduler has looked since (none runs?)
                behind=_moment(latest) if last is not None and last < latest - 0.0005 else None,
                queue_url=self._url("jobs", entry.queue, "scheduled"),
            )
