"""The queue worker behind ``manage.py run_queue_worker``: leases jobs, runs them (in its
main thread, or in a pool of threads), keeps their leases alive, heartbeats into Redis and
drains on SIGTERM/SIGINT.

With one job at a time, the worker leases a few jobs ahead while jobs are quick. It tells
Redis of each job as it starts it, together with the jobs finished before it, without
waiting for the reply (``queue_channel``): an attempt is charged when its job starts, so a
job that kills its worker uses up its own attempts and never those of the jobs leased
behind it. The housekeeping thread bounds what leasing ahead costs: a finished job waits at
most ``ACK_HOLD`` for its acknowledgement, and jobs leased ahead of one that runs longer
than ``GIVE_BACK_AFTER``, or of a stop request, go back to the queue for others at once.

Whatever a task raises (``SystemExit`` and ``KeyboardInterrupt`` included) is a failed
attempt of that job; the worker carries on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import select
import signal
import socket
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from secrets import token_hex
from typing import Any

import redis
from django.db import close_old_connections

from ..conf import conf
from ..exceptions import RedisUnavailable
from ..redis.clients import UNAVAILABLE, call, get_redis, is_cluster
from ..redis.durability import redis_durability_warnings
from .channel import Channel
from .core import Job, Queue, get_queue
from .schedule import Scheduler
from .scripts import MAX_BATCH
from .tasks import InvalidTask, run_job

logger = logging.getLogger(__name__)

# Longest single block on Redis while idle (a stop request ends it at once).
MAX_BLOCK = 1.0
MAX_CONCURRENCY = MAX_BATCH
BACKOFF_MAX = 5.0
# Leasing ahead (one job at a time only): up to PREFETCH_MAX jobs while each takes under
# QUICK seconds; back to one after a slower job.
PREFETCH_MAX = 32
QUICK = 0.005
ACK_HOLD = 0.05  # longest wait of a finished job for its acknowledgement
GIVE_BACK_AFTER = 0.25  # a job running this long gives back the jobs leased behind it
TEND = 0.05  # how often the housekeeping thread looks
# Connections found closed, one after the other (the waiter's, the channel's, the kept
# one: one CLIENT KILL closes them all), retried at once before backing off.
RECONNECT_AT_ONCE = 4


def _closed_under_us(exc: BaseException) -> bool:
    """Redis unreachable because a connection that was open got closed, not because a new
    one could not be made (nor because Redis is loading its data)."""
    cause = exc.__cause__
    return (
        isinstance(exc, RedisUnavailable)
        and isinstance(cause, (redis.ConnectionError, OSError))
        and not isinstance(cause, redis.BusyLoadingError)
        and "connecting to" not in str(cause)
    )


class Worker:
    def __init__(
        self,
        queues: Sequence[str] = ("default",),
        *,
        concurrency: int = 1,
        burst: bool = False,
        max_jobs: int | None = None,
        schedule: bool = False,
        using: str | None = None,
    ) -> None:
        if (
            not isinstance(concurrency, int)
            or isinstance(concurrency, bool)
            or not 1 <= concurrency <= MAX_CONCURRENCY
        ):
            raise ValueError(
                f"concurrency must be an int from 1 to {MAX_CONCURRENCY}, not {concurrency!r}."
            )
        if max_jobs is not None and (not isinstance(max_jobs, int) or max_jobs < 1):
            raise ValueError(f"max_jobs must be an int >= 1, not {max_jobs!r}.")
        self.queues: list[Queue] = [get_queue(name, using) for name in queues]
        if not self.queues:
            raise ValueError("queues must name at least one queue.")
        if len({queue.name for queue in self.queues}) < len(self.queues):
            raise ValueError("queues names a queue twice.")
        self.concurrency = concurrency
        self.burst = burst
        self.max_jobs = max_jobs
        # Every worker started with schedule=True also enqueues the SCHEDULE's ticks.
        self.scheduler = Scheduler(using) if schedule and conf.SCHEDULE else None
        self.id = f"{socket.gethostname()}:{os.getpid()}:{token_hex(3)}"
        self.client = self.queues[0].client
        self.active: dict[tuple[str, str], tuple[Queue, Job]] = {}  # running
        # One job at a time: jobs leased ahead, finished jobs not yet acknowledged (with
        # their results, and since when), and when the running job started.
        self.ahead: deque[tuple[Queue, Job]] = deque()
        self.finished: dict[Queue, list[tuple[Job, str | None]]] = {}
        self.finished_since = 0.0
        self.job_started = 0.0
        self.held = threading.Lock()  # guards ahead and finished
        # Each queue's acknowledgements (and, one job at a time, starts and fetches) go out
        # in order on a connection of the worker's own. Serving one queue one job at a
        # time, the next fetch is sent before the jobs ahead run out, and read when they have.
        self.channels = {
            q: Channel(q, self.id, self._warn_lost, self._unfinish) for q in self.queues
        }
        self.flight = self.channels[self.queues[0]] if concurrency == len(queues) == 1 else None
        self.changed = threading.Condition()
        self.stopping = threading.Event()
        self.exiting = threading.Event()  # set once drained: the keeper renews until then
        self.started_jobs = self.processed = self.failed = 0
        self.started_at = time.time()
        self.backoff = 0.1
        self.reconnects = 0  # failures in a row retried at once (connections found closed)
        self.beat = min(5.0, min(q.lease for q in self.queues) / 3)
        self.registry = f"{conf.KEY_PREFIX}:{{W}}:workers"
        self.info_key = f"{conf.KEY_PREFIX}:{{W}}:w:{self.id}"
        self.waiter = Waiter(self.client, [queue.key("wake") for queue in self.queues])

    # --- life cycle -------------------------------------------------------------------

    def run(self) -> None:
        """Work until stopped (or, with ``burst``, until nothing is ready). Raises
        RedisUnavailable when Redis cannot be reached at start."""
        self.heartbeat()  # fails fast, and clearly, when Redis is unreachable at start
        for warning in redis_durability_warnings(self.client):  # eviction, no persistence
            logger.warning("%s (%s) %s", warning.msg, warning.id, warning.hint or "")
        self._install_signals()
        keeper = threading.Thread(target=self._keep_loop, name="redislock-keeper", daemon=True)
        keeper.start()
        threads = [keeper]
        if self.scheduler is not None:
            scheduler = threading.Thread(
                target=self.scheduler.run, args=(self.stopping,), name="redislock-schedule"
            )
            scheduler.start()
            threads.append(scheduler)
        try:
            if self.concurrency == 1:
                self._work_inline()
            else:
                self._work_pooled()
        finally:
            self.stopping.set()
            self.exiting.set()
            for thread in threads:
                thread.join()
            self._give_back()
            self.waiter.shut()
            self._deregister()

    def _work_inline(self) -> None:
        """One job at a time, in this thread, leasing ahead while jobs are quick."""
        prefetch = 1
        while not self._done():
            with self.held:
                item = self.ahead.popleft() if self.ahead else None
                left = len(self.ahead)
            if item is None:
                wait = self._guarded(self._fetch_ahead, prefetch)
                if wait is False:
                    continue  # failed, and waited out the backoff
                if not self.ahead:
                    if self.burst and wait != 0:
                        break
                    close_old_connections()  # as after a request: none kept open idle
                    self._guarded(self._block, wait)
                continue
            flight = self.flight
            if (
                flight is not None
                and prefetch > 2
                and left <= prefetch // 2
                and not flight.fetching
            ):
                self._guarded(self._send_ahead, flight, prefetch)
            queue, job = item
            took = self._run_job(queue, job)
            prefetch = min(prefetch * 2, PREFETCH_MAX) if took < QUICK else 1

    def _work_pooled(self) -> None:
        """``concurrency`` jobs at once, in threads."""
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="redislock-job") as pool:
            while not self._done():
                free = self._wait_for_slot()
                if free == 0 or self.stopping.is_set():
                    continue
                found = self._guarded(self._fetch, pool, free)
                if found is False:
                    continue
                started, wait = found
                if not started:
                    if self.burst and wait != 0 and not self.active:
                        break
                    self._guarded(self._block, wait)
            # leaving the block waits for the running jobs: the drain

    def _done(self) -> bool:
        return self.stopping.is_set() or (
            self.max_jobs is not None and self.started_jobs >= self.max_jobs
        )

    def _guarded(self, step: Callable[..., Any], *args: Any) -> Any:
        """``step(*args)`` (a fetch or a wait), or False after waiting out a backoff when it
        failed: Redis away, or a bug; the worker never stops working for either."""
        try:
            found = step(*args)
            self.backoff = 0.1
            self.reconnects = 0
            return found
        except Exception as exc:
            if _closed_under_us(exc) and self.reconnects < RECONNECT_AT_ONCE:
                # A connection that worked was closed (CLIENT KILL, a proxy, a restart):
                # not a reason to wait; if Redis is really away, connecting fails next.
                self.reconnects += 1
                logger.info("%s; reconnecting.", exc)
                return False
            if isinstance(exc, RedisUnavailable):
                logger.warning("%s; retrying in %.1fs.", exc, self.backoff)
            else:
                logger.exception("Fetching jobs failed; retry in %.1fs.", self.backoff)
            self.stopping.wait(self.backoff * random.uniform(0.5, 1))
            self.backoff = min(self.backoff * 2, BACKOFF_MAX)
            return False

    def stop(self) -> None:
        self.stopping.set()
        self.waiter.interrupt()
        if self.changed.acquire(blocking=False):  # never blocks a signal handler
            try:
                self.changed.notify_all()
            finally:
                self.changed.release()

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def on_signal(signum: int, frame: Any) -> None:
            if self.stopping.is_set():
                logger.warning("Second signal: exiting now; leased jobs run again later.")
                os._exit(128 + signum)
            logger.warning(
                "Stopping: finishing %d running job(s); send the signal again (Ctrl-C) to "
                "exit at once.",
                len(self.active),
            )
            self.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    # --- fetching ---------------------------------------------------------------------

    def _wait_for_slot(self) -> int:
        with self.changed:
            free = self.concurrency - len(self.active)
            if free <= 0:
                self.changed.wait(0.1)
                free = self.concurrency - len(self.active)
        if self.max_jobs is not None:
            free = min(free, self.max_jobs - self.started_jobs)
        return max(0, free)

    def _fetch(self, pool: ThreadPoolExecutor, free: int) -> tuple[int, float | None]:
        started, soonest = 0, None
        for queue in self.queues:
            if free - started <= 0:
                return started, 0.0
            with self.held:
                finished = self.finished.pop(queue, [])
            try:
                jobs, wait, lost = queue.fetch(free - started, worker=self.id, finished=finished)
            except BaseException:
                self._unfinish(queue, finished)
                raise
            self._warn_lost(lost)
            for job in jobs:
                with self.changed:
                    self.active[(queue.name, job.id)] = (queue, job)
                self.started_jobs += 1
                pool.submit(self._run_job, queue, job)
            started += len(jobs)
            if wait is not None and (soonest is None or wait < soonest):
                soonest = wait
        return started, soonest

    def _fetch_ahead(self, count: int) -> float | None:
        """Acknowledge the finished jobs and lease up to ``count`` more (fewer near
        ``max_jobs``), queue by queue, one round trip each; the seconds until the next job
        is due (0: more are ready; None: nothing pending)."""
        if self.flight is not None and self.flight.fetching:
            return self._collect(self.flight)
        if self.max_jobs is not None:
            count = min(count, self.max_jobs - self.started_jobs)
        soonest = None
        for queue in self.queues:
            with self.held:
                finished = self.finished.pop(queue, [])
            if count <= 0 and not finished:
                soonest = 0.0
                continue
            jobs, wait = self.channels[queue].fetch(max(0, count), finished)
            with self.held:
                self.ahead.extend((queue, job) for job in jobs)
            count -= len(jobs)
            if wait is not None and (soonest is None or wait < soonest):
                soonest = wait
        return soonest

    def _send_ahead(self, flight: Channel, count: int) -> None:
        """Send the next fetch now, to be read once the jobs ahead run out."""
        with self.held:
            ahead = len(self.ahead)
            finished = self.finished.pop(flight.queue, [])
        if self.max_jobs is not None:
            count = min(count, self.max_jobs - self.started_jobs - ahead - 1)
        flight.send_fetch(max(0, count), finished)  # on failure, fetched again when needed

    def _collect(self, flight: Channel) -> float | None:
        """Read the fetch in flight: its jobs join those leased ahead. Returns its wait."""
        collected = flight.collect()
        if collected is None:
            return 0.0
        jobs, wait = collected
        with self.held:
            self.ahead.extend((flight.queue, job) for job in jobs)
        return wait

    def _unfinish(self, queue: Queue, finished: Sequence[tuple[Job, str | None]]) -> None:
        """Put back acknowledgements that may not have reached Redis, to send again."""
        if finished:
            with self.held:
                self.finished[queue] = [*finished, *self.finished.get(queue, [])]

    @staticmethod
    def _warn_lost(lost: Sequence[str]) -> None:
        for job_id in lost:
            logger.warning("Job %s lost its lease before it finished; it may run again.", job_id)

    def _block(self, wait: float | None) -> None:
        """Sleep on the queues' wake-up lists until an enqueue (or the next due job)."""
        if wait == 0:
            return
        self.waiter.wait(MAX_BLOCK if wait is None else min(max(wait, 0.001), MAX_BLOCK))

    # --- running ----------------------------------------------------------------------

    def _run_job(self, queue: Queue, job: Job) -> float:
        """Run one job and record its outcome; returns how long it ran (s)."""
        inline = self.concurrency == 1
        with self.changed:
            self.active[(queue.name, job.id)] = (queue, job)
        if inline:
            self.started_jobs += 1
        channel = self.channels[queue]
        if inline:  # leased ahead: charge its attempt now, and acknowledge those before it
            with self.held:
                finished = self.finished.pop(queue, [])
            channel.note(finished, [job])
        start = self.job_started = time.monotonic()
        close_old_connections()
        try:
            try:
                value = run_job(job)
            except InvalidTask as exc:
                logger.error("Job %s in %r cannot run: %s", job.id, queue.name, exc)
                invalid, trace = exc, traceback.format_exc()
                self._settle(channel if inline else None, lambda: queue.bury(job, invalid, trace))
                self.failed += 1
                return time.monotonic() - start
            except BaseException as exc:  # SystemExit, KeyboardInterrupt: the task's own
                # The Tasks framework logs the failure with its traceback (task_finished).
                logger.info("Job %s (%s) in %r failed: %s", job.id, job.task, queue.name,
                            type(exc).__name__)  # fmt: skip
                error, trace = exc, traceback.format_exc()
                self._settle(channel if inline else None, lambda: queue.fail(job, error, trace))
                self.failed += 1
                return time.monotonic() - start
            if inline:  # acknowledged with the next start or fetch, or by the keeper
                with self.held:
                    if not self.finished:
                        self.finished_since = time.monotonic()
                    self.finished.setdefault(queue, []).append((job, value))
            else:  # at once, so that no finished job depends on this process living on
                channel.note([(job, value)])
            self.processed += 1
            return time.monotonic() - start
        finally:
            if not inline:  # inline, the next job's start or going idle closes them
                close_old_connections()
            with self.changed:
                self.active.pop((queue.name, job.id), None)
                self.changed.notify_all()

    def _settle(self, channel: Channel | None, action: Callable[[], bool]) -> None:
        """Record a job's outcome, retrying while Redis is away (up to about a lease). What
        was sent on ``channel`` (the job's start) reaches Redis first."""
        delay, deadline = 0.1, time.monotonic() + min(q.lease for q in self.queues)
        while True:
            try:
                if channel is not None:
                    channel.sync()
                if not action():
                    logger.warning("A job's lease ran out before it finished; it may run again.")
                return
            except (RedisUnavailable, redis.ResponseError) as exc:
                # Redis away, or refusing writes for now (out of memory, a failover's
                # read-only replica): the outcome is retried, never the worker's end.
                logger.debug("Recording a job's outcome failed: %s", exc)
                if time.monotonic() > deadline:
                    logger.error("Could not record a job's outcome; it will run again.")
                    return
                time.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)
            except Exception:  # a bug, or what a task left behind: never the worker's end
                logger.exception("Could not record a job's outcome; it will run again.")
                return

    # --- heartbeat and registry -------------------------------------------------------

    def _keep_loop(self) -> None:
        """Housekeeping: acknowledgements held too long, jobs leased ahead of a long one,
        and the heartbeat."""
        next_beat = time.monotonic() + self.beat
        while not self.exiting.wait(TEND):
            try:
                self._keep()
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + self.beat
                    self.heartbeat()
            except Exception:  # retried on the next round; the loop must not die
                logger.warning("Worker housekeeping failed", exc_info=True)

    def _keep(self) -> None:
        now = time.monotonic()
        running_for = now - self.job_started if self.active else 0.0
        long_job = running_for > GIVE_BACK_AFTER
        if (
            self.flight is not None
            and self.flight.fetching
            and (running_for > ACK_HOLD or self.stopping.is_set())
        ):  # its jobs join those ahead: renewed with them, or given back below
            self._collect(self.flight)
        with self.held:
            finished = {}
            if self.finished and now - self.finished_since > ACK_HOLD:
                finished, self.finished = self.finished, {}
            ahead: list[tuple[Queue, Job]] = []
            if self.ahead and (long_job or self.stopping.is_set()):
                ahead = list(self.ahead)
                self.ahead.clear()
        self._acknowledge(finished)
        self._release(ahead)
        for channel in self.channels.values():
            channel.poll()

    def _acknowledge(self, finished: dict[Queue, list[tuple[Job, str | None]]]) -> None:
        """Send the acknowledgements of finished jobs (not waiting for the replies); those
        that cannot be sent are put back, to be sent again."""
        for queue, done in finished.items():
            self.channels[queue].note(done)

    def _release(self, ahead: list[tuple[Queue, Job]]) -> None:
        for queue in self.queues:
            jobs = [job for q, job in ahead if q is queue]
            if jobs:
                logger.debug("Giving back %d job(s) leased ahead.", len(jobs))
                queue.release(jobs)

    def _give_back(self) -> None:
        """At exit: acknowledge what finished, and give back the jobs leased ahead."""
        try:
            if self.flight is not None:
                self._collect(self.flight)
            with self.held:
                finished, self.finished = self.finished, {}
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

    def heartbeat(self) -> None:
        with self.changed:
            active = list(self.active.values())
        with self.held:
            leased = active + list(self.ahead)
        for queue in self.queues:
            mine = [job for q, job in leased if q is queue]
            lost = queue.renew(mine)
            if lost:
                with self.changed:  # a job finished since the copy above was not lost
                    lost = [i for i in lost if (queue.name, i) in self.active]
            for job_id in lost:
                logger.warning("Job %s lost its lease; another worker may run it too.", job_id)
        now = time.time()
        info = {
            "id": self.id, "host": socket.gethostname(), "pid": os.getpid(),
            "queues": [q.name for q in self.queues], "started": self.started_at,
            "beat": now, "jobs": [f"{q.name}:{job.id}" for q, job in active],
            "processed": self.processed, "failed": self.failed, "concurrency": self.concurrency,
        }  # fmt: skip
        ttl_ms = max(1000, round(self.beat * 3000))
        pipe = self.client.pipeline(transaction=False)
        pipe.set(self.info_key, json.dumps(info), px=ttl_ms)
        pipe.zadd(self.registry, {self.id: now * 1000 + ttl_ms})
        pipe.zremrangebyscore(self.registry, "-inf", now * 1000)
        try:
            pipe.execute()
        except UNAVAILABLE as exc:
            raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc

    def _deregister(self) -> None:
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.delete(self.info_key)
            pipe.zrem(self.registry, self.id)
            pipe.execute()
        except Exception:  # Redis away at exit: the entry expires by itself
            logger.info("Could not deregister worker %s; its entry expires.", self.id)


