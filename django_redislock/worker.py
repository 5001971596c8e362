"""The queue worker behind ``manage.py run_queue_worker``: leases jobs, runs them in threads,
keeps their leases alive, heartbeats into Redis and drains on SIGTERM/SIGINT."""

from __future__ import annotations

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
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from secrets import token_hex
from typing import Any

import redis
from django.db import close_old_connections

from .conf import conf
from .connection import UNAVAILABLE, call, get_redis, is_cluster
from .exceptions import RedisUnavailable
from .queue import Job, Queue, get_queue
from .schedule import Scheduler
from .tasks import InvalidTask, run_job

logger = logging.getLogger(__name__)

# Longest single block on Redis while idle: bounds how late a stop request or a heartbeat is.
MAX_BLOCK = 1.0
BACKOFF_MAX = 5.0


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
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be an int >= 1, not {concurrency!r}.")
        if max_jobs is not None and (not isinstance(max_jobs, int) or max_jobs < 1):
            raise ValueError(f"max_jobs must be an int >= 1, not {max_jobs!r}.")
        self.queues: list[Queue] = [get_queue(name, using) for name in queues]
        if not self.queues:
            raise ValueError("queues must name at least one queue.")
        self.concurrency = concurrency
        self.burst = burst
        self.max_jobs = max_jobs
        # Every worker started with schedule=True also enqueues the SCHEDULE's ticks.
        self.scheduler = Scheduler(using) if schedule and conf.SCHEDULE else None
        self.id = f"{socket.gethostname()}:{os.getpid()}:{token_hex(3)}"
        self.client = self.queues[0].client
        self.active: dict[tuple[str, str], tuple[Queue, Job]] = {}
        self.changed = threading.Condition()
        self.stopping = threading.Event()
        self.started_jobs = self.processed = self.failed = 0
        self.started_at = time.time()
        self.beat = min(5.0, min(q.lease for q in self.queues) / 3)
        self.registry = f"{conf.KEY_PREFIX}:{{W}}:workers"
        self.info_key = f"{conf.KEY_PREFIX}:{{W}}:w:{self.id}"
        self.waiter = Waiter(self.client, [queue.key("wake") for queue in self.queues])

    # --- life cycle -------------------------------------------------------------------

    def run(self) -> None:
        """Work until stopped (or, with ``burst``, until nothing is ready). Raises
        RedisUnavailable when Redis cannot be reached at start."""
        self.heartbeat()  # fails fast, and clearly, when Redis is unreachable at start
        self._install_signals()
        beater = threading.Thread(target=self._beat_loop, name="redislock-heartbeat", daemon=True)
        beater.start()
        threads = [beater]
        if self.scheduler is not None:
            scheduler = threading.Thread(
                target=self.scheduler.run, args=(self.stopping,), name="redislock-schedule"
            )
            scheduler.start()
            threads.append(scheduler)
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="redislock-job")
        backoff = 0.1
        try:
            while not self.stopping.is_set():
                if self.max_jobs is not None and self.started_jobs >= self.max_jobs:
                    break
                free = self._wait_for_slot()
                if free == 0 or self.stopping.is_set():
                    continue
                try:
                    started, wait = self._fetch(pool, free)
                    if not started:
                        if self.burst and wait != 0 and not self.active:
                            break
                        self._block(wait)
                    backoff = 0.1
                except Exception as exc:  # Redis away, or a bug: never stop working for it
                    if isinstance(exc, RedisUnavailable):
                        logger.warning("Redis is unreachable (%s); retry in %.1fs.", exc, backoff)
                    else:
                        logger.exception("Fetching jobs failed; retry in %.1fs.", backoff)
                    self.stopping.wait(backoff * random.uniform(0.5, 1))
                    backoff = min(backoff * 2, BACKOFF_MAX)
        finally:
            pool.shutdown(wait=True)  # drain: running jobs finish
            self.stopping.set()
            for thread in threads:
                thread.join()
            self.waiter.close()
            self._deregister()

    def stop(self) -> None:
        self.stopping.set()
        with self.changed:
            self.changed.notify_all()

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def on_signal(signum: int, frame: Any) -> None:
            if self.stopping.is_set():
                logger.warning("Second signal: exiting now; leased jobs run again later.")
                os._exit(128 + signum)
            logger.info("Stopping: finishing %d running job(s).", len(self.active))
            self.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    # --- fetching ---------------------------------------------------------------------

    def _wait_for_slot(self) -> int:
        with self.changed:
            free = self.concurrency - len(self.active)
            if free <= 0:
                self.changed.wait(MAX_BLOCK)
                free = self.concurrency - len(self.active)
        if self.max_jobs is not None:
            free = min(free, self.max_jobs - self.started_jobs)
        return max(0, free)

    def _fetch(self, pool: ThreadPoolExecutor, free: int) -> tuple[int, float | None]:
        started, soonest = 0, None
        for queue in self.queues:
            if free - started <= 0:
                return started, 0.0
            jobs, wait = queue.pop_and_wait(free - started, worker=self.id)
            for job in jobs:
                with self.changed:
                    self.active[(queue.name, job.id)] = (queue, job)
                self.started_jobs += 1
                pool.submit(self._run_job, queue, job)
            started += len(jobs)
            if wait is not None and (soonest is None or wait < soonest):
                soonest = wait
        return started, soonest

    def _block(self, wait: float | None) -> None:
        """Sleep on the queues' wake-up lists until an enqueue (or the next due job)."""
        if wait == 0:
            return
        self.waiter.wait(MAX_BLOCK if wait is None else min(max(wait, 0.001), MAX_BLOCK))

    # --- running ----------------------------------------------------------------------

    def _run_job(self, queue: Queue, job: Job) -> None:
        close_old_connections()
        try:
            try:
                value = run_job(job)
            except InvalidTask as exc:
                logger.error("Job %s in %r cannot run: %s", job.id, queue.name, exc)
                invalid, trace = exc, traceback.format_exc()
                self._settle(lambda: queue.bury(job, invalid, trace))
                self.failed += 1
                return
            except Exception as exc:
                logger.exception("Job %s (%s) failed", job.id, job.task)
                error, trace = exc, traceback.format_exc()
                self._settle(lambda: queue.fail(job, error, trace))
                self.failed += 1
                return
            self._settle(lambda: queue.ack(job, value))
            self.processed += 1
        finally:
            close_old_connections()
            with self.changed:
                self.active.pop((queue.name, job.id), None)
                self.changed.notify_all()

    def _settle(self, action: Callable[[], bool]) -> None:
        """Record a job's outcome, retrying while Redis is away (up to about a lease)."""
        delay, deadline = 0.1, time.monotonic() + min(q.lease for q in self.queues)
        while True:
            try:
                if not action():
                    logger.warning("A job's lease ran out before it finished; it may run again.")
                return
            except RedisUnavailable:
                if time.monotonic() > deadline:
                    logger.error("Could not record a job's outcome; it will run again.")
                    return
                time.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)

    # --- heartbeat and registry -------------------------------------------------------

    def _beat_loop(self) -> None:
        while not self.stopping.wait(self.beat):
            try:
                self.heartbeat()
            except Exception:  # a beat is retried on the next tick; the loop must not die
                logger.warning("Heartbeat failed", exc_info=True)

    def heartbeat(self) -> None:
        with self.changed:
            active = list(self.active.values())
        for queue in self.queues:
            mine = [job for q, job in active if q is queue]
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
    """The workers that heartbeat recently, as they describe themselves."""
    client = get_redis(using)
    registry = f"{conf.KEY_PREFIX}:{{W}}:workers"
    ids = client.zrangebyscore(registry, time.time() * 1000, "+inf")
    if not ids:
        return []
    values = client.mget([f"{conf.KEY_PREFIX}:{{W}}:w:{i.decode()}" for i in ids])
    return [json.loads(v) for v in values if v is not None]


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
        if len(self.conns) == 1:
            return {0} if self.conns[0].can_read(timeout=timeout) else set()
        socks = [conn._sock for conn in self.conns]
        ready, _, _ = select.select(socks, [], [], timeout)
        return {socks.index(sock) for sock in ready}

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
