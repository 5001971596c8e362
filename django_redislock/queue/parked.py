"""The parked jobs as the operator sees them (issue 27), mixed into ``Operations``: one page
of the parked set, and why a parked job waits."""

from __future__ import annotations

from typing import Any

from ..redis.failures import unavailable_as_error
from .jobs import Job
from .keys import QueueKeys
from .replies import text


class ParkedJobs:
    client: Any
    keys: QueueKeys

    def _job(self, job_id: str, fields: Any, *, ready: bool = False) -> Job:
        raise NotImplementedError

    @unavailable_as_error()
    def _parked_jobs(self, offset: int, limit: int) -> list[tuple[Job, int]]:
        """``scored_jobs`` of the parked: by key, each key's in the order they will run,
        scored with their ready score (see ``limit_lua``)."""
        members = self.client.zrange(self.keys.parked, offset, offset + limit - 1)
        found = []
        for member in members:
            key, _, rest = member.partition(b"\x00")
            if key == b"\x02":  # over its rate: by when it may start, then as the others
                rest = rest[16:]
            if len(rest) > 16 and rest[:16].isdigit():
                found.append((member, text(rest[16:]), int(rest[:16]) - 10**15))
        pipe = self.client.pipeline(transaction=False)
        for member, job_id, _ in found:
            pipe.hgetall(self.keys.job(job_id))
            pipe.zscore(self.keys.parked, member)  # None if it was let go meanwhile
        replies = pipe.execute(raise_on_error=False)
        return [
            (self._job(job_id, fields), score)
            for (_, job_id, score), fields, still in zip(
                found, replies[::2], replies[1::2], strict=True
            )
            if still is not None and fields
        ]

    def held_back(self, job: Job) -> str:
        """Why parked ``job`` waits: its task paused, or its concurrency key at its limit."""
        if job.task in self.paused():
            return "its task is paused"
        concurrency, rate = job.meta.get("concurrency"), job.meta.get("rate_limit")
        if isinstance(concurrency, dict) and isinstance(concurrency.get("key"), str):
            key, limit = concurrency["key"], concurrency.get("limit")
            running = self.client.zlexcount(self.keys.held, f"[{key}\x00", f"({key}\x01")
            if not isinstance(rate, dict) or not isinstance(limit, int) or running >= limit:
                return f"concurrency key {key}: {running} of {limit} running"
        if isinstance(rate, dict) and isinstance(rate.get("key"), str):
            period = rate.get("period")
            per = f"{period / 1000:g} s" if isinstance(period, int) else "?"
            return f"rate key {rate['key']}: {rate.get('count')} starts per {per}"
        return "held back"

    def paused(self) -> set[str]:
        raise NotImplementedError
