"""Job dependencies, as three peers test theirs, ported onto ``depends_on``/``run_when`` and
the workflows' ``group``/``chain``/``then``/``on_complete``, in our own code. Every test runs
on fakeredis, a real server and a real Cluster (where "default" and "other" sit on two
slots, so a dependency across them goes through the outbox); jobs run in a burst worker in
this process (tasks: ``tests/ported_dependency_tasks.py``).

Ported from:

* RQ (``tests/test_dependencies.py``; the ``depends_on`` tests of ``tests/test_queue.py``
  and ``tests/test_job.py``). RQ's ``Dependency(allow_failure=True)`` is our
  ``run_when="finished"``; its "deferred" is our "waiting"; ``enqueue_dependents`` needs no
  call here (the script that ends a job releases its dependants); a cancelled or stopped
  dependency counts as failed in both; a horse killed mid-job is a job whose lease ran out
  with no attempt left.
* huey (``huey/tests/test_api.py``: ``TestGroupPrimitive``, ``TestChordPrimitive``,
  ``TestTaskChaining``). huey passes a step's return value to the next as its first
  argument; ours reads ``context.dependency_results``. A huey chord's callback runs however
  its members ended (a failed one contributes its exception, a revoked or expired one None):
  that is our ``on_complete``; ``then`` is the stricter variant (it never runs after a
  death), and both are tested. A revoked task is a cancelled job. huey's immediate mode
  (``huey/tests/test_immediate.py``: ``test_immediate_pipeline``, ``test_chord``, and the
  immediate half of ``test_api.py``'s ``test_disable_result_store``) is a queue's
  ``EAGER``: every step runs in the enqueueing call, and reads what the steps before it
  returned from them, since nothing is in Redis.
* BullMQ (``tests/flow.test.ts``, which was ``tests/test_flow.ts``). A flow's parent is the
  job that depends on its children; "waiting-children" is "waiting"; its default (a failed
  child leaves the parent waiting for ever) does not exist here: ours ends it dead, which is
  ``failParentOnFailure``; ``ignoreDependencyOnFailure`` is ``run_when="finished"``;
  ``getChildrenValues``/``getDependencies`` are ``context.dependency_results`` (in
  ``depends_on`` order, whole, not paged); ``getFlow`` is ``Job.depends_on`` and
  ``Job.dependants``; ``job.remove()`` of a child is ``cancel``.

What did not apply, and why:

* RQ: ``Dependency(enqueue_at_front=True)``: there is no front of the queue; a released job
  takes its place by its priority (ported as that). Pipelines passed to ``enqueue``: there
  is no such argument; ``transaction.atomic()`` defers the write the same way (ported as
  that); ``pipe.watch`` before an enqueue has no counterpart. ``Job.create`` of a job that
  is saved but never enqueued, and ``enqueue_job`` of it later: a dependency must be a job
  of a queue (ported as a scheduled dependency made due). ``result_ttl=0``: ``RESULT_TTL``
  is at least 1 s, and a dependency that is no longer kept is refused at enqueue, since how
  it ended is unknown (ported as that). ``Queue.all()`` listing a queue that holds only
  deferred jobs: there is no registry of queues (the waiting count is ported). The
  ``_dependency_ids`` patching, ``fetch_dependencies``, ``dependencies_are_met()``,
  ``set_status`` by hand and ``_enqueue_job`` taking a job out of the deferred registry:
  internals; states change only through the scripts, and ``Job.depends_on`` lists the
  dependencies.
* huey: ``.error()`` handlers, ``store_intermediate_errors`` and ``test_chain_errors``,
  ``test_chord_callback_err``, ``test_chord_error_cb``,
  ``test_chord_member_error_callback_independent``, ``test_error_callback*``: there are no
  error callbacks (``on_complete`` is the closest, and it is ported). The previous result
  passed as the next call's arguments, or a dict's as its keyword arguments
  (``test_pipeline_dict``, ``test_task_instances_args_kwargs``): a step reads its
  dependencies' results itself. ``ChordResult``/``ResultGroup`` handles and ``reset()``:
  a ``Workflow`` gives every step's result with ``results()``. huey's ``execute_next`` and
  ``read_schedule`` with a fake clock: a burst worker runs what is due, and a due time is
  moved with ``requeue``, never waited for.
* BullMQ: ``removeDependencyOnFailure``: a failed dependency cannot be forgotten (a
  ``"finished"`` dependant still lists it, with its failure). ``continueParentOnFailure``:
  a dependant never starts while some of its dependencies have not ended.
  ``removeChildDependency``, ``removeUnprocessedChildren``, adding children at run time
  (step jobs, ``moveToWaitingChildren``, ``WaitingChildrenError``): a job's dependencies
  are fixed when it is enqueued. ``removeOnComplete``/``removeOnFail`` and the children's
  values kept in the parent after a child is removed: a result lives ``RESULT_TTL``, with
  the child. Paging of ``getDependencies`` and ``getDependenciesCount``: ported as one read
  of 72 results, in order. "A job already has a parent": a job may have any number of
  dependants. ``job.remove()`` of a parent removing its children, and refusing while one is
  locked: cancelling a dependant leaves its dependencies alone (ported as that). Retrying
  a failed child putting it back among its parent's pending dependencies: a dependant
  decides once (ported as that). Prefixes, ``queuesOptions``/``defaultJobOptions``, parent
  opts on the root job, backoff strategies, ``attemptsMade`` on moving to active,
  ``QueueEvents``, and the Redis-only meta key test: other features, or none of ours.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from django_redislock import get_queue
from django_redislock.queue.jobs import Job
from django_redislock.queue.queue import Queue
from django_redislock.queue.worker.loop import Worker
from django_redislock.workflows import chain, group, step
from tests import ported_dependency_tasks as t
from tests.support.fixtures import Backend
from tests.support.waiting import server_now, wait_for

from .test_dependencies import run_one

pytestmark = pytest.mark.django_db(transaction=True)

BACKEND = "django_redislock.tasks.RedisTaskBackend"
FAILED = "django_redislock.exceptions.DependencyFailed"
TASKS = "tests.ported_dependency_tasks."
MARK, VALUE, COMBINE = TASKS + "mark", TASKS + "value", TASKS + "combine"
OUTCOMES, FLAKY = TASKS + "outcomes", TASKS + "flaky"


@pytest.fixture
def queues(backend: Backend, settings: Any) -> tuple[Queue, Queue]:
    options = {"LEASE": 30, "MAX_ATTEMPTS": 1, "RETRY_BACKOFF": 0}
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": options, "other": options}}
    settings.TASKS = {"default": {"BACKEND": BACKEND, "QUEUES": []}}
    t.reset()
    return get_queue("default"), get_queue("other")


@pytest.fixture
def queue(queues: tuple[Queue, Queue]) -> Queue:
    return queues[0]


@pytest.fixture(params=["same queue", "other queue"])
def there(request: pytest.FixtureRequest, queues: tuple[Queue, Queue]) -> Queue:
    """Where the dependants live: with their dependency in "default", or in "other" (told
    through the outbox)."""
    return queues[0] if request.param == "same queue" else queues[1]


def drain(*names: str) -> None:
    """Run every job ready in ``names`` (default: both queues), retries included, until none
    is ready or running there."""
    names = names or ("default", "other")
    for _ in range(50):
        Worker(list(names), burst=True).run()
        counts = [get_queue(name).counts() for name in names]
        if all(c["ready"] == c["running"] == 0 for c in counts):
            return
    raise AssertionError(f"jobs still ready after 50 bursts: {counts}")


def state(queue: Queue, job: Any) -> str:
    return str(queue.get(job.id).state)


def returned(queue: Queue, job: Any) -> Any:
    found = queue.get(job.id)
    assert found.state == "done", (found.state, found.error)
    return json.loads(found.result)


def nothing_written(*queues: Queue) -> bool:
    return all(sum(q.counts().values()) == 0 for q in queues)


def values(workflow: Any) -> list[Any]:
    """Each step's return value (None for one that did not succeed or is no longer kept)."""
    return [
        r.return_value if r is not None and r.status.name == "SUCCESSFUL" else None
        for r in workflow.results()
    ]


