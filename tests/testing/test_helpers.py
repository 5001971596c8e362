"""``django_redislock.test``: ``run_jobs`` and ``isolated_keys``, for a user's own tests."""

from __future__ import annotations

from typing import Any

import pytest

from django_redislock import Lock
from django_redislock.conf import conf
from django_redislock.queue.queue import get_queue
from django_redislock.redis.clients import get_redis, reset_connections
from django_redislock.test import delete_prefix, isolated_keys, run_jobs
from tests.models import Account
from tests.support.counts import job_counts
from tests.support.fixtures import Backend

from .tasks import CALLS

ADD = "tests.testing.tasks.add"
FAILS = "tests.testing.tasks.fails"
QUEUES = {"default": {"MAX_ATTEMPTS": 2}, "other": {}}
# run_jobs's own code is the same on every backend; Cluster only changes delete_prefix.
STANDALONE = pytest.mark.parametrize("backend", ["fakeredis", "redis"], indirect=True)


@pytest.fixture
def queues(backend: Backend, settings: Any) -> Backend:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    CALLS.clear()
    return backend


@STANDALONE
def test_run_jobs_runs_what_is_ready_and_records_each_outcome(queues: Backend) -> None:
    queue = get_queue()
    ok = [queue.enqueue(ADD, args=[i, 1]) for i in range(3)]
    bad = queue.enqueue(FAILS, args=["no"])
    later = queue.enqueue(ADD, args=[9, 9], delay=900)
    ran = run_jobs()
    assert [job.id for job in ran.jobs] == [*(job.id for job in ok), bad.id]
    assert [job.result for job in ran.done] == ["1", "2", "3"]
    assert all(0 < job.started <= job.finished for job in ran.jobs)
    assert [(job.id, job.state, job.error) for job in ran.failed] == [
        (bad.id, "scheduled", "ValueError: no")  # retried later: MAX_ATTEMPTS is 2
    ]
    # as the queue itself has them
    assert queue.get(ok[0].id).result == "1"
    assert queue.get(bad.id).error == "ValueError: no"
    assert queue.counts() == job_counts(scheduled=2)
    assert queue.get(later.id).state == "scheduled"
    assert len(run_jobs()) == 0


@STANDALONE
def test_scheduled_runs_delayed_jobs_and_retries_until_dead(queues: Backend) -> None:
    queue = get_queue()
    later = queue.enqueue(ADD, args=[9, 9], delay=900)
    bad = queue.enqueue(FAILS, args=["again"])
    ran = run_jobs(scheduled=True)
    assert sorted((job.id, job.state) for job in ran.jobs) == sorted(
        [(later.id, "done"), (bad.id, "scheduled"), (bad.id, "dead")]
    )
    assert CALLS.count(("fails", "again")) == 2
    assert queue.counts() == job_counts(dead=1)


@STANDALONE
def test_jobs_enqueued_by_jobs_run_too_up_to_max_jobs(queues: Backend) -> None:
    get_queue().enqueue("tests.testing.tasks.countdown", args=[5])
    assert [job.result for job in run_jobs(max_jobs=2).jobs] == ["5", "4"]
    assert [job.result for job in run_jobs().jobs] == ["3", "2", "1", "0"]


@STANDALONE
def test_several_queues_and_raise_errors(queues: Backend) -> None:
    get_queue("other").enqueue(ADD, args=[1, 2])
    assert run_jobs("default").jobs == []
    assert [job.result for job in run_jobs(["default", "other"]).jobs] == ["3"]
    bad = get_queue().enqueue(FAILS, args=["loud"])
    with pytest.raises(ValueError, match="loud"):
        run_jobs(raise_errors=True)
    assert get_queue().get(bad.id).error == "ValueError: loud"  # recorded all the same


@pytest.mark.django_db
@pytest.mark.parametrize("backend", ["fakeredis"], indirect=True)
def test_jobs_run_in_the_tests_own_transaction(queues: Backend) -> None:
    # The account exists only in the test's transaction: a job run by another connection
    # (a worker, another thread) would not see it.
    account = Account.objects.create(balance=10)
    get_queue().enqueue("tests.testing.tasks.credit", args=[account.pk, 5])
    assert run_jobs().done[0].result == "15"
    account.refresh_from_db()
    assert account.balance == 15


def test_bad_arguments_are_refused_before_redis(settings: Any) -> None:
    settings.REDISLOCK = {"URL": "redis://127.0.0.1:1/0"}
    reset_connections()
    with pytest.raises(ValueError, match="max_jobs"):
        run_jobs(max_jobs=0)
    with pytest.raises(TypeError, match="queues"):
        run_jobs(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefix"):
        isolated_keys("{bad}")


@pytest.mark.parametrize("backend", ["fakeredis", "cluster"], indirect=True)
def test_isolated_keys_gives_a_prefix_and_deletes_its_keys(backend: Backend) -> None:
    outside = Lock("outside", ttl=30)
    outside.acquire()
    with isolated_keys() as prefix:
        assert conf.KEY_PREFIX == prefix != "redislock"
        assert get_queue().counts()["ready"] == 0
        Lock("inside", ttl=30).acquire()
        for i in range(20):  # keys on many slots of the cluster
            get_queue().enqueue(ADD, args=[i, i], job_id=f"job-{i}")
        assert get_queue().counts()["ready"] == 20
    assert conf.KEY_PREFIX == "redislock"
    assert outside.owned()  # what is not under the prefix is left alone
    with isolated_keys(prefix) as same:
        assert same == prefix
        assert get_queue().counts()["ready"] == 0
        assert not Lock("inside").locked()
    outside.release()


@isolated_keys("decorated")
def test_isolated_keys_as_a_decorator(settings: Any) -> None:
    assert conf.KEY_PREFIX == "decorated"
    Lock("held", ttl=30).acquire()
    assert delete_prefix() >= 1
    assert not any(get_redis().scan_iter(match="decorated:*"))


def test_run_jobs_follows_the_tasks_retry_options(backend: Backend, settings: Any) -> None:
    """As the worker: a task's max_attempts decides dead or scheduled, and RetryLater
    schedules the job again without a failure."""
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"RETRY_BACKOFF": 60}}}
    queue = get_queue()
    once = queue.enqueue("tests.retry_tasks.once", args=["h-once", 9])
    snoozed = queue.enqueue("tests.retry_tasks.snoozing", args=["h-snooze", 1, 60])
    run = run_jobs()
    states = {job.id: (job.state, job.reason) for job in run.jobs}
    assert states == {once.id: ("dead", ""), snoozed.id: ("scheduled", "RetryLater")}
    assert (queue.get(snoozed.id).failures, queue.get(snoozed.id).error) == (0, "")
