"""Keeping a worker's leases alive: every few seconds the leases of the jobs it holds are
extended; the renewal also tells which running jobs were asked to stop (``queue.cancel``).
Which jobs those are is the ``Leases``' to say (``renewable``, ``still_running``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ..queue import Job, Queue

logger = logging.getLogger("django_redislock.queue.leases")


class Leased(NamedTuple):
    """A job leased by this worker, and its queue."""

    queue: Queue
    job: Job


class Renewal:
    """Extends the leases of the jobs ``renewable()`` names, queue by queue (one round trip
    each); ``on_cancel(queue, job id)`` for a running job asked to stop; a lease found lost
    is warned of while ``still_running(queue, ids)`` keeps its id (it had not just ended)."""

    def __init__(
        self,
        queues: Sequence[Queue],
        renewable: Callable[[], list[Leased]],
        still_running: Callable[[Queue, list[str]], list[str]],
        on_cancel: Callable[[Queue, str], object],
    ) -> None:
        self.queues = list(queues)
        self.renewable, self.still_running, self.on_cancel = renewable, still_running, on_cancel

    def renew(self) -> None:
        """Extend the leases of the jobs running and of those leased ahead."""
        leased = self.renewable()
        for queue in self.queues:
            lost, asked = queue.renew_leases([job for q, job in leased if q is queue])
            for job_id in asked:  # cancelled while running: stopped (see Worker)
                self.on_cancel(queue, job_id)
            if lost:  # a job finished since the copy above was not lost
                lost = self.still_running(queue, lost)
            for job_id in lost:
                logger.warning("Job %s lost its lease; another worker may run it too.", job_id)