def statuses(workflow: Any) -> list[str | None]:
    return [None if r is None else r.status.name for r in workflow.results()]


# === RQ: tests/test_dependencies.py ==========================================================


def test_run_when_is_kept_with_the_job(queue: Queue):
    """test_allow_failure_is_persisted"""
    parent = queue.enqueue(MARK, ["p"])
    strict = queue.enqueue(MARK, ["s"], depends_on=[parent])
    lenient = queue.enqueue(MARK, ["l"], depends_on=[parent], run_when="finished")
    assert (strict.run_when, lenient.run_when) == ("succeeded", "finished")
    assert queue.get(strict.id).run_when == "succeeded"
    assert queue.get(lenient.id).run_when == "finished"
    assert [job.run_when for job in queue.get_many([strict.id, lenient.id])] == [
        "succeeded",
        "finished",
    ]


def test_a_dependant_stays_waiting_while_one_of_its_dependencies_has_not_ended(queue: Queue):
    """test_deferred_task_not_enqueued_when_dependencies_are_not_finished"""
    a = queue.enqueue(MARK, ["a"])
    b = queue.enqueue(MARK, ["b"], delay=3600)
    c = queue.enqueue(MARK, ["c"], depends_on=[a, b])
    assert c.state == "waiting"
    drain()
    assert t.ran() == ["a"]
    assert state(queue, a) == "done"
    assert state(queue, c) == "waiting"


def test_a_dependant_runs_after_its_dependency_succeeded_and_never_after_it_failed(
    queue: Queue,
):
    """test_job_dependency (a parent that succeeds, then one that fails)"""
    parent = queue.enqueue(MARK, ["parent"])
    child = queue.enqueue(MARK, ["child"], depends_on=[parent])
    drain()
    assert t.ran() == ["parent", "child"]
    assert state(queue, child) == "done"

    t.reset()
    dying = queue.enqueue(MARK, ["dying"], {"fail": True})
    orphan = queue.enqueue(MARK, ["orphan"], depends_on=[dying])
    drain()
    assert t.ran() == ["dying"]
    ended = queue.get(orphan.id)
    assert ended.state == "dead"
    assert ended.error_class == FAILED
    assert ended.attempts == 0


def test_only_the_finished_dependants_of_a_failed_job_run(queue: Queue):
    """test_job_dependency (a failing parent with an allow_failure dependant and a plain one)"""
    dying = queue.enqueue(MARK, ["dying"], {"fail": True})
    lenient = queue.enqueue(MARK, ["lenient"], depends_on=[dying], run_when="finished")
    strict = queue.enqueue(MARK, ["strict"], depends_on=[dying])
    run_one(queue, dying, fail=True)
    assert state(queue, lenient) == "ready"
    assert state(queue, strict) == "dead"
    drain()
    assert t.ran() == ["lenient"]
    assert state(queue, lenient) == "done"


def test_a_finished_dependant_waits_for_every_dependency_however_each_ends(queue: Queue):
    """test_job_dependency (two parents, one failing, with allow_failure)"""
    first = queue.enqueue(MARK, ["first"], {"fail": True})
    second = queue.enqueue(MARK, ["second"])
    child = queue.enqueue(MARK, ["child"], depends_on=[first, second], run_when="finished")
    run_one(queue, first, fail=True)
    assert state(queue, child) == "waiting"
    run_one(queue, second)
    assert state(queue, child) == "ready"
    drain()
    assert state(queue, child) == "done"


def test_a_released_dependant_takes_its_place_by_its_priority(queue: Queue):
    """test_job_dependency (enqueue_at_front): our jobs have priorities, not a front"""
    parent = queue.enqueue(MARK, ["parent"])
    low = queue.enqueue(MARK, ["low"], depends_on=[parent])
    high = queue.enqueue(MARK, ["high"], depends_on=[parent], priority=10)
    run_one(queue, parent)
    assert [job.id for job in queue.peek(2)] == [high.id, low.id]
    drain()
    assert t.ran() == ["high", "low"]


def test_enqueue_many_mixes_plain_and_waiting_jobs(queue: Queue):
    """test_multiple_jobs_with_dependencies"""
    parent = queue.enqueue(MARK, ["parent"])
    plain, waiting = queue.enqueue_many(
        [
            {"task": MARK, "args": ["plain"]},
            {"task": MARK, "args": ["waiting"], "depends_on": [parent]},
        ]
    )
    assert (plain.state, waiting.state) == ("ready", "waiting")
    assert (state(queue, plain), state(queue, waiting)) == ("ready", "waiting")
    run_one(queue, parent)
    assert state(queue, waiting) == "ready"
    [met] = queue.enqueue_many([{"task": MARK, "args": ["met"], "depends_on": [parent]}])
    assert met.state == "ready"


def test_dependencies_given_as_ids_jobs_and_task_results(queue: Queue):
    """test_dependency_list_in_depends_on"""
    as_job = queue.enqueue(VALUE, ["job", 1])
    as_id = queue.enqueue(VALUE, ["id", 2])
    as_result = t.value.enqueue("result", 3)
    elsewhere = t.value.using(queue_name="other").enqueue("elsewhere", 4)
    child = queue.enqueue(COMBINE, ["child"], depends_on=[as_job, as_id.id, as_result, elsewhere])
    assert child.depends_on == (as_job.id, as_id.id, as_result.id, f"other\t{elsewhere.id}")
    drain()
    assert t.ran()[-1] == "child"
    assert returned(queue, child) == [1, 2, 3, 4]


def test_a_dependant_of_a_scheduled_job_waits_until_that_job_is_made_due(queue: Queue):
    """test_enqueue_job_dependency: a parent not yet in the queue is, here, one not yet due"""
    parent = queue.enqueue(MARK, ["parent"], delay=3600)
    child = queue.enqueue(MARK, ["child"], depends_on=[parent])
    drain()
    assert t.ran() == []
    assert state(queue, child) == "waiting"
    assert queue.requeue(parent.id)  # due now
    drain()
    assert t.ran() == ["parent", "child"]
    assert state(queue, child) == "done"


