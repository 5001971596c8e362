"""``manage.py redislock_schedule [list|pause NAME|resume NAME|run NAME]``: the SCHEDULE's
entries with their state, next tick and last run; pause, resume or run one now."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils.timezone import localtime

from django_redislock.conf import conf
from django_redislock.management.operating import audit, command_errors

from ...queue.worker.schedule import Entry
from ...queue.worker.schedule_state import (
    EntryState,
    entry_named,
    entry_states,
    pause_entry,
    resume_entry,
    run_entry_now,
)

WHO = "redislock_schedule"


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return f"{localtime(datetime.fromtimestamp(epoch, tz=timezone.utc)):%Y-%m-%d %H:%M:%S}"


class Command(BaseCommand):
    help = (
        "List REDISLOCK['SCHEDULE']'s entries (state, next tick, last run), or pause, resume "
        "or run one now. A pause lives in Redis: every worker skips the entry's ticks until "
        "it is resumed, then it runs from its next tick (the ticks passed meanwhile are not "
        "run). Run enqueues one job of the entry at once, paused or not."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", metavar="{list,pause,resume,run}")
        listing = actions.add_parser("list", help="every entry (the default)")
        listing.add_argument("--json", action="store_true", help="print one JSON object")
        for name, text in (
            ("pause", "skip the entry's ticks until it is resumed"),
            ("resume", "run the entry again from its next tick"),
            ("run", "enqueue one job of the entry now"),
        ):
            actions.add_parser(name, help=text).add_argument(
                "entry", help="the entry's name in REDISLOCK['SCHEDULE']"
            )

    def handle(self, *args: Any, **options: Any) -> None:
        action = options.get("action") or "list"
        with command_errors():
            if action == "list":
                self._list(bool(options.get("json")))
                return
            entry = entry_named(options["entry"])
            if action == "pause":
                self._changed(pause_entry(entry, by=WHO), "Paused", entry, "paused already")
            elif action == "resume":
                self._changed(resume_entry(entry), "Resumed", entry, "not paused")
            else:
                job = run_entry_now(entry)
                assert job is not None  # (without a nonce, one job is always enqueued)
                audit.info("Ran schedule entry %r now: job %s (%s).", entry.name, job.id, WHO)
                self.stdout.write(
                    f"Enqueued job {job.id} of schedule entry {entry.name!r} "
                    f"in queue {entry.queue!r}."
                )

    def _changed(self, changed: bool, done: str, entry: Entry, unchanged: str) -> None:
        if not changed:
            self.stdout.write(f"Schedule entry {entry.name!r} was {unchanged}.")
            return
        audit.info("%s schedule entry %r (%s).", done, entry.name, WHO)
        more = " It runs again from its next tick." if done == "Resumed" else ""
        self.stdout.write(f"{done} schedule entry {entry.name!r}.{more}")

    def _list(self, as_json: bool) -> None:
        rows: list[dict[str, Any]] = []
        valid: list[tuple[dict[str, Any], Entry]] = []
        for name in conf.SCHEDULE:
            row: dict[str, Any] = {"name": str(name)}
            rows.append(row)
            try:
                valid.append((row, entry_named(name)))
            except ValueError as exc:
                row["error"] = str(exc)
        now = time.time()
        states = entry_states([entry for _, entry in valid])
        for (row, _), state in zip(valid, states, strict=True):
            row.update(_described(state, now))
        if as_json:
            self.stdout.write(json.dumps({"entries": rows}, indent=2))
            return
        if not rows:
            self.stdout.write("No entry in REDISLOCK['SCHEDULE'].")
            return
        width = max(len("entry"), *(len(row["name"]) for row in rows))
        self.stdout.write(f"{'entry':<{width}}  {'state':<6}  {'next tick':<19}  last run")
        for row in rows:
            if "error" in row:
                self.stdout.write(f"{row['name']:<{width}}  invalid: {row['error']}")
                continue
            shown = "paused" if row["paused"] else "active"
            last = row["last_run"]
            ran = f"{last['outcome']} {_when(last['at'])} ({last['job']})" if last else "-"
            line = f"{row['name']:<{width}}  {shown:<6}  {_when(row['next_tick']):<19}  {ran}"
            if row["paused"]:
                line += f"  [paused by {row['paused_by'] or '?'} at {_when(row['paused_at'])}]"
            if row["problem"]:
                line += f"  [{row['problem']}]"
            self.stdout.write(line)


def _described(state: EntryState, now: float) -> dict[str, Any]:
    entry, run = state.entry, state.last_run
    return {
        "task": entry.task,
        "queue": entry.queue,
        "paused": state.paused,
        "paused_by": state.paused_by,
        "paused_at": state.paused_at,
        "last_tick": state.last_tick,
        "next_tick": None if state.paused else entry.next_after(entry.latest(now)),
        "last_run": None
        if run is None
        else {"job": run.job_id, "outcome": run.outcome, "at": run.outcome_at},
        "problem": state.problem,
    }
