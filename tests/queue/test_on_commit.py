"""Enqueue on commit (issue 15): inside ``transaction.atomic()`` a job is pushed when the
transaction commits on its database, never when it rolls back; outside one, or with the
queue's ``ON_COMMIT: False``, at once. Real commits (``transactional_db``) on real Redis,
Cluster and fakeredis."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from django.db import transaction

from django_redislock import get_queue
from django_redislock.exceptions import JobNotFound, RedisUnavailable
from django_redislock.queue import on_commit
from tests.support.counts import job_counts
from tests.support.fixtures import Backend
from tests.support.servers import RedisServer

from .. import task_examples as examples
from ..models import Account
from .test_tasks_framework import run_worker

try:  # Django 6
    from django.tasks.signals import task_enqueued
except ImportError:  # Django 5.2: the backport
    from django_tasks.signals import task_enqueued

TASK = "tests.task_examples.echo"
BACKEND = "django_redislock.tasks.RedisTaskBackend"
BOTH = ["default", "other"]
T = TypeVar("T")


@pytest.fixture
def queue(backend: Backend, settings: Any) -> Any:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {}, "now": {"ON_COMMIT": False}},
    }
    settings.TASKS = {"default": {"BACKEND": BACKEND, "QUEUES": []}}
    return get_queue()


def exists(job_id: str, name: str = "default") -> bool:
    try:
        get_queue(name).get(job_id)
    except JobNotFound:
        return False
    return True


class Rollback(Exception):
    pass


def rolled_back(work: Callable[[], T], using: str = "default") -> T:
    """What ``work`` returned, run in ``transaction.atomic(using=using)`` rolled back then."""
    done: list[T] = []
    with contextlib.suppress(Rollback), transaction.atomic(using=using):
        done.append(work())
        raise Rollback
    return done[0]


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_rolled_back_transaction_enqueues_nothing(queue: Any) -> None:

    def work() -> tuple[Any, Any, Any]:
        Account.objects.create(balance=1)
        one = queue.enqueue(TASK, args=[1])
        many = queue.enqueue_many([{"task": TASK, "args": [2]}, {"task": TASK, "job_id": "x"}])
        return one, many, examples.echo.enqueue(3)

    one, many, result = rolled_back(work)
    assert not Account.objects.exists()
    for job_id in (one.id, many[0].id, "x", result.id):
        assert not exists(job_id)
    assert queue.counts() == job_counts()


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_commit_pushes_the_jobs_with_the_ids_returned_at_once(queue: Any) -> None:
    with transaction.atomic():
        Account.objects.create(balance=1)
        one = queue.enqueue(TASK, args=[1])
        later = queue.enqueue(TASK, args=[2], delay=60)
        many = queue.enqueue_many([{"task": TASK, "args": [3]}, {"task": TASK, "args": [4]}])
        assert (one.state, one.score, one.enqueued) == ("ready", 0, 0)  # not pushed yet
        assert later.state == "scheduled"
        assert not exists(one.id)  # nothing in Redis before the commit
        assert queue.counts()["ready"] == 0
    pushed = queue.get(one.id)
    assert (pushed.task, pushed.args, pushed.state) == (TASK, [1], "ready")
    assert pushed.enqueued > 0
    assert queue.get(later.id).state == "scheduled"
    assert [queue.get(job.id).args for job in many] == [[3], [4]]
    assert [job.id for job in queue.peek(10)] == [one.id, many[0].id, many[1].id]  # FIFO
    run_worker()  # and they run
    assert [queue.get(job.id).state for job in (one, *many)] == ["done"] * 3


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_rolled_back_savepoint_drops_only_its_own_jobs(queue: Any) -> None:
    with transaction.atomic():
        outer = queue.enqueue(TASK, args=["outer"])
        inner = rolled_back(lambda: queue.enqueue(TASK, args=["inner"]))
        with transaction.atomic():
            kept = queue.enqueue(TASK, args=["kept"])
    assert exists(outer.id)
    assert exists(kept.id)
    assert not exists(inner.id)


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_job_waits_for_the_commit_of_its_own_database(queue: Any) -> None:
    with transaction.atomic(using="other"):  # only "other" in a transaction: its commit
        job = queue.enqueue(TASK, args=[1])
        assert not exists(job.id)
    assert exists(job.id)
    with transaction.atomic(), transaction.atomic(using="other"):
        default_first = queue.enqueue(TASK, args=[2])  # both open: the default database's
        on_other = queue.enqueue(TASK, args=[3], using="other")
        transaction.on_commit(lambda: seen.append(exists(default_first.id)), using="other")
        seen: list[bool] = []
    # "other" committed first (inner block): its job was pushed then, the default's not yet
    assert seen == [False]
    assert exists(default_first.id)
    assert exists(on_other.id)
    dropped = rolled_back(lambda: queue.enqueue(TASK, args=[4], db="other"), using="other")
    assert not exists(dropped.id)


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_bad_db_arguments_are_refused_before_anything_is_written(queue: Any) -> None:
    with pytest.raises(ValueError, match="using 'nope' is not a database in DATABASES"):
        queue.enqueue(TASK, using="nope")
    with pytest.raises(TypeError, match="using must be a database alias"):
        queue.enqueue_many([{"task": TASK}], db=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not both"):
        queue.enqueue(TASK, using="default", db="other")
    assert queue.counts()["ready"] == 0


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_on_commit_false_pushes_at_once_even_in_a_transaction(queue: Any) -> None:
    now = get_queue("now")
    job = rolled_back(lambda: now.enqueue(TASK, args=[1]))
    assert exists(job.id, "now")  # the rollback does not take it back


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_outside_a_transaction_nothing_changes(queue: Any) -> None:
    job = queue.enqueue(TASK, args=[1])
    assert job.enqueued > 0
    assert exists(job.id)


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_a_task_result_is_valid_at_once_and_complete_after_the_commit(queue: Any) -> None:
    sent: list[Any] = []

    def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
        sent.append(task_result.id)

    task_enqueued.connect(receiver)
    try:
        with transaction.atomic():
            result = examples.echo.enqueue(1, k="v")
            assert result.id
            assert result.status.name == "READY"
            assert result.enqueued_at is None  # Redis's clock says when, at the push
            assert sent == []  # announced once it is enqueued, not before
        assert sent == [result.id]
        assert result.enqueued_at is not None
        assert examples.echo.get_result(result.id) == result
    finally:
        task_enqueued.disconnect(receiver)


def test_in_a_test_case_s_own_transaction_jobs_are_pushed_at_once(
    queue: Any, db: None, django_capture_on_commit_callbacks: Any
) -> None:
    """The transaction a test case wraps around the test is not the code's: enqueued in
    the test body, a job is pushed at once; in an atomic() of the code, at its commit,
    which in a test case is when captured on-commit callbacks are run."""
    assert exists(queue.enqueue(TASK, args=[1]).id)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with transaction.atomic():
            job = queue.enqueue(TASK, args=[2])
        assert not exists(job.id)
    assert len(callbacks) == 1
    assert exists(job.id)


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_redis_gone_for_a_moment_at_the_commit_loses_nothing(settings: Any) -> None:
    with RedisServer() as server:
        settings.REDISLOCK = {"URL": server.url, "QUEUES": {"default": {}}}
        queue = get_queue()
        with transaction.atomic():
            job = queue.enqueue(TASK, args=[1])
            server.stop()
            threading.Timer(0.3, server.start).start()  # back within the retries
        assert exists(job.id)


@pytest.mark.django_db(transaction=True, databases=BOTH)
def test_redis_gone_at_the_commit_is_said_and_the_commit_stands(
    settings: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(on_commit, "RETRY_PAUSES", (0.01, 0.01))
    with RedisServer() as server:
        settings.REDISLOCK = {"URL": server.url, "QUEUES": {"default": {}}}
        queue = get_queue()

        def commit() -> Any:
            with transaction.atomic():
                Account.objects.create(balance=7)
                job = queue.enqueue(TASK, args=["lost"], job_id="close:42")
                server.stop()
            return job

        with (
            caplog.at_level(logging.ERROR, "django_redislock"),
            pytest.raises(RedisUnavailable, match="committed, but job") as raised,
        ):
            commit()
        assert Account.objects.filter(balance=7).exists()  # the commit stands
        assert "close:42" in str(raised.value)
        [logged] = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert "close:42" in logged
        assert TASK in logged  # what to enqueue again, by hand
