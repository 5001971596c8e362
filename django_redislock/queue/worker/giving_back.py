"""What the worker's leases give back or send before going idle, mixed into ``Leases``: the
acknowledgements held, the jobs leased ahead (at a pause, at the worker's stop)."""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence

from ...exceptions import RedisUnavailable
from ..queue import Queue
from .acknowledgements import Acknowledgements, Finished
from .channel import Channel
from .expiry import ExpiredAtStart
from .renewal import Leased

logger = logging.getLogger("django_redislock.queue.leases")  # the name users' LOGGING knows


class GivingBack:
    queues: Sequence[Queue]
    channels: dict[Queue, Channel]
    finished: Acknowledgements
    expired: ExpiredAtStart
    held: threading.Lock
    ahead: deque[Leased]
    flight: Channel | None

    def _collect(self, flight: Channel) -> float | None:
        raise NotImplementedError

    def _give_back_ahead(self) -> None:
        """A pause came after jobs were leased ahead: they go back (POP holds them now)."""
        self.expired.paused.clear()
        with self.held:
            ahead = list(self.ahead)
            self.ahead.clear()
        try:
            self._release(ahead)
        except RedisUnavailable:  # their leases lapse: POP takes them back
            logger.debug("Could not give back the jobs leased ahead of a pause.")

    def settle(self) -> bool:
        """Before going idle: send the acknowledgements held and read every reply (an end
        may have freed a permit, and let a parked job go). True when there were any."""
        finished = self.finished.take_all()
        pending = bool(finished) or any(c.pending for c in self.channels.values())
        self._acknowledge(finished)
        for channel in self.channels.values():
            channel.sync()
        return pending

    def _acknowledge(self, finished: dict[Queue, Finished]) -> None:
        for queue, done in finished.items():  # not waiting; what cannot be sent comes back
            self.channels[queue].note(done)

    def _release(self, ahead: list[Leased]) -> None:  # not started: not an attempt
        for queue in self.queues:
            jobs = [job for q, job in ahead if q is queue]
            if jobs:
                logger.debug("Giving back %d job(s) leased ahead.", len(jobs))
                queue.release(jobs)

    def _give_back(self) -> None:
        try:
            if self.flight is not None:
                self._collect(self.flight)
            finished = self.finished.take_all()
            with self.held:
                ahead = list(self.ahead)
                self.ahead.clear()
            self._acknowledge(finished)
            for channel in self.channels.values():
                channel.sync()
            self._release(ahead)
        except RedisUnavailable:
            logger.warning("Redis is unreachable at exit; unacknowledged jobs run again later.")
        finally:
            for channel in self.channels.values():
                channel.close()
