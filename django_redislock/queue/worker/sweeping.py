"""What every worker sweeps besides its leases: its queues' outboxes (what their scripts
left to deliver: dependants in other queues, registrations, joiners to wake; see
``queue.outbox``), at once when a reply says something was left and every
``SWEEP_EVERY`` seconds in case a worker died before delivering its own; and the records of
workflows that ended long ago (``workflows.workflow.sweep``), every ``RECORDS_EVERY``."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from ...exceptions import RedisUnavailable
from ...workflows.workflow import sweep as sweep_records
from ..outbox import SWEEP_EVERY, deliver
from ..queue import Queue

logger = logging.getLogger("django_redislock.queue.outbox")

RECORDS_EVERY = 60.0


class Sweeping:
    def __init__(self, queues: Sequence[Queue], outbox: threading.Event) -> None:
        self.queues = list(queues)
        self.outbox = outbox  # set when a reply said its script left something there
        self.next_outbox = 0.0
        self.next_records = time.monotonic() + RECORDS_EVERY

    def tend(self) -> None:
        now = time.monotonic()
        if self.outbox.is_set() or now >= self.next_outbox:
            self.next_outbox = now + SWEEP_EVERY
            self.outbox.clear()
            self._each(deliver, "Delivering the outbox")
        if now >= self.next_records:
            self.next_records = now + RECORDS_EVERY
            self._each(sweep_records, "Cleaning up the workflows' records")

    def deliver_all(self) -> int:
        """Deliver every queue's outbox now; how many entries were delivered."""
        self.outbox.clear()
        return self._each(deliver, "Delivering the outbox")

    def _each(self, action: Callable[[Queue], int], what: str) -> int:
        done = 0
        for queue in self.queues:
            try:
                done += action(queue)
            except RedisUnavailable as exc:
                logger.debug("%s of %r failed: %s", what, queue.name, exc)
                break
            except Exception:  # a bug: the worker goes on
                logger.exception("%s of %r failed", what, queue.name)
        return done
