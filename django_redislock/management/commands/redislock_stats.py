"""``manage.py redislock_stats``: jobs per state and the oldest ready job's wait, per queue,
and the live workers; ``--json`` for scripts and monitoring."""

from __future__ import annotations

import json
import time
from typing import Any

import redis
from django.core.management.base import BaseCommand, CommandParser

from django_redislock.conf import conf
from django_redislock.management.operating import command_errors, named_queue, seconds
from django_redislock.queue.jobs import LISTED_STATES

from ...queue.worker.registry import live_workers


class Command(BaseCommand):
    help = (
        "Show each queue's jobs per state (ready, scheduled, running, dead), how long its "
        "oldest ready job has waited, and the live workers."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queue",
            action="append",
            dest="queues",
            metavar="Q",
            help="only this queue, and the workers serving it (repeat for several)",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        with command_errors():
            names = options["queues"] or list(conf.QUEUES)
            queues = {name: self._queue(name) for name in dict.fromkeys(names)}
            workers = [
                w
                for w in live_workers()
                if not options["queues"] or set(w.get("queues") or ()) & set(queues)
            ]
        now = time.time()
        for worker in workers:
            if isinstance(worker.get("beat"), (int, float)):
                worker["heartbeat_age"] = round(max(0.0, now - worker["beat"]), 3)
        if options["json"]:
            self.stdout.write(json.dumps({"queues": queues, "workers": workers}, indent=2))
        else:
            self._table(queues, workers)

    @staticmethod
    def _queue(name: str) -> dict[str, Any]:
        queue = named_queue(name)
        try:
            stats: dict[str, Any] = dict(queue.counts())
            age = queue.oldest_ready_age()
        except redis.ResponseError as exc:  # one damaged queue: the others are still shown
            return {"error": str(exc)}
        stats["oldest_ready_age"] = None if age is None else round(age, 3)
        stats["paused"] = sorted(queue.paused())
        return stats

    def _table(self, queues: dict[str, dict[str, Any]], workers: list[dict[str, Any]]) -> None:
        width = max([len("queue"), *map(len, queues)])
        states = [*(str(state) for state in LISTED_STATES), "parked"]
        self.stdout.write(
            f"{'queue':<{width}}  " + "  ".join(f"{s:>9}" for s in states) + "  oldest ready"
        )
        for name, stats in queues.items():
            if "error" in stats:
                self.stdout.write(f"{name:<{width}}  unreadable: {stats['error']}")
                continue
            counts = "  ".join(f"{stats[s]:>9}" for s in states)
            paused = ", ".join(stats["paused"]).replace("*", "the whole queue")
            self.stdout.write(
                f"{name:<{width}}  {counts}  {seconds(stats['oldest_ready_age'])}"
                + (f"  (paused: {paused})" if paused else "")
            )
        self.stdout.write(f"\n{len(workers)} live worker(s)")
        for worker in workers:
            if "unreadable" in worker:
                self.stdout.write(f"  {worker.get('id')}: unreadable entry")
                continue
            self.stdout.write(
                f"  {worker.get('id')}: queues {', '.join(worker.get('queues') or [])}; "
                f"running {len(worker.get('jobs') or [])} of {worker.get('concurrency', '?')}, "
                f"{worker.get('processed', 0)} done, {worker.get('failed', 0)} failed; "
                f"heartbeat {seconds(worker.get('heartbeat_age'))} ago"
            )
