"""Expiry and pauses as a worker serving one job at a time sees them: a job leased ahead may
expire before its turn comes. Its START (which charges the attempt) buries it "expired"
instead, and says so in its reply; for a job with an expiry the worker waits for that reply
before it runs the job. POP checks every other job before it is leased. A START's reply
also says when the job's queue (or task) was paused since it was leased ahead: the worker
then gives back the others it leased ahead."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from ...exceptions import RedisUnavailable
from ..job_options import EXPIRES_KEY
from ..jobs import Job
from ..outbox import OUTBOX_MARK
from .channel import Channel

logger = logging.getLogger("django_redislock.queue.leases")  # the name users' LOGGING knows

EXPIRED_MARK = "{expired}"  # START's mark on a job it buried as expired (ids hold no braces)
PAUSED_MARK = "{paused}"  # START's mark on a job leased ahead of a pause (it runs all the same)
# POP's notes of a repaired concurrency-limit state (``limit_lua``): a permit taken back
# ("<key> <id>"), a held or parked set that was not a sorted set (its Redis key).
PERMIT_MARK, LIMITS_MARK = "{permit}", "{limits}"


class ExpiredAtStart:
    """The ids that START replies said were buried as expired, until their start asks."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        # Set when a START says its queue (or the job's task) was paused since the job was
        # leased ahead: the worker gives back the others it leased ahead.
        self.paused = threading.Event()
        # Set when a reply says its script left something in the outbox: the keeper
        # delivers it (``outbox``).
        self.outbox = threading.Event()

    def lost(self, lost: Sequence[str]) -> None:
        """What a START or POP reported: jobs expired (not run), else leases lost."""
        for job_id in lost:
            if job_id.startswith(EXPIRED_MARK):
                job_id = job_id[len(EXPIRED_MARK) :]
                logger.info("Job %s expired before it could start; it will not run.", job_id)
                self.ids.add(job_id)
            elif job_id == OUTBOX_MARK:
                self.outbox.set()
            elif job_id.startswith(PAUSED_MARK):
                logger.info("A pause came after jobs were leased ahead: they go back.")
                self.paused.set()
            elif job_id.startswith(PERMIT_MARK):
                key, _, held_by = job_id[len(PERMIT_MARK) :].rpartition(" ")
                logger.warning(
                    "A permit of concurrency key %r was held by job %s, which no longer "
                    "runs; it was taken back.",
                    key,
                    held_by,
                )
            elif job_id.startswith(LIMITS_MARK):
                logger.error(
                    "%s was not a sorted set (corrupt concurrency-limit state); it was "
                    "deleted, and the limits count afresh.",
                    job_id[len(LIMITS_MARK) :],
                )
            else:
                logger.warning(
                    "Job %s lost its lease before it finished; it may run again.", job_id
                )

    def may_start(self, channel: Channel, job: Job) -> bool:
        """Whether ``job``, whose START was just sent on ``channel``, may run: always
        without an expiry; else once START's reply is read, unless it buried the job (or
        the reply could not be read: its lease then lapses, and POP decides again)."""
        if EXPIRES_KEY not in job.meta:
            return True
        try:
            channel.sync()
        except RedisUnavailable:
            return False
        if job.id in self.ids:
            self.ids.discard(job.id)
            return False
        return True


def paused_since(ahead: Sequence[tuple[Any, Job]]) -> bool:
    """Whether the queue (or the task) of a job leased ahead was paused since (the keeper
    asks while the worker holds jobs ahead)."""
    try:
        for queue in {q for q, _ in ahead}:
            paused = queue.paused()
            if "*" in paused or any(job.task in paused for q, job in ahead if q is queue):
                return True
    except RedisUnavailable:
        pass
    return False
