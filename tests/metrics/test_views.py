"""The Prometheus view: who may read it, the gauges it reads from Redis at scrape time (they
equal the queue's own ``counts()``), and what it answers while Redis is down."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from django_redislock import get_queue
from django_redislock.queue.worker.registry import Heartbeat
from tests.support.counts import job_counts
from tests.support.fixtures import Backend
from tests.support.servers import free_port

from .scraping import TOKEN, URL, named, parsed, scrape, states, value

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.metrics.urls")]

QUEUES = {"default": {}, "emails": {"MAX_ATTEMPTS": 1}}


@pytest.fixture
def token(settings: Any) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "METRICS_TOKEN": TOKEN}


def user(django_user_model: Any, name: str, *, staff: bool, permitted: bool) -> Client:
    account = django_user_model.objects.create_user(name, is_staff=staff)
    if permitted:
        account.user_permissions.set(
            Permission.objects.filter(
                content_type__app_label="django_redislock", codename="view_dashboard"
            )
        )
    client = Client()
    client.force_login(account)
    return client


def test_only_a_permitted_staff_user_or_the_token_may_read(
    token: None, django_user_model: Any
) -> None:
    viewer = user(django_user_model, "viewer", staff=True, permitted=True)
    assert viewer.get(URL).status_code == 200
    assert Client().get(URL, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    assert Client().get(URL, HTTP_AUTHORIZATION=f"bearer {TOKEN}").status_code == 200
    refused = [
        Client().get(URL),  # anonymous
        user(django_user_model, "staff", staff=True, permitted=False).get(URL),
        user(django_user_model, "not-staff", staff=False, permitted=True).get(URL),
        Client().get(URL, HTTP_AUTHORIZATION="Bearer wrong-token-of-some-length"),
        Client().get(URL, HTTP_AUTHORIZATION=f"Bearer {TOKEN[:-1]}"),
        Client().get(URL, HTTP_AUTHORIZATION=f"Basic {TOKEN}"),
        # a wrong token is refused even from a session that could read
        viewer.get(URL, HTTP_AUTHORIZATION="Bearer wrong-token-of-some-length"),
    ]
    assert [r.status_code for r in refused] == [403] * len(refused)
    assert b"token" in refused[0].content
    assert viewer.post(URL).status_code == 405


def test_no_token_is_accepted_when_none_is_set(settings: Any) -> None:
    assert "METRICS_TOKEN" not in settings.REDISLOCK
    for header in ("Bearer ", "Bearer None", f"Bearer {TOKEN}"):
        assert Client().get(URL, HTTP_AUTHORIZATION=header).status_code == 403


def test_the_gauges_are_the_queues_counts(backend: Backend, settings: Any) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES, "METRICS_TOKEN": TOKEN}
    default, emails = get_queue("default"), get_queue("emails")
    default.enqueue_many([{"task": "tests.tasks.record", "args": [n]} for n in range(5)])
    default.enqueue("tests.tasks.record", args=[9], delay=3600)
    emails.enqueue("tests.tasks.boom")
    (popped,) = emails.pop()
    emails.fail(popped, "poison")  # MAX_ATTEMPTS 1: dead
    default.pop(2)  # running
    time.sleep(0.05)  # the oldest ready job has waited a while
    beat = Heartbeat(backend.client, "w-1", 10, lambda: {"id": "w-1", "queues": ["emails"]})
    beat.beat()

    samples = scrape()
    assert value(samples, "redislock_redis_up") == 1
    for queue in (default, emails):
        assert states(samples, queue.name) == queue.counts()
    assert default.counts() == job_counts(ready=3, scheduled=1, running=2)
    assert emails.counts()["dead"] == 1
    age = value(samples, "redislock_queue_oldest_ready_age_seconds", queue="default")
    assert age >= 0.05
    assert value(samples, "redislock_queue_oldest_ready_age_seconds", queue="emails") == 0
    assert value(samples, "redislock_workers", queue="emails") == 1
    assert value(samples, "redislock_workers", queue="default") == 0
    beat.stop()
    assert value(scrape(), "redislock_workers", queue="emails") == 0


def test_with_redis_down_the_scrape_answers_without_the_gauges(settings: Any) -> None:
    settings.REDISLOCK = {"URL": f"redis://127.0.0.1:{free_port()}/0", "METRICS_TOKEN": TOKEN}
    response = Client().get(URL, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    samples = parsed(response.content.decode())
    assert value(samples, "redislock_redis_up") == 0
    assert not named(samples, "redislock_queue_jobs")
    assert not named(samples, "redislock_workers")


def test_openmetrics_when_the_scraper_asks(token: None) -> None:
    response = Client().get(
        URL,
        HTTP_AUTHORIZATION=f"Bearer {TOKEN}",
        HTTP_ACCEPT="application/openmetrics-text; version=1.0.0",
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.decode().endswith("# EOF\n")
