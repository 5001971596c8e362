"""What a worker sends as it leases and starts jobs: the keys and arguments of PEEK, POP and
START, and what POP's reply says. Mixed into ``Queue``; the worker's ``Channel`` sends them
without waiting for their replies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ..redis.scripts import LuaScript
from .fetch_scripts import PEEK
from .job_codec import decoded, decoded_meta
from .job_factories import leased_job
from .jobs import Job
from .keys import QueueKeys
from .lua import MAX_BATCH
from .replies import number, text


def _refs(value: Any) -> tuple[str, ...]:
    """The refs of a newline-separated field, as POP replies it ("" for none)."""
    return tuple(text(value).split("\n")) if value else ()


class Fetched(NamedTuple):
    """What one POP (or a whole ``fetch``) says: the jobs leased, the seconds until the next
    is due (0: more are ready; None: nothing pending), and the ids of the finished or started
    jobs it carried whose lease had run out."""

    jobs: list[Job]
    wait: float | None
    lost: list[str]


class WorkerCalls:
    name: str
    keys: QueueKeys
    lease: float
    max_attempts: int
    result_ttl: float

    def run(self, script: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
        raise NotImplementedError

    def fetch_args(
        self,
        count: int,
        lease: float | None,
        worker: str,
        finished: Sequence[tuple[Job, str | None]],
        started: Sequence[Job] = (),
        charge: bool = True,
        candidates: Sequence[str] = (),
    ) -> tuple[list[str], list[Any]]:
        """POP's keys after the fixed ones, and its arguments: at most ``MAX_BATCH`` jobs of
        each kind; ``candidates``: the ids ``candidates`` found, the only jobs it may take."""
        if count > MAX_BATCH:
            raise ValueError(f"One POP takes at most {MAX_BATCH} jobs of each kind.")
        lease_ms = max(1, round((self.lease if lease is None else lease) * 1000))
        keys, (worker, ttl, *leases) = self.start_args(worker, finished, started)
        # The expired counter and the done set stay last, where POP (as START) finds them.
        keys[-2:-2] = [k for i in candidates for k in (self.keys.job(i), self.keys.corrupt(i))]
        return keys, [
            len(candidates),
            count,
            lease_ms,
            worker,
            self.max_attempts,
            ttl,
            "1" if charge else "0",
            *leases,
            *candidates,
        ]

    def candidates(self, count: int) -> list[str]:
        """The ids a POP of ``count`` jobs would reach (ready, due, expired), read first so
        that POP is given every key it touches; a POP finds the ones that came since."""
        return list(dict.fromkeys(text(i) for ids in self.run(PEEK, (), (count,)) for i in ids))

    def start_args(
        self, worker: str, finished: Sequence[tuple[Job, str | None]], started: Sequence[Job]
    ) -> tuple[list[str], list[Any]]:
        """START's keys after the fixed ones, and its arguments: acknowledge ``finished``,
        charge ``started`` (POP ends with the same)."""
        n_finished, n_started = len(finished), len(started)
        if n_finished > MAX_BATCH or n_started > MAX_BATCH:
            raise ValueError(f"One START or POP takes at most {MAX_BATCH} jobs of each kind.")
        keys = self.keys
        job_prefix, result_prefix = keys.job_prefix, keys.result_prefix
        job_keys: list[str] = []
        args: list[Any] = [
            worker or "-",
            max(1, round(self.result_ttl * 1000)),
            n_finished,
            n_started,
            0,  # how many dependants are given, below
        ]
        given: dict[str, None] = {}
        for job, result in finished:
            job_id = job.id
            job_keys += (job_prefix + job_id, result_prefix + job_id)
            args += (job_id, job.lease or "", result or "")
            if job.dependants:  # those in this queue are told in the same script
                given.update((ref, None) for ref in job.dependants if "\t" not in ref)
        for job in started:
            job_keys.append(job_prefix + job.id)
            args += (job.id, job.lease or "")
        if given:  # (the others go through the outbox)
            told = list(given)[:MAX_BATCH]
            args[4] = len(told)
            args += told
            job_keys += (job_prefix + ref for ref in told)
        job_keys += (keys.expired, keys.done)  # last: expired counter, finished jobs kept
        return job_keys, args

    def fetched(self, reply: Any, worker: str) -> Fetched:
        """``fetch``'s value from one POP reply."""
        wait = None if reply[0] < 0 else reply[0] / 1000
        lost = [text(job_id) for job_id in reply[1]]
        name, lease, holder = self.name, f"{worker or '-'}#", worker or None
        jobs: list[Job] = []
        add = jobs.append
        for i in range(2, len(reply), 12):
            job_id, task, args, kwargs, meta, attempts, priority, due, enqueued, workers = reply[
                i : i + 10
            ]
            attempts = number(attempts)
            task, args, kwargs = decoded(task, args, kwargs)
            add(
                leased_job(
                    text(job_id),
                    name,
                    task,
                    args,
                    kwargs,
                    number(priority),
                    attempts,
                    number(due),
                    number(enqueued),
                    f"{lease}{attempts}",
                    holder,
                    tuple(text(workers).split(",")),
                    decoded_meta(meta) if meta else {},
                    number(reply[i + 10]),
                    _refs(reply[i + 11]),
                )
            )
        return Fetched(jobs, wait, lost)
