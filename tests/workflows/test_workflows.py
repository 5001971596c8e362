"""Workflows (issue 28) through their API: ``step``, ``chain``, ``group`` with ``then`` and
``on_complete``, the ``Workflow`` handle (status, progress, results, cancel, join), steps
reading their dependencies' results, publishing progress and metadata, steps on two queues,
``transaction.atomic()``, EAGER queues, the bounds, and the clean-up of a workflow's record.
Run by a burst worker in this process, on fakeredis, a real server and Cluster."""

from __future__ import annotations

import time
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from django_redislock import get_redis
from django_redislock.exceptions import JobNotFound
from django_redislock.queue.worker.loop import Worker
from django_redislock.workflows import MAX_STEPS, Workflow, chain, group, step
from django_redislock.workflows import workflow as workflow_module
from tests import workflow_tasks as t

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queues(two_queues: Any) -> Any:
    get_redis().delete(t.RUNS, t.PROCEED)
    return two_queues


def drain(*names: str) -> None:
    Worker(list(names or ["default"]), burst=True).run()


def ran() -> list[str]:
    return [r["name"] for r in t.runs()]


def test_a_chain_runs_its_steps_in_order(queues: Any):
    wf = chain(step(t.step, "a"), step(t.step, "b"), step(t.step, "c")).enqueue()
    assert wf.status == "pending"
    assert wf.progress() == {"waiting": 2, "ready": 1, "running": 0, "done": 0, "dead": 0}
    drain()
    assert ran() == ["a", "b", "c"]
    assert wf.status == "succeeded"
    assert [r.return_value for r in wf.results()] == ["a", "b", "c"]
    assert wf.progress()["done"] == 3


def test_a_workflow_across_queues_is_open_once_enqueue_returns(queues: Any):
    """Written in two scripts, it waited behind a gate that the last one opened: its first
    steps are ready (here and there), the gate is no waiting job, and its record names it."""
    default, other = queues
    there = t.step.using(queue_name="other")
    wf = group([step(t.step, "here"), step(there, "there")]).then(step(t.gather, "g")).enqueue()
    assert wf.gate is not None
    assert Workflow.get(wf.id).gate == wf.gate
    assert wf.progress() == {"waiting": 1, "ready": 2, "running": 0, "done": 0, "dead": 0}
    assert default.counts()["waiting"] == 1  # the last step only
    assert other.counts()["waiting"] == 0
    assert default.get(wf.gate).state == "done"  # kept as a result, for late registrations
    drain("default", "other")
    drain("default", "other")
    assert wf.status == "succeeded"
    assert sorted(ran()) == ["g", "here", "there"]


def test_a_workflow_of_one_queue_and_one_script_has_no_gate(queues: Any):
    wf = chain(step(t.step, "a"), step(t.step, "b")).enqueue()
    assert wf.gate is None
    assert Workflow.get(wf.id).gate is None


def test_a_group_then_a_step_after_all_of_it(queues: Any):
    wf = group([step(t.step, n) for n in ("x", "y", "z")]).then(step(t.gather, "all")).enqueue()
    drain()
    assert ran()[-1] == "all"
    assert sorted(ran()[:3]) == ["x", "y", "z"]
    assert wf.results()[-1].return_value == ["x", "y", "z"]  # in depends_on order


def test_on_complete_runs_after_a_death_and_then_does_not(queues: Any):
    members = group([step(t.step, "ok"), step(t.step, "dies", fail=True)])
    reported = members.on_complete(step(t.gather, "report")).enqueue()
    drain()
    assert "report" in ran()
    assert reported.results()[-1].return_value == ["ok", None]  # the dead one returned none
    assert reported.status == "failed"
    t.get_redis().delete(t.RUNS)
    members = group([step(t.step, "ok2"), step(t.step, "dies2", fail=True)])
    chained = members.then(step(t.step, "never"), step(t.step, "never either")).enqueue()
    drain()
    assert "never" not in ran()
    results = chained.results()
    assert [r.status.name for r in results] == ["SUCCESSFUL", "FAILED", "FAILED", "FAILED"]
    assert "DependencyFailed" in results[2].errors[0].exception_class_path
    assert chained.status == "failed"


def test_nested_chains_and_groups(queues: Any):
    wf = chain(
        step(t.step, "first"),
        group([chain(step(t.step, "a1"), step(t.step, "a2")), step(t.step, "b")]),
        step(t.gather, "last"),
    ).enqueue()
    drain()
    order = ran()
    assert order[0] == "first"
    assert order[-1] == "last"
    assert order.index("a1") < order.index("a2")
    assert wf.results()[-1].return_value == ["a2", "b"]


def test_steps_on_two_queues(queues: Any):
    other = t.step.using(queue_name="other")
    wf = chain(step(t.step, "here"), step(other, "there"), step(t.gather, "back")).enqueue()
    assert [s[0] for s in wf.steps] == ["default", "other", "default"]
    for _ in range(3):
        drain("default")
        drain("other")
    assert ran() == ["here", "there", "back"]
    assert wf.results()[-1].return_value == ["there"]
    assert Workflow.get(wf.id).steps == wf.steps


