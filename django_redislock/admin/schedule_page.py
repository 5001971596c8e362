"""The admin's SCHEDULE page: each entry of ``REDISLOCK['SCHEDULE']``, paused or not (by
whom, since when), its last tick (as claimed in Redis by the schedulers), its next one, and
its last run's outcome (the job of its latest tick or run now); with Pause, Resume and Run
now for those who manage queues. A few round trips in all, whatever the number of entries."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from django.http import HttpRequest, HttpResponse

from ..conf import conf
from ..queue.worker.schedule import Entry
from ..queue.worker.schedule_state import EntryState, entry_states, new_nonce
from .actions import MANAGE
from .rendering import Rendering, can


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
            states = entry_states([entry for _, entry in entries])
            manage = can(request, MANAGE)
            now = time.time()
            for (row, _), state in zip(entries, states, strict=True):
                self._fill(request, row, state, now, manage)
            return {"entries": rows, "manage": manage}

        return self._page(request, "schedule.html", "Schedule", load, {"tab": "schedule"})

    def _fill(
        self, request: HttpRequest, row: dict[str, Any], state: EntryState, now: float, manage: bool
    ) -> None:
        entry, last = state.entry, state.last_tick
        latest = entry.latest(now)
        upcoming = entry.next_after(latest)
        run = state.last_run
        row.update(
            entry=entry,
            state=state,
            how=f"every {entry.every:g} s" if entry.every is not None else entry.cron,
            last=_moment(last),
            last_ago=None if last is None else now - last,
            next=_moment(upcoming),
            next_in=upcoming - now,
            # A tick passed and not claimed: no scheduler has looked since (none runs?)
            behind=_moment(latest)
            if not state.paused and last is not None and last < latest - 0.0005
            else None,
            paused_at=_moment(state.paused_at),
            run=run,
            run_at=_moment(run.outcome_at) if run else None,
            run_url=self.job_url(entry.queue, run.job_id) if run else "",
            queue_url=self._url("jobs", entry.queue, "scheduled"),
        )
        if manage:
            fields = {"entry": entry.name}
            flip = "schedule_resume" if state.paused else "schedule_pause"
            row["actions"] = [
                ("Resume" if state.paused else "Pause", self._confirm(request, flip, **fields)),
                (
                    "Run now",
                    self._confirm(request, "schedule_run", **fields, nonce=str(new_nonce())),
                ),
            ]
