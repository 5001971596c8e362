"""The renewal half of a worker's ``Leases``: the leases of the jobs running and leased
ahead are extended every few seconds; the renewal also tells which running jobs were asked
to stop (``queue.cancel``), and a job far past its time limit is left to lapse."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from ..queue import Job, Queue

logger = logging.getLogger("django_redislock.queue.leases")

Leased = tuple[Queue, Job]


class Renewal:
    queues: list[Queue]
    changed: threading.Condition  # guards running
    held: threading.Lock  # guards ahead
    running: dict[tuple[str, str], Leased]
    ahead: deque[Leased]
    # running, their lease left to lapse
    unrenewed: set[tuple[str, str]]
    # called with (queue, job id) for a running job asked to stop (the Worker's limits)
    on_cancel: Callable[[Queue, str], object]

    def stop_renewing(self, queue: Queue, job: Job) -> None:
        """Let a running job's lease lapse (far past its time limit): delivered again."""
        with self.changed:
            if (queue.name, job.id) in self.running:
                self.unrenewed.add((queue.name, job.id))

    def renew(self) -> None:
        """Extend the leases of the jobs running and of those leased ahead."""
        with self.changed:
            running = [v for k, v in self.running.items() if k not in self.unrenewed]
        with self.held:
            leased = running + list(self.ahead)
        for queue in self.queues:
            lost, asked = queue.renew_leases([job for q, job in leased if q is queue])
            for job_id in asked:  # cancelled while running: stopped (see Worker)
                self.on_cancel(queue, job_id)
            if lost:
                with self.changed:  # a job finished since the copy above was not lost
                    lost = [i for i in lost if (queue.name, i) in self.running]
            for job_id in lost:
                logger.warning("Job %s lost its lease; another worker may run it too.", job_id)