def test_a_waiting_job_is_listed_from_when_it_was_enqueued(queue: Queue):
    """test_enqueue_job_dependency_score"""
    parent = queue.enqueue(MARK, ["parent"])
    before = server_now() * 1000
    child = queue.enqueue(MARK, ["child"], depends_on=[parent], delay=3600)
    after = server_now() * 1000
    [(listed, score)] = queue.scored_jobs("waiting")
    assert listed.id == child.id
    assert before - 1 <= score <= after + 1  # its enqueue, not its due time an hour on


def test_a_cancelled_dependency_counts_as_failed(queue: Queue, there: Queue):
    """test_dependencies_are_met_if_parent_is_canceled (RQ: not met, as a failure)"""
    parent = queue.enqueue(MARK, ["parent"])
    strict = there.enqueue(MARK, ["strict"], depends_on=[parent])
    lenient = there.enqueue(OUTCOMES, ["lenient"], depends_on=[parent], run_when="finished")
    assert queue.cancel(parent.id)
    ended = there.get(strict.id)
    assert ended.state == "dead"
    assert ended.error_class == FAILED
    assert "deleted before it ran" in ended.error
    drain()
    assert t.ran() == ["lenient"]
    assert returned(there, lenient) == [None]  # the cancelled job is gone


def test_a_dependency_no_longer_kept_cannot_be_named(queue: Queue):
    """test_can_enqueue_job_if_dependency_is_deleted: RQ enqueues it; we refuse it, since we
    cannot tell how it ended"""
    gone = queue.enqueue(MARK, ["gone"])
    run_one(queue, gone, fail=True)
    assert queue.delete(gone.id)
    with pytest.raises(ValueError, match=gone.id):
        queue.enqueue(MARK, ["child"], depends_on=[gone])
    assert nothing_written(queue)


def test_every_dependency_succeeded_when_the_dependant_runs(queue: Queue):
    """test_dependencies_are_met_at_execution_time"""
    queue.enqueue(VALUE, ["A", 1], job_id="A")
    queue.enqueue(VALUE, ["B", 2], job_id="B")
    checker = queue.enqueue(OUTCOMES, ["C"], job_id="C", depends_on=["A", "B"])
    drain()
    assert returned(queue, checker) == [["SUCCESSFUL", 1], ["SUCCESSFUL", 2]]


def test_a_dependency_whose_worker_died_counts_as_failed(queue: Queue, there: Queue):
    """test_allow_failures_when_work_horse_killed: its lease runs out, no attempt left"""
    parent = queue.enqueue(MARK, ["parent"])
    lenient = there.enqueue(MARK, ["lenient"], depends_on=[parent], run_when="finished")
    strict = there.enqueue(MARK, ["strict"], depends_on=[parent])
    [leased] = queue.pop()
    assert leased.id == parent.id
    queue.renew([leased], lease=0.05)  # then its worker dies: nobody renews it again
    wait_for(lambda: not queue.pop(0) and state(queue, parent) == "dead", 10, "the lapse")
    assert "lease ran out" in queue.get(parent.id).error
    wait_for(lambda: state(there, lenient) != "waiting", 10, "the dependants told")
    assert state(there, strict) == "dead"
    assert state(there, lenient) == "ready"
    drain()
    assert t.ran() == ["lenient"]


@pytest.mark.parametrize("single", ["job", "id"])
def test_depends_on_takes_a_list_not_a_single_job(queue: Queue, single: str):
    """test_dependency_accepts_single_job: RQ takes one job alone; we take a list only"""
    parent = queue.enqueue(MARK, ["parent"])
    with pytest.raises(TypeError, match="list of jobs"):
        queue.enqueue(MARK, ["child"], depends_on=parent if single == "job" else parent.id)
    assert queue.counts()["waiting"] == 0
    assert queue.enqueue(MARK, ["child"], depends_on=[parent]).state == "waiting"


def test_a_stopped_dependency_does_not_release_its_dependants(queue: Queue, there: Queue):
    """test_stopped_job_does_not_enqueue_dependents"""
    parent = queue.enqueue(MARK, ["parent"])
    strict = there.enqueue(MARK, ["strict"], depends_on=[parent])
    lenient = there.enqueue(MARK, ["lenient"], depends_on=[parent], run_when="finished")
    [leased] = queue.pop()
    assert queue.stop(parent.id, by="ops")
    assert state(there, strict) == "waiting"  # asked to stop, not stopped yet
    assert queue.renew_leases([leased])[1] == [parent.id]  # its worker learns it…
    assert queue.retry(leased, delay=0, error="JobCancelled: stopped")  # …and stops it
    assert queue.get(parent.id).error_class == "django_redislock.exceptions.JobCancelled"
    assert state(there, strict) == "dead"
    assert there.get(strict.id).error_class == FAILED
    assert state(there, lenient) == "ready"


# === RQ: tests/test_queue.py, tests/test_job.py ==============================================


def test_one_dependency_releases_its_dependants_in_two_queues(queues: tuple[Queue, Queue]):
    """test_enqueue_dependents, test_enqueue_dependents_on_multiple_queues,
    test_all_queues_with_only_deferred_jobs"""
    default, other = queues
    parent = default.enqueue(MARK, ["parent"])
    here = [default.enqueue(MARK, [f"here{n}"], depends_on=[parent]) for n in range(2)]
    there = other.enqueue(MARK, ["there"], depends_on=[parent])
    assert other.counts()["waiting"] == 1  # a queue holding only a waiting job
    assert other.counts()["ready"] == 0
    assert set(default.get(parent.id).dependants) == {here[0].id, here[1].id, f"other\t{there.id}"}
    run_one(default, parent)
    assert [state(default, job) for job in here] == ["ready", "ready"]
    assert state(other, there) == "ready"
    assert default.counts()["waiting"] == other.counts()["waiting"] == 0


def test_a_dependant_is_not_ready_before_its_dependency_is_done_and_ready_at_once_after(
    queue: Queue,
):
    """test_enqueue_job_with_dependency, test_enqueue_job_with_dependency_by_id"""
    parent = queue.enqueue(MARK, ["parent"])
    child = queue.enqueue(MARK, ["child"], depends_on=[parent.id])
    assert [job.id for job in queue.jobs("ready")] == [parent.id]
    run_one(queue, parent)
    assert [job.id for job in queue.jobs("ready")] == [child.id]
    met = queue.enqueue(MARK, ["met"], depends_on=[parent.id])
    assert met.state == "ready"
    assert [job.id for job in queue.jobs("ready")] == [child.id, met.id]


@pytest.mark.parametrize("ended", ["done", "dead"])
@pytest.mark.parametrize("run_when", ["succeeded", "finished"])
def test_a_dependency_in_another_queue_that_ended_already_counts_at_once(
    queues: tuple[Queue, Queue], ended: str, run_when: str
):
    """test_enqueue_job_with_dependency ("jobs dependent on finished jobs are immediately
    enqueued"), the dependency in another queue: by the time enqueue returns"""
    default, other = queues
    parent = other.enqueue(MARK, ["parent"])
    run_one(other, parent, fail=ended == "dead")
    child = default.enqueue(MARK, ["child"], depends_on=[parent], run_when=run_when)
    expected = "dead" if (ended, run_when) == ("dead", "succeeded") else "ready"
    assert state(default, child) == expected
    assert default.counts()["waiting"] == 0


