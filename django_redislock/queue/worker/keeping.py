"""The keeper thread's round, mixed into ``Leases``: every ``TEND`` seconds it sends the
acknowledgements held past ``ACK_HOLD``, gives back the jobs leased ahead of a job running
longer than ``GIVE_BACK_AFTER``, of a stop request or of a pause, reads the replies that have
come, renews the leases (every ``renew_every``) and sweeps the queues' outboxes."""

from __future__ import annotations

import threading
import time

from ..queue import Job, Queue
from .acknowledgements import ACK_HOLD
from .channel import Channel
from .expiry import paused_since
from .giving_back import GivingBack
from .renewal import Leased, Renewal
from .sweeping import Sweeping

GIVE_BACK_AFTER = 0.25  # a job running this long gives back the jobs leased behind it
TEND = 0.05  # how often the keeper thread looks


class Keeping(GivingBack):
    running: dict[tuple[str, str], Leased]
    stopping: threading.Event
    job_started: float
    renew_every: float
    next_renewal: float
    renewal: Renewal
    sweeping: Sweeping

    def keep(self) -> None:
        """One round of the keeper thread."""
        self.tend()
        now = time.monotonic()
        if now >= self.next_renewal:
            self.next_renewal = now + self.renew_every
            self.renewal.renew()
        self.sweeping.tend()

    def tend(self) -> None:
        """Acknowledge finished jobs held too long; give back the jobs leased ahead of a long
        job or of a stop request; read the replies that have come."""
        now = time.monotonic()
        running_for = now - self.job_started if self.running else 0.0
        stopping = self.stopping.is_set()
        flight = self.flight
        if flight is not None and flight.fetching and (running_for > ACK_HOLD or stopping):
            self._collect(flight)  # its jobs join those ahead: renewed, or given back below
        finished = self.finished.take_all(overdue_only=True)
        with self.held:
            ahead: list[Leased] = []
            if self.ahead and (running_for > GIVE_BACK_AFTER or stopping):
                ahead = list(self.ahead)
                self.ahead.clear()
        self._acknowledge(finished)
        self._release(ahead)
        for channel in self.channels.values():
            channel.poll()
        if self.expired.paused.is_set() or (self.ahead and paused_since(self.ahead_jobs())):
            self._give_back_ahead()

    def ahead_jobs(self) -> list[tuple[Queue, Job]]:
        with self.held:
            return [(queue, job) for queue, job in self.ahead]

    def _collect(self, flight: Channel) -> float | None:
        """Read the fetch in flight: its jobs join those leased ahead. Returns its wait."""
        collected = flight.collect()
        if collected is None:
            return 0.0
        jobs, wait, _ = collected
        with self.held:
            self.ahead.extend(Leased(flight.queue, job) for job in jobs)
        return wait
