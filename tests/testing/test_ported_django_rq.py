"""django-rq's tests of synchronous queues (``ASYNC: False`` / ``is_async=False``) and of when
an enqueue inside a transaction reaches Redis, restated against our testing story: a
queue's ``EAGER`` option, ``override_settings(REDISLOCK=...)``, ``run_jobs`` and the queue's
``ON_COMMIT`` option.

Ported (django-rq test -> test here):

- ``tests/tests.py::QueuesTest::test_async`` (async by default; ``ASYNC: False`` in the
  settings; ``get_queue(..., is_async=False)`` for one call) ->
  ``test_a_queue_is_not_eager_unless_its_settings_say_so`` and
  ``test_one_test_can_make_a_queue_eager_with_override_settings`` (our per-test switch:
  there is no per-call argument, settings are read lazily instead)
- ``tests/test_django_rq_utils.py::UtilsTest::test_get_statistics`` with its ``ASYNC: False``
  queue -> ``test_an_eager_queue_leaves_nothing_in_redis``
- ``tests/test_commit_modes.py::OnDbCommitTest`` ->
  ``test_a_job_enqueued_in_a_transaction_runs_only_once_committed``,
  ``test_a_job_enqueued_in_a_rolled_back_transaction_never_runs``,
  ``test_outside_a_transaction_the_job_is_there_at_once``,
  ``test_nested_atomic_blocks_push_at_the_outermost_commit`` and, for eager queues,
  ``test_an_eager_job_in_nested_atomic_blocks_runs_at_the_outermost_commit``
- ``tests/test_commit_modes.py::ThreadQueueTest::test_enqueue_autocommit_on`` (commit mode
  ``auto``) -> ``test_on_commit_false_pushes_at_once_inside_a_transaction``
- ``tests/test_commit_modes.py::CommitModeTest::test_commit_mode_invalid_*`` ->
  ``test_a_wrong_on_commit_value_is_reported_by_the_checks`` (our settings are checked by
  ``manage.py check`` instead of raising ``ImproperlyConfigured`` at ``get_queue``)

Skipped, and why:

- the ``async=`` keyword kept for old rq versions, and ``get_queue(..., is_async=False)``
  itself: we have no per-call switch (see the override_settings port above);
- ``ThreadQueueTest``'s ``request_finished`` mode (jobs held until the response is sent,
  ``thread_queue.commit``/``clear``) and the deprecated ``AUTOCOMMIT`` setting: we have only
  "at the commit" (``ON_COMMIT`` True) and "at once" (False);
- ``test_commit_mode_empty_string_falls_back``: ``ON_COMMIT`` is a bool, there is no mode
  name to leave empty.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from django.core.checks import run_checks
from django.db import transaction
from django.test import override_settings

from django_redislock.exceptions import JobNotFound
from django_redislock.queue.queue import get_queue
from django_redislock.test import run_jobs
from tests.models import Account
from tests.support.counts import job_counts

from ..conftest import Backend
from .tasks import CALLS

ADD = "tests.testing.tasks.add"
FAKE = pytest.mark.parametrize("backend", ["fakeredis"], indirect=True)
EMPTY = job_counts()


@pytest.fixture
def queues(backend: Backend, settings: Any) -> Backend:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {}, "sync": {"EAGER": True}, "now": {"ON_COMMIT": False}},
    }
    CALLS.clear()
    return backend


class Rollback(Exception):
    pass


@FAKE
def test_a_queue_is_not_eager_unless_its_settings_say_so(queues: Backend) -> None:
    queued = get_queue("default").enqueue(ADD, args=[1, 2])
    assert queued.state == "ready"
    assert CALLS == []  # left for a worker
    assert get_queue("default").get(queued.id).state == "ready"

    ran = get_queue("sync").enqueue(ADD, args=[1, 2])
    assert (ran.state, ran.result) == ("done", "3")
    assert CALLS == [("add", (1, 2))]


@FAKE
def test_one_test_can_make_a_queue_eager_with_override_settings(
    queues: Backend, settings: Any
) -> None:
    eager = {**settings.REDISLOCK, "QUEUES": {"default": {"EAGER": True}}}
    with override_settings(REDISLOCK=eager):
        assert get_queue().enqueue(ADD, args=[2, 2]).result == "4"
    assert CALLS == [("add", (2, 2))]
    assert get_queue().enqueue(ADD, args=[3, 3]).state == "ready"  # as configured again
    assert CALLS == [("add", (2, 2))]


@FAKE
def test_an_eager_queue_leaves_nothing_in_redis(queues: Backend) -> None:
    sync = get_queue("sync")
    job = sync.enqueue(ADD, args=[4, 5], job_id="eager-1")
    failed = sync.enqueue("tests.testing.tasks.fails", args=["no"])
    assert (job.state, failed.state) == ("done", "dead")
    assert sync.counts() == EMPTY
    assert sync.counts(done=True)["done"] == 0
    for job_id in ("eager-1", failed.id):
        with pytest.raises(JobNotFound):
            sync.get(job_id)
    assert len(run_jobs("sync", scheduled=True)) == 0  # nothing left for a worker either


@FAKE
@pytest.mark.django_db(transaction=True)
def test_a_job_enqueued_in_a_transaction_runs_only_once_committed(queues: Backend) -> None:
    queue = get_queue()
    with transaction.atomic():
        account = Account.objects.create(balance=10)
        job = queue.enqueue("tests.testing.tasks.credit", args=[account.pk, 5])
        assert queue.counts() == EMPTY  # not in Redis before the commit
        with pytest.raises(JobNotFound):
            queue.get(job.id)
        assert len(run_jobs()) == 0
    assert queue.get(job.id).state == "ready"
    assert [j.result for j in run_jobs().done] == ["15"]


@FAKE
@pytest.mark.django_db(transaction=True)
def test_a_job_enqueued_in_a_rolled_back_transaction_never_runs(queues: Backend) -> None:
    queue = get_queue()
    with contextlib.suppress(Rollback), transaction.atomic():
        job = queue.enqueue(ADD, args=[1, 1])
        assert queue.counts()["ready"] == 0
        raise Rollback
    assert queue.counts() == EMPTY
    with pytest.raises(JobNotFound):
        queue.get(job.id)
    assert len(run_jobs(scheduled=True)) == 0
    assert CALLS == []


@FAKE
@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_job_is_there_at_once(queues: Backend) -> None:
    queue = get_queue()
    job = queue.enqueue(ADD, args=[1, 1])
    assert job.score > 0  # pushed: it has its place in line
    assert queue.counts()["ready"] == 1
    assert [j.id for j in run_jobs().done] == [job.id]


@FAKE
@pytest.mark.django_db(transaction=True)
def test_nested_atomic_blocks_push_at_the_outermost_commit(queues: Backend) -> None:
    queue = get_queue()
    with transaction.atomic():
        queue.enqueue(ADD, args=[1, 0])
        with transaction.atomic():
            queue.enqueue(ADD, args=[2, 0])
            assert queue.counts()["ready"] == 0
        assert queue.counts()["ready"] == 0  # the savepoint is released, not committed
    assert queue.counts()["ready"] == 2
    assert [j.result for j in run_jobs().jobs] == ["1", "2"]


@FAKE
@pytest.mark.django_db(transaction=True)
def test_an_eager_job_in_nested_atomic_blocks_runs_at_the_outermost_commit(
    queues: Backend,
) -> None:
    sync = get_queue("sync")
    with transaction.atomic():
        with transaction.atomic():
            pending = sync.enqueue(ADD, args=[3, 4])
        assert pending.state == "ready"
        assert CALLS == []
    assert CALLS == [("add", (3, 4))]


@FAKE
@pytest.mark.django_db(transaction=True)
def test_on_commit_false_pushes_at_once_inside_a_transaction(queues: Backend) -> None:
    now = get_queue("now")
    with contextlib.suppress(Rollback), transaction.atomic():
        job = now.enqueue(ADD, args=[5, 5])
        assert now.get(job.id).state == "ready"  # in Redis before any commit
        raise Rollback
    assert now.counts()["ready"] == 1  # a rollback does not take it back
    assert [j.result for j in run_jobs("now").done] == ["10"]


@pytest.mark.parametrize("value", ["later", 123, None, "on_db_commit"])
def test_a_wrong_on_commit_value_is_reported_by_the_checks(settings: Any, value: Any) -> None:
    settings.REDISLOCK = {"QUEUES": {"default": {"ON_COMMIT": value}}}
    errors = [e for e in run_checks() if (e.id or "").startswith("django_redislock")]
    assert len(errors) == 1
    assert "ON_COMMIT" in errors[0].msg
    assert "ON_COMMIT: True (the default)" in (errors[0].hint or "")
