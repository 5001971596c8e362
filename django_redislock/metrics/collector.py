"""The gauges read from Redis when the metrics are scraped: jobs per queue and state, the
oldest ready job's age, live workers, what is paused; and the count of jobs buried as
expired (a counter kept in Redis by the scripts that bury them). Read at scrape time, they
are the same whichever process answers, and cost nothing between scrapes: a pipeline, a
script and a few reads per queue, one read of the worker registry.

When Redis cannot be reached they are left out and ``redislock_redis_up`` is 0: the scrape
still answers (with the process's own counts), so an alert can tell "Redis is down" from
"the endpoint is down".
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..conf import conf
from ..queue.queue import get_queue
from ..queue.worker.registry import live_workers

logger = logging.getLogger(__name__)


def _families() -> dict[str, GaugeMetricFamily | CounterMetricFamily]:
    return {
        "jobs": GaugeMetricFamily(
            "redislock_queue_jobs",
            "Jobs in a queue, by state (ready, scheduled, running, dead, parked, waiting).",
            labels=["queue", "state"],
        ),
        "age": GaugeMetricFamily(
            "redislock_queue_oldest_ready_age_seconds",
            "How long the longest-waiting ready job has been due (0: none is ready).",
            labels=["queue"],
        ),
        "workers": GaugeMetricFamily(
            "redislock_workers",
            "Live workers (recent heartbeat) serving a queue.",
            labels=["queue"],
        ),
        "paused": GaugeMetricFamily(
            "redislock_queue_paused",
            'A paused queue (task="*") or task of a queue: 1 while paused.',
            labels=["queue", "task"],
        ),
        "expired": CounterMetricFamily(
            "redislock_queue_expired_jobs",
            "Jobs buried as expired: not started within their expiry of becoming due.",
            labels=["queue"],
        ),
    }


class RedisCollector(Collector):
    """Collects the queue and worker gauges from Redis (``using``: a connection alias, as
    ``get_queue`` takes it)."""

    def __init__(self, using: str | None = None) -> None:
        self.using = using

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "redislock_redis_up", "1 when Redis answered this scrape, 0 when it did not."
        )
        try:
            families = self._read()
        except Exception as exc:  # Redis away, or a setting gone wrong: the scrape answers
            logger.warning("Metrics: could not read the queues from Redis (%s)", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families.values()

    def _read(self) -> dict[str, GaugeMetricFamily | CounterMetricFamily]:
        families = _families()
        names = sorted(conf.QUEUES)
        serving = dict.fromkeys(names, 0)
        for worker in live_workers(self.using):
            queues = worker.get("queues")
            for name in queues if isinstance(queues, list) else ():
                if name in serving:  # a queue since removed from the settings: not shown
                    serving[name] += 1
        for name in names:
            queue = get_queue(name, self.using)
            counts: dict[str, Any] = queue.counts()
            for state, count in counts.items():
                families["jobs"].add_metric([name, state], count)
            families["age"].add_metric([name], queue.oldest_ready_age() or 0.0)
            families["workers"].add_metric([name], serving[name])
            families["expired"].add_metric([name], queue.expired_count())
            for task in sorted(queue.paused()):
                families["paused"].add_metric([name, task], 1)
        return families