def live_workers(using: str | None = None) -> list[dict[str, Any]]:
    """The workers that heartbeat recently, as they describe themselves; an entry that is not
    a JSON object is ``{"id": ..., "unreadable": <what it holds>}``."""
    client = get_redis(using)
    registry = f"{conf.KEY_PREFIX}:{{W}}:workers"
    ids = client.zrangebyscore(registry, time.time() * 1000, "+inf")
    if not ids:
        return []
    names = [i.decode(errors="replace") for i in ids]
    keys = [f"{conf.KEY_PREFIX}:{{W}}:w:{name}" for name in names]
    workers: list[dict[str, Any]] = []
    for name, value in zip(names, client.mget(keys), strict=True):
        if value is None:
            continue
        try:
            info = json.loads(value)
        except ValueError as exc:  # not JSON, or not UTF-8: written by something else
            info = f"not JSON ({exc})"
        if not isinstance(info, dict):  # shown as such, never an error for the others
            info = {"id": name, "unreadable": f"{info!s:.200}"}
        workers.append(info)
    return workers


class Waiter:
    """Blocks on the queues' wake-up lists until a token arrives or a deadline passes, to
    the millisecond.

    Redis times out a blocked BLPOP only on its next internal tick (every 100 ms at the
    default ``hz 10``), which would start delayed jobs up to 100 ms late. So the waiter keeps
    a connection of its own per BLPOP, waits for the reply locally with a precise timeout,
    and at the deadline unblocks itself (``CLIENT UNBLOCK``) from another connection. A
    server without ``CLIENT UNBLOCK`` (fakeredis) gets plain BLPOP timeouts."""

    def __init__(self, client: Any, keys: Sequence[str]) -> None:
        self.client = client
        self.keys = list(keys)
        if is_cluster(client):  # one BLPOP per key (slot), each on its node
            self.groups = [(client.get_node_from_key(k).redis_connection, [k]) for k in keys]
        else:
            self.groups = [(client, self.keys)]
        self.conns: list[Any] = []
        self.ids: list[int] = []
        self.precise = True
        # A byte on this pair ends a wait at once (``interrupt``: a stop request).
        self.bell, self.ringer = socket.socketpair()
        self.bell.setblocking(False)
        self.ringer.setblocking(False)

    def interrupt(self) -> None:
        """End the current (or the next) wait now; safe from a signal handler."""
        with contextlib.suppress(OSError):  # full (already rung) or closed
            self.ringer.send(b"!")

    def _connect(self) -> None:
        for node, _ in self.groups:
            conn = node.connection_pool.get_connection()
            self.conns.append(conn)
            conn.send_command("CLIENT", "ID")
            self.ids.append(int(conn.read_response()))
            node.execute_command("CLIENT", "UNBLOCK", self.ids[-1])  # supported?

    def wait(self, timeout: float) -> None:
        try:
            if self.precise and not self.conns:
                try:
                    self._connect()
                except redis.ResponseError:
                    self.close()
                    self.precise = False
            if not self.precise:
                self._wait_plainly(timeout)
                return
            backstop = timeout + 1.0  # if an unblock were lost, Redis ends the wait anyway
            for conn, (_, keys) in zip(self.conns, self.groups, strict=True):
                conn.send_command("BLPOP", *keys, backstop)
            answered = self._readable(timeout)
            for i, (node, _) in enumerate(self.groups):
                if i not in answered:
                    node.execute_command("CLIENT", "UNBLOCK", self.ids[i])
            for conn in self.conns:  # a token, or nil once unblocked
                conn.read_response()
        except UNAVAILABLE as exc:
            self.close()
            raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc

    def _readable(self, timeout: float) -> set[int]:
        ready = {i for i, conn in enumerate(self.conns) if conn.can_read(timeout=0)}
        if ready:
            return ready
        socks = [conn._sock for conn in self.conns]
        readable, _, _ = select.select([*socks, self.bell], [], [], timeout)
        if self.bell in readable:
            self._hush()
        return {socks.index(sock) for sock in readable if sock is not self.bell}

    def _hush(self) -> None:
        with contextlib.suppress(OSError):  # nothing more to read
            while self.bell.recv(64):
                pass

    def _wait_plainly(self, timeout: float) -> None:
        if len(self.groups) > 1:  # one BLPOP cannot span hash slots: take turns, briefly
            for key in self.keys:
                call(self.client, "BLPOP", key, min(timeout, 0.05))
            return
        call(self.client, "BLPOP", *self.keys, timeout)

    def close(self) -> None:
        for conn, (node, _) in zip(self.conns, self.groups, strict=False):
            conn.disconnect()
            node.connection_pool.release(conn)
        self.conns, self.ids = [], []

    def shut(self) -> None:
        """Close for good, the interrupting pair too."""
        self.close()
        self.bell.close()
        self.ringer.close()