def test_a_dependant_enqueued_in_a_transaction_is_written_at_commit(queue: Queue):
    """test_enqueue_job_with_dependency_and_pipeline: our deferred write is the commit"""
    parent = queue.enqueue(MARK, ["parent"])
    with transaction.atomic():
        child = queue.enqueue(MARK, ["child"], depends_on=[parent])
        assert child.state == "waiting"
        assert queue.counts()["waiting"] == 0  # not written yet
    assert state(queue, child) == "waiting"
    with transaction.atomic():
        dropped = queue.enqueue(MARK, ["dropped"], depends_on=[parent])
        transaction.set_rollback(True)
    assert queue.get_many([dropped.id]) == [None]
    assert queue.get(parent.id).dependants == (child.id,)


def test_a_released_dependant_keeps_its_own_options(queue: Queue):
    """test_enqueue_job_with_dependency_and_timeout (and its other options)"""
    parent = queue.enqueue(MARK, ["parent"])
    child = queue.enqueue(
        FLAKY,
        ["child", 1, "second time"],
        depends_on=[parent],
        time_limit=123,
        max_attempts=2,  # the queue's is 1: kept, the failed first run is retried
        priority=7,
        meta={"mine": True},
    )
    run_one(queue, parent)
    released = queue.get(child.id)
    assert released.state == "ready"
    assert released.priority == 7
    assert released.meta["time_limit"] == 123
    assert released.meta["mine"] is True
    drain()
    assert returned(queue, child) == "second time"
    assert queue.get(child.id).attempts == 2


def test_a_dependant_is_released_when_its_last_running_dependency_ends(queue: Queue):
    """test_enqueues_dependent_if_other_dependencies_finished"""
    parents = [queue.enqueue(MARK, [f"p{n}"]) for n in range(3)]
    [started] = queue.pop()  # p0 runs
    run_one(queue, parents[1])
    run_one(queue, parents[2])
    child = queue.enqueue(MARK, ["child"], depends_on=parents)
    assert child.state == "waiting"
    assert queue.ack(started, '"ok"')
    assert state(queue, child) == "ready"
    assert [job.id for job in queue.jobs("ready")] == [child.id]
    assert queue.get(child.id).depends_on == tuple(p.id for p in parents)


def test_a_dependant_stays_waiting_while_another_dependency_is_still_queued(queue: Queue):
    """test_does_not_enqueue_dependent_if_other_dependencies_not_finished"""
    started = queue.enqueue(MARK, ["started"])
    queued = queue.enqueue(MARK, ["queued"], delay=3600)
    [leased] = queue.pop()
    child = queue.enqueue(MARK, ["child"], depends_on=[started, queued])
    assert queue.ack(leased, '"ok"')
    assert state(queue, child) == "waiting"
    assert queue.jobs("ready") == []


def test_depends_on_is_kept_and_read_back(queues: tuple[Queue, Queue]):
    """test_persistence_of_parent_job"""
    default, other = queues
    parent = default.enqueue(MARK, ["parent"])
    elsewhere = other.enqueue(MARK, ["elsewhere"])
    by_job = default.enqueue(MARK, ["by job"], depends_on=[parent, elsewhere])
    by_id = default.enqueue(MARK, ["by id"], depends_on=[parent.id])
    assert default.get(by_job.id).depends_on == (parent.id, f"other\t{elsewhere.id}")
    assert default.get(by_id.id).depends_on == (parent.id,)
    assert default.get(parent.id).dependants == (by_job.id, by_id.id)
    assert other.get(elsewhere.id).dependants == (f"default\t{by_job.id}",)
    for bad in ({"id": "not-a-job"}, 12345):
        with pytest.raises(TypeError, match="job ids, Jobs and TaskResults"):
            default.enqueue(MARK, ["bad"], depends_on=[parent.id, bad])
    assert default.counts()["waiting"] == 2


# === huey: TestGroupPrimitive ================================================================


def test_a_group_gives_each_members_result_in_order(queues: tuple[Queue, Queue]):
    """test_group"""
    wf = group([step(t.add, n, 1) for n in range(3)]).enqueue()
    drain()
    assert values(wf) == [1, 2, 3]
    assert wf.status == "succeeded"

    failing = group([step(t.countdown, 1), step(t.countdown, -1), step(t.countdown, 2)]).enqueue()
    drain()
    assert values(failing) == [0, None, 1]
    assert statuses(failing) == ["SUCCESSFUL", "FAILED", "SUCCESSFUL"]
    assert failing.status == "failed"


def test_a_group_of_different_tasks(queues: tuple[Queue, Queue]):
    """test_multiple_task_types"""
    wf = group([step(t.add, 1, 1), step(t.add, 2, 2), step(t.mul, 10, 3)]).enqueue()
    assert len(wf.steps) == 3
    drain()
    assert values(wf) == [2, 4, 30]
    assert sum(get_queue().counts().values()) == 0


def test_members_run_by_priority_and_their_callback_sees_them_as_given(
    queues: tuple[Queue, Queue],
):
    """test_group_priorities, test_group_callback"""
    members = [
        step(t.mark.using(priority=1), "low"),
        step(t.mark.using(priority=10), "high"),
        step(t.mark.using(priority=5), "mid"),
    ]
    wf = group(members).then(step(t.combine, "callback")).enqueue()
    assert wf.progress()["ready"] == 3
    assert wf.progress()["waiting"] == 1
    drain()
    assert t.ran() == ["high", "mid", "low", "callback"]
    assert values(wf) == ["low", "high", "mid", ["low", "high", "mid"]]


def test_a_report_runs_after_a_members_failure(queues: tuple[Queue, Queue]):
    """test_group_error_handler: no error callback; on_complete runs once all ended"""
    members = group([step(t.countdown, 1), step(t.countdown, -1), step(t.countdown, 3)])
    wf = members.on_complete(step(t.outcomes, "report")).enqueue()
    drain()
    assert t.ran()[-1] == "report"
    assert values(wf)[-1] == [
        ["SUCCESSFUL", 0],
        ["FAILED", "builtins.ValueError"],
        ["SUCCESSFUL", 2],
    ]


# === huey: TestChordPrimitive ================================================================


def test_a_chord_sums_its_members(queues: tuple[Queue, Queue]):
    """test_chord, test_chord_result_handles"""
    wf = group([step(t.add, n, 1) for n in range(3)]).then(step(t.add)).enqueue()
    assert wf.progress() == {"waiting": 1, "ready": 3, "running": 0, "done": 0, "dead": 0}
    drain()
    assert values(wf) == [1, 2, 3, 6]  # every member's result is still there
    assert t.ran()[-1] == "add=6"

    single = group([step(t.add, 100, 1)]).then(step(t.add)).enqueue()
    drain()
    assert values(single) == [101, 101]


def test_a_chord_followed_by_more_steps(queues: tuple[Queue, Queue]):
    """test_chord_callback_cb"""
    wf = group([step(t.add, n, 1) for n in range(3)]).then(step(t.add), step(t.add, 1)).enqueue()
    drain()
    assert values(wf) == [1, 2, 3, 6, 7]

    longer = group([step(t.add, 1, 1)]).then(step(t.add), step(t.add, 1), step(t.add, 1))
    wf = longer.enqueue()
    drain()
    assert values(wf) == [2, 2, 3, 4]
    assert t.ran()[-4:] == ["add=2", "add=2", "add=3", "add=4"]


