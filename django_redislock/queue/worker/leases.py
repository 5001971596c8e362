"""The worker's leased jobs: fetching them, keeping their leases alive, acknowledging those
that finished and giving back those that never started. With one job at a time, jobs are
leased a few ahead while they are quick; each is told to Redis as it starts, with the jobs
finished before it, without waiting for the reply (``channel``): an attempt is charged when
its job starts, so a job that kills its worker uses up its own attempts, never those of the
jobs leased behind it. The keeper thread (``keeping``) bounds what leasing ahead costs: a
finished job waits at most ``ACK_HOLD`` for its acknowledgement, and jobs leased ahead of one
running longer than ``GIVE_BACK_AFTER``, of a stop request or of a pause (seen by the keeper,
or in a START's reply), go back to the queue at once."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from ...exceptions import RedisUnavailable
from ..queue import Job, Queue
from .acknowledgements import Acknowledgements
from .background import Background, periodic
from .channel import Channel
from .expiry import ExpiredAtStart
from .keeping import TEND, Keeping
from .renewal import Leased, Renewal
from .sweeping import Sweeping

logger = logging.getLogger("django_redislock.queue.leases")  # the name users' LOGGING knows

# Leasing ahead (one job at a time only): up to PREFETCH_MAX jobs while each takes under
# QUICK seconds; back to one after a slower job.
PREFETCH_MAX = 32
QUICK = 0.005


def _sooner(soonest: float | None, wait: float | None) -> float | None:
    return wait if wait is not None and (soonest is None or wait < soonest) else soonest


class Leases(Keeping):
    """The jobs a worker holds: leased ahead, running, finished and not yet acknowledged.
    ``one_at_a_time``: jobs are leased ahead and charged as they start, and finished ones
    are acknowledged with the next start or fetch; else each is charged as it is fetched
    and acknowledged as it finishes."""

    def __init__(
        self,
        queues: Sequence[Queue],
        worker_id: str,
        *,
        one_at_a_time: bool,
        renew_every: float,
        stopping: threading.Event,
    ) -> None:
        self.queues, self.worker_id = list(queues), worker_id
        self.one_at_a_time = one_at_a_time
        self.renew_every = renew_every
        self.stopping = stopping  # a stop request: the jobs ahead go back at once
        self.on_cancel: Callable[[Queue, str], object] = lambda queue, job_id: None
        self.running: dict[tuple[str, str], Leased] = {}
        self.unrenewed: set[tuple[str, str]] = set()  # running, their lease left to lapse
        # guards running and unrenewed (through the lock itself where nothing is notified:
        # cheaper); notified as a job ends while several run at once
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.job_started = 0.0  # when the latest job started
        self.ahead: deque[Leased] = deque()
        self.held = threading.Lock()  # guards ahead
        self.finished = Acknowledgements()  # not sent yet (one at a time), or to send again
        self.prefetch = 1
        # Each queue's acknowledgements (and, one job at a time, starts and fetches) go out
        # in order on a connection of the worker's own. Serving one queue one job at a
        # time, the next fetch is sent before the jobs ahead run out, and read when they have.
        self.expired = ExpiredAtStart()  # told by START's replies
        self.channels = {
            q: Channel(q, worker_id, self.expired.lost, self.finished.put_back) for q in queues
        }
        single = one_at_a_time and len(self.queues) == 1
        self.flight = self.channels[self.queues[0]] if single else None
        self.renewal = Renewal(
            self.queues,
            self.renewable,
            self.still_running,
            lambda queue, job_id: self.on_cancel(queue, job_id),
        )
        self.next_renewal = 0.0
        self.sweeping = Sweeping(self.queues, self.expired.outbox)
        keeping = periodic(TEND, self.keep, "Worker housekeeping")
        self.keeper = Background("redislock-keeper", keeping, daemon=True)

    def start(self) -> None:
        self.next_renewal = time.monotonic() + self.renew_every
        self.keeper.start()

    def stop(self) -> None:
        """Once no job runs any more: acknowledge what finished, give back the jobs ahead,
        deliver what that left in the outboxes."""
        self.keeper.stop()
        self._give_back()
        self.sweeping.deliver_all()

    def next(self) -> Leased | None:
        if self.expired.paused.is_set():  # (a START's reply, read by the keeper, said so)
            self._give_back_ahead()
        with self.held:
            return self.ahead.popleft() if self.ahead else None

    def has_ahead(self) -> bool:
        return bool(self.ahead)

    def fetch_ahead(self, budget: int | None) -> float | None:
        """Acknowledge the finished jobs and lease up to ``prefetch`` more (at most
        ``budget``), queue by queue, one round trip each; the seconds until the next job is
        due (0: more are ready; None: nothing pending)."""
        if self.flight is not None and self.flight.fetching:
            return self._collect(self.flight)
        count = self.prefetch if budget is None else min(self.prefetch, budget)
        soonest = None
        self._deliver_told()
        for queue in self.queues:
            finished = self.finished.take(queue)
            if count <= 0 and not finished:
                soonest = 0.0
                continue
            jobs, wait, _ = self.channels[queue].fetch(max(0, count), finished)
            with self.held:
                self.ahead.extend(Leased(queue, job) for job in jobs)
            count -= len(jobs)
            soonest = _sooner(soonest, wait)
        if self._deliver_told():  # it may have made jobs ready: look again at once
            return 0.0
        return soonest

    def send_ahead(self, budget: int | None) -> None:
        """When the jobs ahead run low, send the next fetch now, to be read once they have
        run out (at most ``budget`` jobs, counting those ahead and the one starting)."""
        flight, prefetch = self.flight, self.prefetch
        if flight is None or prefetch <= 2 or flight.fetching:
            return
        ahead = len(self.ahead)
        if ahead > prefetch // 2:
            return
        finished = self.finished.take(flight.queue)
        count = prefetch if budget is None else min(prefetch, budget - ahead - 1)
        flight.send_fetch(max(0, count), finished)  # on failure, fetched again when needed

    def ran(self, took: float) -> None:
        """A job ran for ``took`` seconds: lease more ahead after a quick one."""
        self.prefetch = min(self.prefetch * 2, PREFETCH_MAX) if took < QUICK else 1

    def free_slots(self, concurrency: int) -> int:
        """How many of ``concurrency`` jobs can start now (waiting briefly for one)."""
        with self.changed:
            if concurrency - len(self.running) <= 0:
                self.changed.wait(0.1)
            return concurrency - len(self.running)

    def fetch(self, free: int, launch: Callable[[Queue, Job], None]) -> tuple[int, float | None]:
        """Lease and charge up to ``free`` jobs, queue by queue, each handed to ``launch`` as
        soon as its queue replied; how many, and the wait as ``fetch_ahead``'s."""
        started, soonest = 0, None
        for queue in self.queues:
            if free - started <= 0:
                return started, 0.0
            finished = self.finished.take(queue)
            try:
                jobs, wait, lost = queue.fetch(
                    free - started, worker=self.worker_id, finished=finished
                )
            except BaseException:
                self.finished.put_back(queue, finished)
                raise
            self.expired.lost(lost)
            for job in jobs:
                with self.lock:
                    self.running[(queue.name, job.id)] = Leased(queue, job)
                launch(queue, job)
            started += len(jobs)
            soonest = _sooner(soonest, wait)
        if self._deliver_told():  # it may have made jobs ready: look again at once
            return started, 0.0
        return started, soonest

    def _deliver_told(self) -> bool:
        """What a reply said its script left in an outbox (dependants, joiners) is delivered
        here and now, not at the keeper's next round: a dependant starts at once. Whether
        anything was delivered."""
        return self.expired.outbox.is_set() and self.sweeping.deliver_all() > 0

    def wake(self) -> None:
        """Wake a wait for a free slot; never blocks (a signal handler calls it)."""
        if self.changed.acquire(blocking=False):
            try:
                self.changed.notify_all()
            finally:
                self.changed.release()

    def begin(self, queue: Queue, job: Job) -> bool:
        """A job starts: False when it may not (it expired while leased ahead)."""
        with self.lock:
            self.running[(queue.name, job.id)] = Leased(queue, job)
        if self.one_at_a_time:  # leased ahead: charge its attempt now, acknowledge those before
            channel = self.channels[queue]
            channel.note(self.finished.take(queue), [job])
            if not self.expired.may_start(channel, job):
                return False
        self.job_started = time.monotonic()
        return True

    def succeeded(self, queue: Queue, job: Job, value: str | None) -> None:
        # One at a time, acknowledged with the next start or fetch, or by the keeper; but at
        # once when jobs wait for it: they start the moment it ended.
        if self.one_at_a_time and not job.dependants:
            self.finished.add(queue, job, value)
            return
        channel = self.channels[queue]
        channel.note([(job, value)])  # at once: no finished job depends on this process
        if any("\t" in ref for ref in job.dependants):  # (in another queue: the outbox's)
            try:
                channel.sync()  # its reply read now, and what it left delivered
            except RedisUnavailable:
                return  # (handed back, sent again; the sweep delivers)
            self._deliver_told()

    def sync(self, queue: Queue) -> None:  # before a failure: Redis saw the start first
        if self.one_at_a_time:
            self.channels[queue].sync()

    def end(self, queue: Queue, job: Job) -> None:
        with self.lock:
            self.running.pop((queue.name, job.id), None)
            self.unrenewed.discard((queue.name, job.id))
            if not self.one_at_a_time:  # free_slots may be waiting
                self.changed.notify_all()

    def running_ids(self) -> list[str]:
        with self.lock:
            return [f"{q.name}:{job.id}" for q, job in self.running.values()]

    def renewable(self) -> list[Leased]:
        """The jobs whose leases are kept: those running (but the ones left to lapse) and
        those leased ahead."""
        with self.lock:
            running = [v for k, v in self.running.items() if k not in self.unrenewed]
        with self.held:
            return running + list(self.ahead)

    def still_running(self, queue: Queue, job_ids: list[str]) -> list[str]:
        """Those of ``job_ids`` of ``queue`` that run here now."""
        with self.lock:
            return [i for i in job_ids if (queue.name, i) in self.running]

    def stop_renewing(self, queue: Queue, job: Job) -> None:
        """Let a running job's lease lapse (far past its time limit): delivered again."""
        with self.lock:
            if (queue.name, job.id) in self.running:
                self.unrenewed.add((queue.name, job.id))

    def running_count(self) -> int:
        return len(self.running)
