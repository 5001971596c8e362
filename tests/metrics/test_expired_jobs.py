"""The count of jobs buried as expired (issue 26), apart from the other dead jobs: a
Prometheus counter per queue, read from the counter the scripts keep in Redis."""

from __future__ import annotations

from typing import Any

import pytest

from django_redislock import get_queue
from tests.support.fixtures import Backend
from tests.support.waiting import server_now, wait_for

from .scraping import TOKEN, scrape, states, value

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.metrics.urls")]

EXPIRED = "redislock_queue_expired_jobs_total"


@pytest.fixture
def queues(backend: Backend, settings: Any) -> None:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "METRICS_TOKEN": TOKEN,
        "QUEUES": {"default": {}, "emails": {"MAX_ATTEMPTS": 1}},
    }


def test_expired_jobs_are_counted_apart_from_other_dead_ones(queues: None) -> None:
    assert value(scrape(), EXPIRED, queue="default") == 0
    queue = get_queue("default")
    late = [queue.enqueue("tests.tasks.record", args=[n], expires=0.02) for n in range(2)]
    queue.enqueue("tests.tasks.record", args=[9], job_id="failed")
    deadline = max(job.score for job in late) / 1000 + 0.02
    wait_for(lambda: server_now() > deadline + 0.002, 10, "both expired")
    [failing] = queue.pop(5)
    assert queue.bury(failing, "not an expiry")
    samples = scrape()
    assert value(samples, EXPIRED, queue="default") == 2
    assert value(samples, EXPIRED, queue="emails") == 0
    assert states(samples, "default")["dead"] == 3