def test_a_chord_of_chains(queues: tuple[Queue, Queue]):
    """test_chord_task_cb"""
    members = [chain(step(t.add, n, 1), step(t.add, 1), step(t.add, 1)) for n in range(3)]
    wf = group(members).then(step(t.add)).enqueue()
    drain()
    assert values(wf)[-1] == 3 + 4 + 5
    assert values(wf)[:-1] == [1, 2, 3, 2, 3, 4, 3, 4, 5]


def test_a_failed_member_ends_a_then_callback_and_shows_in_an_on_complete_one(
    queues: tuple[Queue, Queue],
):
    """test_chord_error: huey's callback runs and sees the exception: our on_complete;
    our then never runs it"""
    members = [step(t.countdown, 2), step(t.countdown, -1), step(t.countdown, 3)]
    strict = group(members).then(step(t.outcomes, "strict")).enqueue()
    lenient = group(members).on_complete(step(t.outcomes, "lenient")).enqueue()
    drain()
    assert "strict" not in t.ran()
    [callback] = strict.results()[-1:]
    assert callback.status.name == "FAILED"
    assert callback.errors[-1].exception_class_path == FAILED
    assert values(lenient)[-1] == [
        ["SUCCESSFUL", 1],
        ["FAILED", "builtins.ValueError"],
        ["SUCCESSFUL", 2],
    ]


def test_a_cancelled_member_gives_none_to_the_callback(queues: tuple[Queue, Queue]):
    """test_chord_revoked_member"""
    default = queues[0]
    wf = group([step(t.add, n, 1) for n in range(3)]).on_complete(step(t.combine, "cb")).enqueue()
    _, revoked, _ = wf.steps[1]
    assert default.cancel(revoked)
    drain()
    assert t.ran() == ["add=1", "add=3", "cb"]
    assert values(wf)[-1] == [1, None, 3]
    assert wf.results()[1] is None  # a cancelled job is not kept


def test_an_expired_member_gives_none_to_the_callback(queue: Queue):
    """test_chord_expired_member: due an hour ago, to be started within a minute of it"""
    first = queue.enqueue(VALUE, ["first", 1])
    expired = queue.enqueue(
        VALUE, ["expired", 2], at=timezone.now() - timedelta(hours=1), expires=60
    )
    last = queue.enqueue(VALUE, ["last", 3])
    callback = queue.enqueue(
        COMBINE, ["cb"], depends_on=[first, expired, last], run_when="finished"
    )
    drain()
    assert t.ran() == ["first", "last", "cb"]
    ended = queue.get(expired.id)
    assert (ended.state, ended.attempts) == ("dead", 0)
    assert "expired" in ended.error
    assert returned(queue, callback) == [1, None, 3]


def test_members_retried_to_success_give_their_success(queues: tuple[Queue, Queue]):
    """test_chord_member_retry_then_success"""
    retried = t.flaky.using(max_attempts=2)
    members = [step(retried, "one", 1, 10), step(retried, "two", 1, 20)]
    wf = group(members).then(step(t.add)).enqueue()
    drain()
    assert values(wf) == [10, 20, 30]
    assert [r.attempts for r in wf.results()[:2]] == [2, 2]
    assert sorted(t.ran()[:-1]) == ["one#1", "one#2", "two#1", "two#2"]


def test_a_chord_whose_members_all_fail(queues: tuple[Queue, Queue]):
    """test_chord_total_failure"""
    members = [step(t.countdown, -1), step(t.countdown, -2)]
    strict = group(members).then(step(t.combine, "strict")).enqueue()
    lenient = group(members).on_complete(step(t.combine, "lenient")).enqueue()
    drain()
    assert statuses(strict) == ["FAILED", "FAILED", "FAILED"]
    assert strict.status == "failed"
    assert values(lenient)[-1] == [None, None]
    assert lenient.status == "failed"  # a dead member fails the workflow, its report ran


def test_a_chord_of_chains_whose_tails_fail(queues: tuple[Queue, Queue]):
    """test_chord_pipeline_member_tail_fails"""
    members = [chain(step(t.mark, f"head{n}"), step(t.mark, f"tail{n}", fail=True)) for n in (1, 2)]
    wf = group(members).on_complete(step(t.outcomes, "cb")).enqueue()
    drain()
    assert statuses(wf) == ["SUCCESSFUL", "FAILED", "SUCCESSFUL", "FAILED", "SUCCESSFUL"]
    assert values(wf)[-1] == [["FAILED", "builtins.RuntimeError"]] * 2


def test_a_chord_of_chains_whose_heads_fail(queues: tuple[Queue, Queue]):
    """test_chord_pipeline_member_head_fails: the tails never run, and say why"""
    members = [chain(step(t.mark, f"head{n}", fail=True), step(t.mark, f"tail{n}")) for n in (1, 2)]
    wf = group(members).on_complete(step(t.outcomes, "cb")).enqueue()
    drain()
    assert t.ran()[-1] == "cb"
    assert sorted(t.ran()[:-1]) == ["head1", "head2"]
    assert values(wf)[-1] == [["FAILED", FAILED]] * 2


def test_a_chord_of_chains_whose_first_head_is_cancelled(queues: tuple[Queue, Queue]):
    """test_chord_pipeline_member_head_revoked"""
    default = queues[0]
    members = [chain(step(t.add, n), step(t.mul, 2)) for n in (1, 2)]
    wf = group(members).on_complete(step(t.combine, "cb")).enqueue()
    assert default.cancel(wf.steps[0][1])
    drain()
    assert t.ran() == ["add=2", "mul=4", "cb"]
    assert values(wf)[-1] == [None, 4]
    assert default.get(wf.steps[1][1]).error_class == FAILED


def test_a_callback_sees_its_members_in_order_whatever_order_they_ran_in(queue: Queue):
    """test_chord_ordering"""
    wf = group([step(t.value, n, n) for n in "abc"]).then(step(t.combine, "cb")).enqueue()
    leased = {job.args[0]: job for job in queue.pop(3)}
    for name in "cab":
        assert queue.ack(leased[name], json.dumps(name))
    drain()
    assert values(wf)[-1] == ["a", "b", "c"]


def test_a_chord_of_scheduled_members_and_a_scheduled_callback(queue: Queue):
    """test_chord_scheduling: due times moved with requeue, not waited for"""
    later = timezone.now() + timedelta(hours=1)
    members = [step(t.value.using(run_after=later), n, n) for n in "abc"]
    wf = group(members).then(step(t.combine.using(run_after=later), "cb")).enqueue()
    assert queue.counts()["scheduled"] == 3
    assert queue.counts()["waiting"] == 1
    drain()
    assert t.ran() == []
    for _, job_id, _ in wf.steps[:3]:
        assert queue.requeue(job_id)
    drain()
    assert sorted(t.ran()) == ["a", "b", "c"]
    callback = wf.steps[-1][1]
    assert queue.get(callback).state == "scheduled"  # released, but not due yet
    assert queue.requeue(callback)
    drain()
    assert values(wf)[-1] == ["a", "b", "c"]