def test_progress_and_metadata_are_published_and_kept(queues: Any):
    wf = chain(step(t.progressing, 3)).enqueue()
    drain()
    [result] = wf.results()
    assert result.progress == (3, 3)
    assert result.metadata == {"last": 3}
    fresh = t.progressing.get_result(result.id)
    assert fresh.progress == (3, 3)


def test_metadata_that_is_not_json_fails_the_attempt(queues: Any):
    result = t.bad_metadata.enqueue()
    drain()
    result.refresh()
    assert result.status.name == "FAILED"
    assert "TypeError" in result.errors[0].exception_class_path
    assert result.metadata == {}


def test_join_waits_for_every_step(queues: Any):
    import threading

    wf = chain(step(t.step, "a"), step(t.step, "b")).enqueue()
    with pytest.raises(TimeoutError):
        wf.join(timeout=0.1)
    threading.Thread(target=drain).start()
    assert wf.join(timeout=30) is wf
    assert wf.status == "succeeded"


def test_a_task_result_joins(queues: Any):
    import threading

    result = t.step.enqueue("alone")
    threading.Thread(target=drain).start()
    assert result.join(timeout=30).return_value == "alone"


def test_cancel_ends_the_steps_not_started(queues: Any):
    later = t.step.using(run_after=timezone.now() + timedelta(minutes=1))
    wf = chain(step(later, "a"), step(t.step, "b")).enqueue()
    assert wf.cancel() == 2
    drain()
    assert ran() == []
    assert wf.status == "failed"
    errors = [r.errors[-1].traceback for r in wf.results()]
    assert all("Cancelled" in e for e in errors)


def test_a_rolled_back_transaction_writes_nothing(queues: Any):
    default = queues[0]

    def rolled_back() -> Workflow:
        with transaction.atomic():
            wf = chain(step(t.step, "a"), step(t.step, "b")).enqueue()
            transaction.set_rollback(True)
        return wf

    wf = rolled_back()
    assert sum(default.counts().values()) == 0
    with pytest.raises(JobNotFound):
        Workflow.get(wf.id)
    with transaction.atomic():
        wf = chain(step(t.step, "a"), step(t.step, "b")).enqueue()
        assert sum(default.counts().values()) == 0
    assert default.counts()["waiting"] == 1
    assert Workflow.get(wf.id).steps == wf.steps


def test_an_eager_queue_runs_the_workflow_here(queues: Any, settings: Any):
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"EAGER": True}}}
    wf = chain(step(t.step, "a"), step(t.step, "dies", fail=True), step(t.step, "c")).enqueue()
    assert ran() == ["a", "dies"]
    assert wf.status == "failed"
    assert [r.status.name for r in wf.results()] == ["SUCCESSFUL", "FAILED", "FAILED"]
    gathered = group([step(t.step, "x"), step(t.step, "y")]).then(step(t.gather, "g")).enqueue()
    assert gathered.results()[-1].return_value == ["x", "y"]  # the results of steps run here


def elsewhere(n: int) -> int:
    return n


elsewhere.__module__ = "somewhere_else"  # a module that is in no installed app


def _outside_task() -> Any:
    """A task the worker would refuse: its module is in no installed app."""
    from django_redislock.tasks import task

    return task()(elsewhere)


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: chain(), ValueError, "at least one"),
        (lambda: group([]).then(step(t.step, "x")).enqueue(), None, None),
        (lambda: chain(step(t.step, "a"), t.step), TypeError, "step\\(task"),
        (lambda: step(print, 1), TypeError, "@task"),
        (lambda: group(step(t.step, "a")), TypeError, "list of steps"),
        (lambda: chain(step(t.unique_step, "u")).enqueue(), TypeError, "unique_for"),
        (lambda: chain(step(t.step, object())), TypeError, "JSON"),
        (lambda: chain(step(t.step, "a"), step(_outside_task(), 1)), Exception, "installed app"),
        (
            lambda: group([step(t.step, str(n)) for n in range(1001)]).then(step(t.step, "x")),
            ValueError,
            "at most 1000",
        ),
        (
            lambda: chain(*[step(t.step, str(n)) for n in range(MAX_STEPS + 1)]),
            ValueError,
            f"at most {MAX_STEPS} steps",
        ),
    ],
)
def test_what_is_refused_before_anything_is_written(
    queues: Any, build: Any, error: Any, match: Any
):
    if error is None:
        build()  # allowed
        return
    with pytest.raises(error, match=match):
        build().enqueue()
    assert sum(queues[0].counts().values()) == 0


def test_a_workflow_record_is_cleaned_up_once_it_ended_long_enough(
    queues: Any, monkeypatch: pytest.MonkeyPatch
):
    default = queues[0]
    wf = chain(step(t.step, "a"), step(t.step, "b")).enqueue()
    assert workflow_module.sweep(default) == 0  # not due yet
    drain()
    real = time.time()
    later = SimpleNamespace(time=lambda: real + default.result_ttl + 60, monotonic=time.monotonic)
    monkeypatch.setattr(workflow_module, "time", later)
    assert workflow_module.sweep(default) == 1
    assert default.client.zcard(default.keys.workflows) == 0
    with pytest.raises(JobNotFound):
        Workflow.get(wf.id)
