"""The finished jobs of a worker serving one job at a time whose acknowledgements have not
been sent yet, queue by queue: each goes out with the next START or fetch of its queue, or
once it has waited ``ACK_HOLD`` (the keeper thread), or at the worker's stop."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from ..queue import Job, Queue

ACK_HOLD = 0.05  # longest wait of a finished job for its acknowledgement

Finished = list[tuple[Job, "str | None"]]


class Acknowledgements:
    """Finished jobs and their return values (JSON), held until sent; any thread."""

    def __init__(self) -> None:
        self.held: dict[Queue, Finished] = {}
        self.since = 0.0  # when the oldest held began to wait (monotonic)
        self.lock = threading.Lock()

    def add(self, queue: Queue, job: Job, value: str | None) -> None:
        with self.lock:
            if not self.held:
                self.since = time.monotonic()
            self.held.setdefault(queue, []).append((job, value))

    def take(self, queue: Queue) -> Finished:
        """Those of ``queue``, now to be sent."""
        with self.lock:
            return self.held.pop(queue, [])

    def take_all(self, overdue_only: bool = False) -> dict[Queue, Finished]:
        """Every queue's; with ``overdue_only``, none unless the oldest waited ``ACK_HOLD``."""
        with self.lock:
            if not self.held or (overdue_only and time.monotonic() - self.since <= ACK_HOLD):
                return {}
            taken, self.held = self.held, {}
            return taken

    def put_back(self, queue: Queue, finished: Sequence[tuple[Job, str | None]]) -> None:
        """Acknowledgements that may not have reached Redis, to send again (first)."""
        if finished:
            with self.lock:
                self.held[queue] = [*finished, *self.held.get(queue, [])]