def test_members_returning_none_succeed(queues: tuple[Queue, Queue]):
    """test_chord_return_none"""
    members = [step(t.value, "one", 1), step(t.value, "none", None), step(t.value, "none", None)]
    wf = group(members).then(step(t.outcomes, "cb")).enqueue()
    drain()
    assert values(wf)[-1] == [["SUCCESSFUL", 1], ["SUCCESSFUL", None], ["SUCCESSFUL", None]]


def test_nested_chords(queues: tuple[Queue, Queue]):
    """test_nested_chord"""

    def chord(members: list[Any], name: str) -> Any:
        return group(members).then(step(t.combine, name))

    leaf = [step(t.value, n, n) for n in "abcdefgh"]
    wf = chord(
        [
            chord(leaf[0:2], "ab"),
            chord([chord(leaf[2:4], "cd"), chord(leaf[4:6], "ef")], "cdef"),
            chord(leaf[6:8], "gh"),
        ],
        "all",
    ).enqueue()
    drain()
    ran = t.ran()
    assert sorted(ran[:8]) == list("abcdefgh")
    assert ran[-1] == "all"
    assert ran.index("cdef") > max(ran.index("cd"), ran.index("ef"))
    assert values(wf)[-1] == [["a", "b"], [["c", "d"], ["e", "f"]], ["g", "h"]]


def test_a_nested_chord_whose_callback_is_a_chain(queues: tuple[Queue, Queue]):
    """test_nested_chord_callback_pipeline_tail_walking"""
    inner = group([step(t.add, 1), step(t.add, 2)]).then(step(t.add), step(t.mul, 100))
    wf = group([inner, step(t.add, 99)]).then(step(t.combine, "outer")).enqueue()
    drain()
    assert values(wf)[-1] == [300, 99]


def test_a_chord_chained_further(queues: tuple[Queue, Queue]):
    """test_chord_chaining: the step after the callback; and after a failed member"""
    wf = group([step(t.add, n, 1) for n in range(2)]).then(step(t.add), step(t.mul, 10)).enqueue()
    drain()
    assert values(wf) == [1, 2, 3, 30]

    t.reset()
    members = [step(t.countdown, 2), step(t.countdown, -1)]
    failed = group(members).then(step(t.add), step(t.mul, 10)).enqueue()
    drain()
    assert t.ran() == ["countdown=2", "countdown=-1"]
    assert statuses(failed) == ["SUCCESSFUL", "FAILED", "FAILED", "FAILED"]


# === huey: TestTaskChaining ==================================================================


def test_a_pipeline_passes_each_result_on(queues: tuple[Queue, Queue]):
    """test_pipeline_tuple (JSON keeps a pair as a list)"""
    wf = chain(step(t.fib, 1), step(t.fib), step(t.fib), step(t.fib)).enqueue()
    drain()
    assert values(wf) == [[2, 1], [3, 2], [5, 3], [8, 5]]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([(t.add, 1, 2), (t.add, 3), (t.add, 4), (t.add, 5)], [3, 6, 10, 15]),
        ([(t.add, 1, 2), (t.mul, 4), (t.add, -5), (t.mul, 3), (t.add, 8)], [3, 12, 7, 21, 29]),
        ([(t.add, 1, 2), (t.add, 3), (t.mul, 4), (t.mul, 5)], [3, 6, 24, 120]),
    ],
    ids=["partial-add", "partial-mixed", "mixed-instances"],
)
def test_a_pipeline_of_partial_calls(queues: tuple[Queue, Queue], steps: list, expected: list):
    """test_partial, test_mixed_tasks_instances"""
    wf = chain(*[step(task, *args) for task, *args in steps]).enqueue()
    assert wf.progress()["ready"] == 1  # one step at a time
    drain()
    assert values(wf) == expected


def test_a_pipeline_that_fails_midway_runs_nothing_after(queues: tuple[Queue, Queue]):
    """test_pipeline_error_midway"""
    wf = chain(step(t.countdown, 1), *[step(t.countdown) for _ in range(3)]).enqueue()
    drain()
    assert t.ran() == ["countdown=1", "countdown=0", "countdown=-1"]
    assert values(wf)[:2] == [0, -1]
    third, fourth = wf.results()[2:]
    assert third.errors[-1].exception_class_path == "builtins.ValueError"
    assert fourth.errors[-1].exception_class_path == FAILED
    assert get_queue().counts()["ready"] == 0


def test_a_pipeline_cancelled_midway_runs_nothing_from_there(queue: Queue):
    """test_pipeline_revoke_midway"""
    wf = chain(step(t.add, 1, 1), step(t.add, 1), step(t.add, 1), step(t.add, 1)).enqueue()
    assert queue.cancel(wf.steps[2][1])
    drain()
    assert t.ran() == ["add=2", "add=3"]
    assert values(wf) == [2, 3, None, None]
    assert wf.results()[2] is None
    assert queue.get(wf.steps[3][1]).error_class == FAILED
    assert queue.counts()["waiting"] == 0


# === huey: immediate mode (tests/test_immediate.py; test_api.py TestDisableResultStore) ===
# huey's immediate mode is a queue's EAGER: each job runs in the enqueueing call.


@pytest.fixture
def eager(queues: tuple[Queue, Queue], settings: Any) -> Queue:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"EAGER": True}}}
    return get_queue()


def test_an_eager_pipeline_runs_every_step_at_once_in_order(eager: Queue):
    """TestDisableResultStore.test_disable_result_store (its immediate half)"""
    wf = chain(step(t.mark, "six"), step(t.mark, "seven"), step(t.mark, "eight")).enqueue()
    assert t.ran() == ["six", "seven", "eight"]
    assert wf.status == "succeeded"
    assert sum(eager.counts().values()) == 0  # nothing went through Redis


def test_an_eager_pipeline_passes_each_result_on(eager: Queue):
    """test_immediate_pipeline"""
    wf = chain(step(t.add, 3, 4), step(t.add, 5), step(t.add, 6), step(t.add, 7)).enqueue()
    assert values(wf) == [7, 12, 18, 25]


def test_an_eager_chord(eager: Queue):
    """test_chord (immediate)"""
    wf = group([step(t.add, n, 1) for n in range(10)]).then(step(t.add)).enqueue()
    assert values(wf)[-1] == 55


def test_an_eager_dependant_reads_its_dependencys_result(eager: Queue):
    """test_immediate_pipeline, through enqueue_many rather than a workflow"""
    first, second = eager.enqueue_many(
        [
            {"task": VALUE, "args": ["first", 1], "job_id": "first"},
            {"task": OUTCOMES, "args": ["second"], "depends_on": ["first"]},
        ]
    )
    assert (first.state, second.state) == ("done", "done")
    assert json.loads(second.result) == [["SUCCESSFUL", 1]]


# === BullMQ: tests/flow.test.ts ==============================================================


def test_children_run_before_their_parent_in_another_queue(queues: tuple[Queue, Queue]):
    """should process children before the parent (childrenValues, getDependencies)"""
    default, other = queues
    children = [default.enqueue(VALUE, [f"child{n}", {"idx": n}]) for n in range(3)]
    parent = other.enqueue(OUTCOMES, ["parent"], depends_on=children)
    assert parent.state == "waiting"
    assert [default.get(c.id).dependants for c in children] == [(f"other\t{parent.id}",)] * 3
    drain("other")
    assert t.ran() == []
    drain("default")
    assert state(other, parent) == "ready"
    drain("other")
    assert returned(other, parent) == [["SUCCESSFUL", {"idx": n}] for n in range(3)]


