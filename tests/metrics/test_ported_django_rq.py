"""django-rq's tests of its Prometheus endpoint and of its token-protected statistics,
restated against our metrics view (``django_redislock.metrics.views.metrics``).

Ported (django-rq test -> test here):

- ``tests/test_prometheus_metrics.py::PrometheusTest::test_metrics_default`` ->
  ``test_an_idle_queue_shows_every_state_at_zero``
- ``tests/test_prometheus_metrics.py::PrometheusTest::test_metrics_with_jobs`` ->
  ``test_the_gauges_and_counts_follow_a_worker_through_the_queue``
- ``tests/test_prometheus_metrics.py::NoPrometheusTest::test_no_metrics_without_prometheus_client``
  -> ``test_without_prometheus_client_mounting_the_view_says_what_to_install``
- ``tests/test_views.py::ViewTest::test_statistics_json_view`` (staff or API token) ->
  ``test_staff_lose_access_with_their_status_and_the_token_still_reads``
- ``tests/test_django_rq_utils.py::UtilsTest::test_get_statistics`` (workers per queue) ->
  ``test_a_live_worker_is_counted_on_each_queue_it_serves``

Skipped, and why:

- the per-worker series (``rq_workers{name,state}``, ``rq_job_successful_total{name}``,
  ``rq_working_seconds_total{name}``): our labels never name a worker, a job or a lock (the
  README's rule against unbounded label sets); outcomes are counted per queue instead, which
  the worker test above checks;
- the ``finished`` and ``deferred`` job gauges: we have no ``done`` gauge (finished results
  only live for ``RESULT_TTL``) and no job dependencies;
- the admin-mounted copy of the endpoint (``admin:django_rq_metrics``): ours is mounted
  once, by the project's urls, under its own namespace;
- the token passed in the URL path (``home_json/<token>``): ours is only read from the
  ``Authorization: Bearer`` header, so it never lands in access logs.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.urls import reverse

from django_redislock import get_queue
from django_redislock.queue.worker.loop import Worker
from django_redislock.queue.worker.registry import Heartbeat
from tests.support.counts import job_counts

from ..conftest import Backend
from .scraping import TOKEN, URL, Samples, named, parsed, scrape, states, summed, value

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.metrics.urls")]

STATES = ("ready", "scheduled", "running", "dead", "parked", "waiting")


def configure(settings: Any, **more: Any) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "METRICS_TOKEN": TOKEN, **more}


def raw_lines() -> set[str]:
    response = Client().get(URL, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    return set(response.content.decode().splitlines())


def test_an_idle_queue_shows_every_state_at_zero(backend: Backend, settings: Any) -> None:
    configure(settings, QUEUES={"default": {}, "mail": {}})
    assert reverse("django_redislock_metrics:metrics") == URL
    lines = raw_lines()
    assert any(line.startswith("# HELP redislock_queue_jobs ") for line in lines)
    assert "# TYPE redislock_queue_jobs gauge" in lines
    for queue in ("default", "mail"):
        for state in STATES:
            assert f'redislock_queue_jobs{{queue="{queue}",state="{state}"}} 0.0' in lines
        assert f'redislock_workers{{queue="{queue}"}} 0.0' in lines
        assert f'redislock_queue_oldest_ready_age_seconds{{queue="{queue}"}} 0.0' in lines
    assert "redislock_redis_up 1.0" in lines


def test_the_gauges_and_counts_follow_a_worker_through_the_queue(
    fake: Backend, settings: Any
) -> None:
    configure(settings, METRICS=True, QUEUES={"default": {"MAX_ATTEMPTS": 1}})
    queue = get_queue()
    queue.enqueue("tests.tasks.boom")  # first in line: fails its only attempt
    queue.enqueue_many([{"task": "tests.tasks.record", "args": [n]} for n in range(10)])
    # A worker that stays registered while the burst workers below come and go.
    watcher = Heartbeat(fake.client, "long-lived", 10, lambda: {"id": "long-lived",
                                                                "queues": ["default"]})  # fmt: skip
    watcher.beat()
    try:
        before = scrape()
        assert states(before, "default") == job_counts(ready=11)  # fmt: skip
        assert value(before, "redislock_workers", queue="default") == 1

        Worker(["default"], burst=True, max_jobs=4).run()
        middle = scrape()
        # the jobs the worker had leased ahead went back: only four ran
        assert states(middle, "default") == job_counts(ready=7, dead=1)  # fmt: skip
        assert value(middle, "redislock_workers", queue="default") == 1

        def grew(after: Samples, name: str, **labels: str) -> float:
            return summed(after, name, **labels) - summed(before, name, **labels)

        def runs(after: Samples, outcome: str) -> float:
            return grew(after, "redislock_job_runs_total", queue="default", outcome=outcome)

        assert [runs(middle, o) for o in ("succeeded", "dead", "retried")] == [3, 1, 0]

        Worker(["default"], burst=True).run()
        after = scrape()
        assert states(after, "default") == job_counts(dead=1)  # fmt: skip
        assert (runs(after, "succeeded"), runs(after, "dead")) == (10, 1)
        assert grew(after, "redislock_job_duration_seconds_count", queue="default") == 11
        assert value(after, "redislock_queue_oldest_ready_age_seconds", queue="default") == 0
    finally:
        watcher.stop()
    assert value(scrape(), "redislock_workers", queue="default") == 0


def test_a_live_worker_is_counted_on_each_queue_it_serves(fake: Backend, settings: Any) -> None:
    configure(settings, QUEUES={"default": {}, "async": {}, "idle": {}})
    worker = Worker(["async", "default"])
    worker.tracker.beat()  # its registry entry, as its heartbeat writes it
    try:
        samples = scrape()
        assert named(samples, "redislock_workers") == {
            frozenset({("queue", "async")}): 1,
            frozenset({("queue", "default")}): 1,
            frozenset({("queue", "idle")}): 0,
        }
    finally:
        worker.tracker.stop()
    assert value(scrape(), "redislock_workers", queue="async") == 0


def test_staff_lose_access_with_their_status_and_the_token_still_reads(
    fake: Backend, settings: Any, django_user_model: Any
) -> None:
    configure(settings)
    get_queue().enqueue("tests.tasks.record", args=[1])
    account = django_user_model.objects.create_user("operator", is_staff=True)
    account.user_permissions.set(Permission.objects.filter(
        content_type__app_label="django_redislock", codename="view_dashboard"))  # fmt: skip
    browser = Client()
    browser.force_login(account)
    seen = browser.get(URL)
    assert seen.status_code == 200
    assert value(parsed(seen.content.decode()), "redislock_queue_jobs", queue="default",
                 state="ready") == 1  # fmt: skip

    account.is_staff = False
    account.save()
    assert browser.get(URL).status_code == 403

    with_token = Client().get(URL, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert with_token.status_code == 200
    assert states(parsed(with_token.content.decode()), "default")["ready"] == 1
    wrong = Client().get(URL, HTTP_AUTHORIZATION="Bearer not-the-token-but-long-enough")
    assert wrong.status_code == 403
    assert b"redislock_queue_jobs" not in wrong.content


def test_without_prometheus_client_mounting_the_view_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib

    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed
    for module in ("django_redislock.metrics.urls", "django_redislock.metrics.views"):
        monkeypatch.delitem(sys.modules, module, raising=False)  # imported afresh
    with pytest.raises(ImproperlyConfigured, match=r"django-redislock\[metrics\]"):
        importlib.import_module("django_redislock.metrics.urls")