def test_a_finished_parent_runs_after_every_child_failed_and_sees_why(
    queues: tuple[Queue, Queue],
):
    """when ignoreDependencyOnFailure is provided (getIgnoredChildrenFailures)"""
    default, other = queues
    children = [default.enqueue(MARK, [f"c{n}"], {"fail": True}) for n in range(3)]
    parent = other.enqueue(COMBINE, ["parent"], depends_on=children, run_when="finished")
    drain()
    assert returned(other, parent) == [None] * 3
    for child in children:
        ended = default.get(child.id)
        assert ended.state == "dead"
        assert "failed on purpose" in ended.error
    assert other.counts()["waiting"] == 0


def test_a_failure_fails_every_level_above_it(queues: tuple[Queue, Queue]):
    """when failParentOnFailure option is provided / parent in waiting-children state: each
    level names the level below it"""
    default, other = queues
    failing = other.enqueue(MARK, ["grandchild-bad"], {"fail": True})
    fine = other.enqueue(MARK, ["grandchild-ok"])
    child = default.enqueue(MARK, ["child"], depends_on=[failing, fine])
    sibling = default.enqueue(MARK, ["sibling"])
    parent = other.enqueue(MARK, ["parent"], depends_on=[sibling, child])
    drain()
    assert sorted(t.ran()) == ["grandchild-bad", "grandchild-ok", "sibling"]
    middle = default.get(child.id)
    assert (middle.state, middle.error_class) == ("dead", FAILED)
    assert f"other:{failing.id}" in middle.error
    top = other.get(parent.id)
    assert (top.state, top.error_class) == ("dead", FAILED)
    named = top.error.partition("(")[0]  # (what follows in brackets is the child's reason)
    assert f"default:{child.id}" in named
    assert failing.id not in named
    assert [q.counts()["waiting"] for q in queues] == [0, 0]


@pytest.mark.parametrize(
    "options", [{"delay": 3600}, {"priority": 5}], ids=["delayed", "prioritized"]
)
def test_a_delayed_or_prioritized_parent_fails_with_its_child(queue: Queue, options: dict):
    """failParentOnFailure: when parent is in delayed state / in prioritized state"""
    child = queue.enqueue(MARK, ["child"], {"fail": True})
    parent = queue.enqueue(MARK, ["parent"], depends_on=[child], **options)
    drain()
    assert t.ran() == ["child"]
    assert queue.get(parent.id).error_class == FAILED
    assert queue.counts()["scheduled"] == 0


def test_a_finished_parent_over_a_child_its_own_child_failed(queues: tuple[Queue, Queue]):
    """failParentOnFailure with ignoreDependencyOnFailure in the middle: the child fails for
    its grandchild; the parent runs and sees why"""
    default, other = queues
    failing = other.enqueue(MARK, ["bad"], {"fail": True})
    fine = other.enqueue(MARK, ["ok"])
    child = default.enqueue(MARK, ["child"], depends_on=[failing, fine])
    parent = other.enqueue(OUTCOMES, ["parent"], depends_on=[child], run_when="finished")
    drain()
    assert "child" not in t.ran()
    assert returned(other, parent) == [["FAILED", FAILED]]
    assert failing.id in default.get(child.id).error


def test_children_run_by_priority_before_their_parent(queues: tuple[Queue, Queue]):
    """when priority is provided: processes children before the parent respecting priority"""
    default, other = queues
    children = [
        default.enqueue(MARK, [name], priority=priority)
        for name, priority in (("low", -5), ("high", 50), ("mid", 0))
    ]
    parent = other.enqueue(COMBINE, ["parent"], depends_on=children, priority=100)
    drain()
    assert t.ran() == ["high", "mid", "low", "parent"]
    assert returned(other, parent) == ["low", "high", "mid"]


def test_jobs_added_later_depend_on_earlier_ones_by_id(queue: Queue):
    """when continually adding jobs: adds jobs that do not exist"""
    queue.enqueue(MARK, ["mon"], job_id="mon")
    queue.enqueue(MARK, ["tue"], job_id="tue", depends_on=["mon"])
    queue.enqueue(MARK, ["wed"], job_id="wed", depends_on=["tue"])
    drain()
    assert t.ran() == ["mon", "tue", "wed"]
    thu = queue.enqueue(MARK, ["thu"], job_id="thu", depends_on=["wed"])
    assert thu.state == "ready"  # its dependency ended already
    drain()
    assert state(queue, thu) == "done"


def test_a_parent_added_while_its_child_runs(queue: Queue):
    """processes parent jobs added while a child job is active"""
    queue.enqueue(MARK, ["mon"], job_id="mon")
    [running] = queue.pop()
    tue = queue.enqueue(MARK, ["tue"], job_id="tue", depends_on=["mon"])
    assert tue.state == "waiting"
    assert queue.ack(running, '"mon"')
    drain()
    assert t.ran() == ["tue"]
    assert state(queue, tue) == "done"


def test_a_parent_reads_all_of_many_childrens_results_in_order(queues: tuple[Queue, Queue]):
    """should get paginated processed dependencies keys: 72 children, read at once"""
    default, other = queues
    children = default.enqueue_many([{"task": VALUE, "args": [f"c{n}", n]} for n in range(72)])
    parent = other.enqueue(COMBINE, ["parent"], depends_on=children)
    drain()
    assert returned(other, parent) == list(range(72))


def test_a_flow_tree_is_read_back_from_both_ends(queues: tuple[Queue, Queue]):
    """should get a flow tree / part of it"""
    default, other = queues
    jobs = default.enqueue_many(
        [
            {"task": MARK, "args": ["root"], "job_id": "root", "depends_on": ["a", "b"]},
            {"task": MARK, "args": ["a"], "job_id": "a", "depends_on": ["a1"]},
            {"task": MARK, "args": ["a1"], "job_id": "a1"},
            {"task": MARK, "args": ["b"], "job_id": "b"},
        ]
    )
    leaf = other.enqueue(MARK, ["x"], job_id="x", depends_on=[jobs[0]])
    assert default.get("root").depends_on == ("a", "b")
    assert default.get("a").depends_on == ("a1",)
    assert default.get("a1").dependants == ("a",)
    assert set(default.get("a").dependants) == set(default.get("b").dependants) == {"root"}
    assert default.get("root").dependants == ("other\tx",)
    assert leaf.depends_on == ("default\troot",)
    assert [job.state for job in jobs] == ["waiting", "waiting", "ready", "ready"]


def test_a_parent_with_no_children_runs_at_once(queues: tuple[Queue, Queue]):
    """should process parent when children is an empty array"""
    default = queues[0]
    plain = default.enqueue(MARK, ["plain"], depends_on=[])
    assert plain.state == "ready"
    wf = group([]).then(step(t.mark, "after nothing")).enqueue()
    drain()
    assert sorted(t.ran()) == ["after nothing", "plain"]
    assert wf.status == "succeeded"


def test_a_chain_is_released_one_level_at_a_time(queue: Queue):
    """should process a chain of jobs (and the waiting count on the way)"""
    deepest = queue.enqueue(VALUE, ["idx2", {"idx": 2}])
    middle = queue.enqueue(OUTCOMES, ["idx1"], depends_on=[deepest])
    top = queue.enqueue(OUTCOMES, ["idx0"], depends_on=[middle])
    root = queue.enqueue(OUTCOMES, ["root"], depends_on=[top])
    expected_waiting = [2, 1, 0, 0]
    for job, waiting in zip((deepest, middle, top, root), expected_waiting, strict=True):
        assert [j.id for j in queue.jobs("ready")] == [job.id]
        Worker(["default"], burst=True, max_jobs=1).run()
        assert queue.counts()["waiting"] == waiting
    assert t.ran() == ["idx2", "idx1", "idx0", "root"]
    assert returned(queue, middle) == [["SUCCESSFUL", {"idx": 2}]]
    assert returned(queue, root) == [["SUCCESSFUL", [["SUCCESSFUL", [["SUCCESSFUL", {"idx": 2}]]]]]]


def test_a_delayed_parent_is_scheduled_once_its_children_are_done(
    queues: tuple[Queue, Queue],
):
    """when parent has delay / when children have delay"""
    default, other = queues
    child = default.enqueue(VALUE, ["child", {"idx": 0}], delay=3600)
    parent = other.enqueue(OUTCOMES, ["parent"], depends_on=[child], delay=3600)
    drain()
    assert t.ran() == []
    assert state(default, child) == "scheduled"
    assert state(other, parent) == "waiting"
    assert default.requeue(child.id)
    drain()
    assert state(other, parent) == "scheduled"
    assert other.requeue(parent.id)
    drain()
    assert returned(other, parent) == [["SUCCESSFUL", {"idx": 0}]]


def test_a_parent_in_a_paused_queue_waits_for_resume(queues: tuple[Queue, Queue]):
    """should not process parent until queue is unpaused"""
    default, other = queues
    assert other.pause()
    child = default.enqueue(MARK, ["child"])
    parent = other.enqueue(MARK, ["parent"], depends_on=[child])
    drain("default")
    assert state(other, parent) == "ready"
    Worker(["other"], burst=True).run()
    assert t.ran() == ["child"]
    assert other.resume()
    drain("other")
    assert t.ran() == ["child", "parent"]


def test_enqueue_many_writes_several_trees_at_once(queue: Queue):
    """.addBulk: should process jobs"""
    jobs = queue.enqueue_many(
        [
            {"task": COMBINE, "args": ["p1"], "job_id": "p1", "depends_on": ["c1", "c2"]},
            {"task": VALUE, "args": ["c1", 1], "job_id": "c1"},
            {"task": VALUE, "args": ["c2", 2], "job_id": "c2"},
            {"task": COMBINE, "args": ["p2"], "job_id": "p2", "depends_on": ["c3"]},
            {"task": VALUE, "args": ["c3", 3], "job_id": "c3"},
        ]
    )
    assert [job.state for job in jobs] == ["waiting", "ready", "ready", "waiting", "ready"]
    drain()
    assert returned(queue, jobs[0]) == [1, 2]
    assert returned(queue, jobs[3]) == [3]


def test_cancelling_a_parent_leaves_its_children(queue: Queue):
    """.remove: should remove all children when removing a parent (ours does not)"""
    children = [queue.enqueue(MARK, [f"c{n}"]) for n in range(2)]
    parent = queue.enqueue(MARK, ["parent"], depends_on=children)
    assert queue.cancel(parent.id)
    assert queue.get_many([parent.id]) == [None]
    assert queue.counts()["waiting"] == 0
    drain()
    assert sorted(t.ran()) == ["c0", "c1"]


def test_cancelling_children_releases_a_finished_parent_once_all_are_gone(queue: Queue):
    """should only move parent to wait when all children have been removed"""
    children = [queue.enqueue(MARK, [f"c{n}"]) for n in range(2)]
    parent = queue.enqueue(COMBINE, ["parent"], depends_on=children, run_when="finished")
    assert queue.cancel(children[0].id)
    assert state(queue, parent) == "waiting"
    assert queue.cancel(children[1].id)
    assert state(queue, parent) == "ready"
    drain()
    assert returned(queue, parent) == [None, None]


@pytest.mark.parametrize("run_when", ["finished", "succeeded"])
def test_cancelling_the_deepest_child_of_a_chain(queue: Queue, run_when: str):
    """should remove from parent dependencies and move parent to wait: a finished chain is
    released level by level; a strict one ends dead at every level"""
    deepest = queue.enqueue(MARK, ["qux"])
    middle = queue.enqueue(MARK, ["baz"], depends_on=[deepest], run_when=run_when)
    top = queue.enqueue(MARK, ["bar"], depends_on=[middle], run_when=run_when)
    assert queue.cancel(deepest.id)
    if run_when == "finished":
        assert state(queue, middle) == "ready"
        assert state(queue, top) == "waiting"
        assert queue.cancel(middle.id)
        assert state(queue, top) == "ready"
    else:
        assert (state(queue, middle), state(queue, top)) == ("dead", "dead")
        assert queue.counts()["ready"] == 0


def test_retrying_a_dead_child_does_not_bring_back_its_dead_parent(queue: Queue):
    """.retry: retrying a failed child (a dependant decides once)"""
    child = queue.enqueue(FLAKY, ["child", 1, "fixed"])
    parent = queue.enqueue(MARK, ["parent"], depends_on=[child])
    drain()
    assert state(queue, parent) == "dead"
    assert queue.retry_dead([child.id]) == 1
    drain()
    assert returned(queue, child) == "fixed"
    assert state(queue, parent) == "dead"
    assert "parent" not in t.ran()


@pytest.mark.parametrize(
    "option", [{"unique_for": 60}, {"debounce": 5}, {"unique_by_args": True}], ids=str
)
def test_dedup_options_are_refused_with_dependencies(queue: Queue, option: dict):
    """when root parent job has deduplication option: should reject deduplication"""
    child = queue.enqueue(MARK, ["child"])
    with pytest.raises(TypeError, match=next(iter(option))):
        queue.enqueue(MARK, ["parent"], depends_on=[child], **option)
    with pytest.raises(TypeError, match=next(iter(option))):
        queue.enqueue_many([{"task": MARK, "args": ["p"], "depends_on": [child], **option}])
    assert queue.counts()["waiting"] == 0


def test_a_missing_dependency_writes_nothing_of_the_batch(queues: tuple[Queue, Queue]):
    """when add is called with a non-existing parent: throws, nothing added"""
    default, other = queues
    with pytest.raises(ValueError, match="'missing'"):
        default.enqueue_many(
            [
                {"task": MARK, "args": ["a"], "job_id": "a"},
                {"task": MARK, "args": ["b"], "job_id": "b", "depends_on": ["a", "missing"]},
            ]
        )
    with pytest.raises(ValueError, match="'gone' of queue 'other'"):
        default.enqueue(MARK, ["c"], depends_on=[Job("gone", "other", "")])
    assert nothing_written(default, other)
    assert default.get_many(["a", "b"]) == [None, None]
