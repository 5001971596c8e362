"""Workflow tests ported from Celery's and Dramatiq's suites for composing tasks, rewritten
for our API (``step``, ``chain``, ``group``, ``.then``, ``.on_complete``, ``Workflow``).

Ported from:

- Celery, ``t/unit/tasks/test_canvas.py`` (``test_chain``, ``test_group``, ``test_chord``):
  chains of chains and chains spliced into chains, a chain of one step, a group taking a
  generator, a group of one, groups of groups, empty groups in a chain, arguments bound
  by keyword, a step's ``repr``, a chain stopped by a step that does not succeed, and the
  ``test_chord_size_*`` cases (here: how many results a chord's body is given).
- Celery, ``t/integration/test_canvas.py`` (``test_chain``, ``test_group``,
  ``test_chord``, ``test_signature_serialization``): the arithmetic of simple, complex,
  nested chains and chains of chords (8, 12, 178, 29520...), a chain inside a group
  given the value before the group, the order of group / step / group, nested groups,
  large groups and headers, parents seen by each step, chord order, chords with one and no
  member, nested chords, parallel chords, chords in chords with chains, priorities, errors
  propagating from and to chords (through a chain, a chain's tail, a group, a body of
  every kind), a failure in a nested chain member ending the chord rather than hanging, a
  callback after a group, the error-callback cases as ``on_complete``, a header member
  that recovers (there by a soft time limit, here by a retry), and rebuilding a nested
  workflow from its id. Also ``test_always_eager`` (an EAGER queue).
- Dramatiq, ``tests/test_composition.py``: pipelines piped and flattened, ``pipe_ignore``,
  pipeline results, results waited for with a timeout, completion counts of pipelines and
  groups (also finishing out of order, dramatiq#452), incomplete pipelines, groups run in
  parallel (and inner groups), a failed message stopping the pipeline, the delay of a
  pipeline's first and second message, and group completion callbacks (also after groups
  of pipelines).

Translated, not copied: Celery passes a task's return value to the next task as its first
argument (unless the signature is immutable) and Dramatiq as its last; a step here gets
only the arguments it was bound with and reads what the steps it waited for returned in
``context.dependency_results``. So ``add.s(8)`` becomes ``step(accumulate, 8)`` (its
numbers plus what came before), ``add.si(1, 0)`` becomes ``step(add, 1, 0)`` (what came
before is ignored), a chord ``chord(header, body)`` becomes ``group(header).then(body)``.
The timing assertions of both suites (sleeps, ``Condition.wait(…)`` then a count,
"elapsed <= 0.5 s") become conditions: one job run at a time (``max_jobs=1``), a
rendezvous that only succeeds when the members run at the same time, a delay of an hour.

What did not apply, and why:

- Signature immutability (``.si()``, ``immutable=True``, ``set_immutable``, mutable vs
  immutable errbacks) and Dramatiq's ``pipe_ignore`` as an option: a step never receives a
  result as an argument; whether it uses what came before is the task's choice (ported as
  two kinds of task; see ``tests/ported_workflow_tasks.py``).
- Operator sugar: ``|`` (and the upgrades it performs: group | task becomes a chord, chord
  | task nests, ``chain |=``), ``~sig`` (apply and get), ``sig()``, ``delay()``: we have
  ``chain()``, ``group()``, ``.then()``, ``.on_complete()`` and ``.enqueue()``. The
  arithmetic those tests check is ported; the type of the object built is not.
- Result backends and result objects: ``AsyncResult``/``GroupResult`` parents,
  ``as_tuple``/``result_from_tuple``, ``ResultSet``, ``GroupResult.save/restore``,
  ``get(propagate=...)``, chord counters (``set_chord_size``, ``chord_unlock``, the Redis
  ``.j`` keys), Dramatiq's ``Results`` middleware and ``get_result(block=...)``: a
  workflow's results are its steps' ``TaskResult``s (``Workflow.results()``).
- Callbacks and error callbacks: ``link``, ``link_error``, ``on_error``, old- and new-style
  errbacks, ``allow_error_cb_on_chord_header``, callbacks on group children, errback
  call counts: there is no per-task callback; ``.on_complete(...)`` (a step that runs once
  every step before it ended, however) is the one counterpart, and the group errback
  cases are ported as that.
- Task ids and ids options: ``task_id=``, ``freeze()``, a chain's id being its last task's,
  ``root_id``/``group_id``/``group_index``, options merging: ids are made at ``enqueue()``.
  ``parent_id`` is ported as the ids a step sees in ``dependency_results``.
- Serialization of canvases (``dict(sig)``, ``from_dict``, ``__reduce__``, subclasses of
  chain/group/chord): a canvas is not serialized, only the enqueued workflow's record
  (``Workflow.get``, ported).
- ``Task.replace`` (``add_replaced``, ``replace_with_chain``, ``second_order_replace``, the
  ``*_replaced_*`` tests): a step cannot replace itself with a canvas.
- Arguments given when the canvas is applied (``chain.apply(args=..., kwargs=...)``,
  ``group.delay(x=1)``, ``test_group_kwargs``, ``test_chord_in_chain_with_args``): a step
  is bound whole when built.
- ``chunks``, ``xmap``/``xstarmap``, ``group.skew`` (there is ``task.using(run_after=...)``
  per step), stamping (``StampingVisitor``), ``task_always_eager`` inside a running task,
  RabbitMQ message duplication, Redis pub/sub channel leaks, soft time limits.
- A chord header read lazily from a generator (``test_generator``): ``group()`` takes its
  members when built (a generator is ported as an argument).
- Celery's empty chain / empty group returning ``None`` / an empty result: ours refuse a
  workflow without steps (``ValueError``, ported).
- Dramatiq's ``GroupCallbacks`` middleware and rate-limiter backend that completion
  callbacks need (and the ``RuntimeError`` without them): nothing to set up here;
  ``pipe_target`` message options; ``pipeline.run(delay=...)`` (a delay on the whole
  pipeline, and "the bigger of the two delays"): there is no workflow-wide delay.

The port found that an empty group inside a chain cut the chain (what followed it waited
for nothing); ``test_an_empty_group_in_a_chain_keeps_the_order`` keeps it fixed.

Run by burst workers in this process, on fakeredis, a real server and a real Cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from django_redislock import get_redis
from django_redislock.queue.worker.loop import Worker
from django_redislock.workflows import Workflow, chain, group, step
from tests import ported_workflow_tasks as p

pytestmark = pytest.mark.django_db(transaction=True)

RENDEZVOUS = "test:ported-workflows:rendezvous"
DEPENDENCY_FAILED = "django_redislock.exceptions.DependencyFailed"
EXPECTED = "tests.ported_workflow_tasks.ExpectedError"


@pytest.fixture
def queues(two_queues: Any) -> Any:
    get_redis().delete(p.LOG, RENDEZVOUS)
    return two_queues


def drain(*names: str, **options: Any) -> None:
    Worker(list(names or ["default"]), burst=True, **options).run()


def run(canvas: Any) -> Workflow:
    """Enqueue ``canvas`` and run it to its end in this process (both queues)."""
    wf = canvas.enqueue()
    for _ in range(20):  # a round per queue crossing at most; a workflow here has few
        drain("default")
        drain("other")
        if wf.status in ("succeeded", "failed"):
            return wf
    raise AssertionError(f"the workflow did not end: {wf.progress()}")


def values(wf: Workflow) -> list[Any]:
    results = wf.results()
    assert [r.status.name for r in results] == ["SUCCESSFUL"] * len(results)
    return [r.return_value for r in results]


def last(wf: Workflow) -> Any:
    return values(wf)[-1]


def statuses(wf: Workflow) -> list[str]:
    return [r.status.name for r in wf.results()]


def error_of(result: Any) -> str:
    return result.errors[-1].exception_class_path


def ran(wf: Workflow) -> list[int]:
    """The indices of ``wf``'s steps in the order their runs started (a step run twice
    appears twice)."""
    index = {job_id: n for n, (_, job_id, _) in enumerate(wf.steps)}
    return [index[e["id"]] for e in p.entries() if e["id"] in index]


def assert_before(wf: Workflow, earlier: list[int], later: list[int]) -> None:
    """Every run of the steps of ``earlier`` started before any step of ``later`` did
    (and each of them ran)."""
    order = ran(wf)
    assert set(earlier) | set(later) <= set(order), order
    last_of_earlier = max(at for at, n in enumerate(order) if n in earlier)
    first_of_later = min(at for at, n in enumerate(order) if n in later)
    assert last_of_earlier < first_of_later, order


# --- chains (Celery test_chain, Dramatiq pipelines) ---------------------------------------


def test_simple_chain_passes_each_value_on(queues: Any):
    # Celery test_simple_chain: add.s(4, 4) | add.s(8) | add.s(16) == 32.
    wf = run(chain(step(p.add, 4, 4), step(p.accumulate, 8), step(p.accumulate, 16)))
    assert values(wf) == [8, 16, 32]
    assert ran(wf) == [0, 1, 2]
    assert wf.status == "succeeded"


def test_a_chain_of_one_step(queues: Any):
    # Celery test_single_chain / test_single_expresion: chain(add.s(3, 4)) is just the task.
    wf = run(chain(step(p.add, 3, 4)))
    assert len(wf.steps) == 1
    assert values(wf) == [7]


def test_a_chain_of_a_chain_of_one_step(queues: Any):
    # Celery test_chain_of_chain_with_a_single_task (unit and integration).
    wf = run(chain(chain(step(p.identity, 42))))
    assert [task for _, _, task in wf.steps] == ["tests.ported_workflow_tasks.identity"]
    assert values(wf) == [42]


def test_chains_are_spliced_into_chains(queues: Any):
    # Celery test_splices_chains, Dramatiq test_pipelines_flatten_child_pipelines: the
    # steps of an inner chain take their place in the outer one, in order, args kept.
    inner = chain(step(p.accumulate, 6), step(p.accumulate, 7), step(p.accumulate, 8))
    wf = run(chain(step(p.add, 5, 5), inner))
    assert len(wf.steps) == 4
    assert ran(wf) == [0, 1, 2, 3]
    assert values(wf) == [10, 16, 23, 31]


def test_pipeline_results_can_be_retrieved(queues: Any):
    # Dramatiq test_pipeline_results_can_be_retrieved and test_messages_can_be_piped:
    # add(1, 2) | (add(3) | add(4)) -> the last is 10, each one's result kept.
    wf = run(chain(step(p.add, 1, 2), chain(step(p.accumulate, 3), step(p.accumulate, 4))))
    assert last(wf) == 10
    assert values(wf) == [3, 6, 10]
    again = Workflow.get(wf.id)
    assert [r.return_value for r in again.results()] == [3, 6, 10]


def test_a_step_that_ignores_what_came_before(queues: Any):
    # Dramatiq test_pipe_ignore_applies_to_receiving_message: the middle step ignores the
    # first's result; the third gets the second's: [[1], [2], [3, [2]]].
    wf = run(chain(step(p.return_args, 1), step(p.identity, [2]), step(p.return_args, 3)))
    assert values(wf) == [[1], [2], [3, [2]]]


def test_a_chain_built_from_a_generator(queues: Any):
    # Celery test_accepts_generator_argument.
    wf = run(chain(step(p.add, 0), *(step(p.accumulate, i) for i in range(1, 10))))
    assert len(wf.steps) == 10
    assert last(wf) == sum(range(10))
    assert ran(wf) == list(range(10))


def test_complex_chain(queues: Any):
    # Celery test_complex_chain: add(2, 2) | (add(4) | add(8) | add(16) | add(32)) |
    # group(add(i) for i in range(4)) -> [64, 65, 66, 67].
    middle = chain(*(step(p.accumulate, n) for n in (4, 8, 16, 32)))
    members = group(step(p.accumulate, i) for i in range(4))
    wf = run(chain(step(p.add, 2, 2), middle, members))
    assert values(wf)[-4:] == [64, 65, 66, 67]
    assert_before(wf, [0, 1, 2, 3, 4], [5, 6, 7, 8])


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        # Celery test_chain_of_task_a_group_and_a_chord
        (
            lambda: chain(
                step(p.add, 1, 0),
                group([step(p.accumulate, 1), step(p.accumulate, 1)]),
                group([step(p.accumulate), step(p.accumulate)]),
                step(p.accumulate),
            ),
            8,
        ),
        # Celery test_chain_of_chords_as_groups_chained_to_a_task_with_two_tasks, and
        # test_chain_of_chords_with_two_tasks (the last chord spelled as group.then)
        (
            lambda: chain(
                step(p.add, 1, 0),
                group([step(p.accumulate, 1), step(p.accumulate, 1)]),
                step(p.accumulate),
                step(p.accumulate, 1),
                group([step(p.accumulate, 1), step(p.accumulate, 1)]).then(step(p.accumulate)),
            ),
            12,
        ),
        # Celery test_chain_of_a_chord_and_a_group_with_two_tasks
        (
            lambda: chain(
                step(p.add, 1, 0),
                group([step(p.accumulate, 1), step(p.accumulate, 1)]),
                step(p.accumulate),
                step(p.accumulate, 1),
                group([step(p.accumulate, 1), step(p.accumulate, 1)]),
            ),
            [6, 6],
        ),
        # Celery test_chain_of_a_chord_and_a_task_and_a_group, ..._two_tasks_...,
        # ..._three_tasks_...: [6, 6], [7, 7], [8, 8]
        *(
            (
                lambda n=n: chain(
                    group([step(p.add, 1, 1), step(p.add, 1, 1)]),
                    step(p.accumulate),
                    *(step(p.accumulate, 1) for _ in range(n)),
                    group([step(p.accumulate, 1), step(p.accumulate, 1)]),
                ),
                [5 + n, 5 + n],
            )
            for n in (1, 2, 3)
        ),
    ],
    ids=["task-group-chord", "chords-two-tasks", "chord-group", "+1", "+2", "+3"],
)
def test_chains_of_chords(queues: Any, build: Callable[[], Any], expected: Any):
    wf = run(build())
    got = values(wf)
    if isinstance(expected, list):
        assert got[-len(expected) :] == expected
    else:
        assert got[-1] == expected


def test_chain_of_explicit_chords(queues: Any):
    # Celery test_chain_of_explicit_chords: == 178.
    def chord(n: int | None) -> Any:
        members = [step(p.add, 1, 0)] * 2 if n is None else [step(p.accumulate, n)] * 2
        return group(members).then(step(p.accumulate))

    first = chain(chord(None), chord(1), chord(0))
    second = chain(chord(10), chord(0), chord(1))
    wf = run(chain(first, second))
    assert last(wf) == 178


def test_chain_of_nine_chords(queues: Any):
    # Celery test_chain_of_nine_chords: == 29520.
    chords = [group([step(p.add, 1, 0)] * 3).then(step(p.accumulate))]
    chords += [group([step(p.accumulate, 1)] * 3).then(step(p.accumulate)) for _ in range(7)]
    chords += [group([step(p.accumulate, 0)] * 3).then(step(p.accumulate))]
    wf = run(chain(*chords))
    assert len(wf.steps) == 9 * 4
    assert last(wf) == 29520


def test_group_in_center_of_chain(queues: Any):
    # Celery test_group_in_center_of_chain (integration): == 60.
    wf = run(
        chain(
            step(p.add, 0, 1),
            group([step(p.accumulate), step(p.accumulate)]),
            step(p.accumulate),
            group([step(p.accumulate, 8), step(p.accumulate, 16)]),
            chain(step(p.accumulate), step(p.accumulate, 32)),
        )
    )
    assert last(wf) == 60


def test_nested_chain_group_lone_mid_and_last(queues: Any):
    # Celery test_nested_chain_group_lone / _mid / _last.
    lone = run(chain(group([step(p.identity, 42), step(p.identity, 42)])))
    assert values(lone) == [42, 42]
    mid = run(
        chain(
            step(p.identity, 42),
            group([step(p.passthrough), step(p.passthrough)]),
            step(p.collect),
        )
    )
    assert last(mid) == [42, 42]
    at_end = run(chain(step(p.identity, 42), group([step(p.passthrough), step(p.passthrough)])))
    assert values(at_end) == [42, 42, 42]


def test_chain_inside_group_receives_arguments(queues: Any):
    # Celery test_chain_inside_group_receives_arguments: add(5, 6) |
    # group(add(1) | add(2), add(3)) -> [14, 14].
    wf = run(
        chain(
            step(p.add, 5, 6),
            group([chain(step(p.accumulate, 1), step(p.accumulate, 2)), step(p.accumulate, 3)]),
        )
    )
    assert values(wf) == [11, 12, 14, 14]
    assert_before(wf, [1], [2])


def test_group_results_in_chain(queues: Any):
    # Celery test_group_results_in_chain (an xfail there): group(add(1, 2) |
    # group(add(1), add(2))) -> [4, 5].
    wf = run(
        group([chain(step(p.add, 1, 2), group([step(p.accumulate, 1), step(p.accumulate, 2)]))])
    )
    assert values(wf)[1:] == [4, 5]


def test_group_chord_group_chain_runs_in_that_order(queues: Any):
    # Celery test_group_chord_group_chain: three befores, then connect, then two afters.
    before = group([step(p.echo, f"before {i}") for i in range(3)])
    after = group([step(p.echo, f"after {i}") for i in range(2)])
    run(chain(before, step(p.echo, "connect"), after))
    words = [e["task"] for e in p.entries()]
    assert set(words[:3]) == {"echo:before 0", "echo:before 1", "echo:before 2"}
    assert words[3] == "echo:connect"
    assert set(words[4:]) == {"echo:after 0", "echo:after 1"}
    assert len(words) == 6


def test_group_result_not_has_cache(queues: Any):
    # Celery test_group_result_not_has_cache: group(t1, t2, chain(5, group(3, 4))).
    inner = chain(step(p.identity, 5), group([step(p.identity, 3), step(p.identity, 4)]))
    wf = run(group([step(p.identity, 1), step(p.identity, 2), inner]))
    assert values(wf) == [1, 2, 5, 3, 4]
    assert_before(wf, [2], [3, 4])


def test_upgrade_to_chord_inside_chains_runs_each_step_once(queues: Any):
    # Celery test_upgrade_to_chord_inside_chains: 'b' is echoed exactly once.
    two_groups = chain(
        group([step(p.echo, "a"), step(p.echo, "a")]),
        group([step(p.echo, "a"), step(p.echo, "a")]),
    )
    wf = run(chain(two_groups, chain(step(p.echo, "a"), step(p.echo, "b"))))
    words = [e["task"] for e in p.entries()]
    assert words.count("echo:b") == 1
    assert words.count("echo:a") == 5
    assert_before(wf, [0, 1], [2, 3])
    assert_before(wf, [2, 3], [4])


@pytest.mark.parametrize("stopper", ["raises", "raises after a success"])
def test_a_step_that_fails_stops_the_chain(queues: Any, stopper: str):
    # Celery test_apply_stops_chain_when_task_raises_ignore / _reject, Dramatiq
    # test_pipeline_does_not_continue_to_next_actor_when_message_is_marked_as_failed.
    head = [step(p.fail)] if stopper == "raises" else [step(p.add, 1), step(p.fail)]
    wf = run(chain(*head, step(p.echo, "should never run"), step(p.echo, "nor this")))
    assert "echo:should never run" not in [e["task"] for e in p.entries()]
    assert "echo:nor this" not in [e["task"] for e in p.entries()]
    results = wf.results()
    assert [error_of(r) for r in results[-2:]] == [DEPENDENCY_FAILED] * 2
    assert error_of(results[-3]) == EXPECTED
    assert wf.status == "failed"


def test_chain_on_error(queues: Any):
    # Celery test_chain_on_error: chain(add(1, 2), fail(), add(3, 4)): the failure is the
    # failing step's, the step after it never ran, the first kept its value.
    wf = run(chain(step(p.add, 1, 2), step(p.fail), step(p.add, 3, 4)))
    first, failed, after = wf.results()
    assert first.return_value == 3
    assert error_of(failed) == EXPECTED
    assert "failed on purpose" in failed.errors[-1].traceback
    assert error_of(after) == DEPENDENCY_FAILED
    assert [e["task"] for e in p.entries()] == ["add", "fail"]


def test_a_retried_step_lets_the_chain_go_on(queues: Any):
    # Celery test_chord_soft_timeout_recuperation (a header task that recovers from its
    # trouble still gives the chord its result): here the trouble is a failed attempt.
    flaky = p.fails_first_attempt.using(max_attempts=2, retry_backoff=0)
    wf = run(group([step(p.add, 1, 2), step(flaky, 0)]).then(step(p.accumulate)))
    assert last(wf) == 3
    attempts = [e["attempt"] for e in p.entries() if e["task"] == "fails_first_attempt"]
    assert attempts == [1, 2]
    assert_before(wf, [0, 1], [2])


# --- groups (Celery test_group, Dramatiq groups) ------------------------------------------


def test_group_lone_and_group_of_one(queues: Any):
    # Celery test_group_lone and test_single_task (unit).
    assert values(run(group([step(p.identity, 42), step(p.identity, 42)]))) == [42, 42]
    one = run(group([step(p.add, 1, 1)]))
    assert len(one.steps) == 1
    assert values(one) == [2]


def test_nested_groups_are_unrolled_in_order(queues: Any):
    # Celery test_nested_group, test_nested_group_group, test_group_in_group and
    # test_group_with_group_argument (unit).
    wf = run(
        group(
            [
                step(p.add, 1, 10),
                group([step(p.add, 1, 100), group([step(p.add, 1, 1000), step(p.add, 1, 2000)])]),
            ]
        )
    )
    assert values(wf) == [11, 101, 1001, 2001]
    unrolled = run(group([group([step(p.identity, 42), step(p.identity, 42)])]))
    assert values(unrolled) == [42, 42]


def test_a_group_from_a_generator_and_one_step_used_many_times(queues: Any):
    # Celery test_apply_from_generator (unit): 42 members from a generator of one
    # signature; each is its own job.
    same = step(p.identity, 0)
    wf = run(group(same for _ in range(42)))
    assert len({job_id for _, job_id, _ in wf.steps}) == 42
    assert values(wf) == [0] * 42
    assert sorted(ran(wf)) == list(range(42))


def test_arguments_bound_by_keyword(queues: Any):
    # Celery test_kwargs_direct / test_kwargs_apply (unit): add(x=1, y=1) in a group.
    wf = run(group([step(p.add, x=1, y=1), step(p.add, 1, y=1)]))
    assert values(wf) == [2, 2]


def test_a_steps_repr_names_its_task_and_arguments(queues: Any):
    # Celery test_repr (chain and group, unit).
    shown = repr(step(p.add, 2, 2, y=3))
    assert "tests.ported_workflow_tasks.add" in shown
    assert "(2, 2)" in shown
    assert "'y': 3" in shown


def test_empty_groups_are_skipped_in_chain(queues: Any):
    # Celery test_empty_groups_are_skipped_in_chain /
    # test_empty_group_body_is_skipped_when_chain_upgrades_to_chord.
    wf = run(chain(group([step(p.add, 2, 2), step(p.add, 4, 4)]), group([]), group([])))
    assert values(wf) == [4, 8]
    tail = run(chain(step(p.add, 1, 1), group([step(p.add, 2, 2), step(p.add, 3, 3)]), group([])))
    assert values(tail) == [2, 4, 6]


@pytest.mark.parametrize("shape", ["mid-chain", "tail of a chord header member"])
def test_an_empty_group_in_a_chain_keeps_the_order(queues: Any, shape: str):
    # Celery test_known_empty_generator_backed_group_is_skipped_in_chain and
    # test_apply_contains_chords_containing_chain_with_empty_tail (unit): an empty group
    # is skipped, what follows it still waits for what comes before it.
    if shape == "mid-chain":
        canvas = chain(step(p.fail), group([]), step(p.echo, "after"))
    else:
        canvas = group([chain(step(p.fail), group([]))]).then(step(p.echo, "after"))
    wf = run(canvas)
    assert "echo:after" not in [e["task"] for e in p.entries()]
    assert error_of(wf.results()[-1]) == DEPENDENCY_FAILED


def test_an_empty_group_alone_is_refused(queues: Any):
    # Celery test_apply_empty / test_call_empty_group / test_empty_group_result give an
    # empty result; a workflow without steps is refused, nothing written.
    for canvas in (group([]), chain(group([])), group([group([])])):
        with pytest.raises(ValueError, match="at least one step"):
            canvas.enqueue()
    assert sum(queues[0].counts().values()) == 0


def test_large_group(queues: Any):
    # Celery test_large_group: 1000 members, results in group order.
    wf = run(group(step(p.identity, i) for i in range(1000)))
    assert values(wf) == list(range(1000))


def test_a_group_member_failing_ends_the_group_failed(queues: Any):
    # Celery test_ready_with_exception, test_result_set_error: the group ends (it does not
    # hang), with the member that raised failed and the other successful.
    wf = run(group([step(p.add, 1, 2), step(p.fail)]))
    ok, failed = wf.results()
    assert ok.return_value == 3
    assert error_of(failed) == EXPECTED
    assert wf.status == "failed"
    assert wf.join(timeout=5) is wf


def test_parent_ids(queues: Any):
    # Celery test_group.test_parent_ids: ids(1) | ids(2) | group(ids(i) for i in 2..49):
    # each member's parent is ids(2), whose parent is ids(1), which has none.
    wf = run(
        chain(
            step(p.parents, 1), step(p.parents, 2), group(step(p.parents, i) for i in range(2, 50))
        )
    )
    ids = [job_id for _, job_id, _ in wf.steps]
    got = values(wf)
    assert got[0] == [1, []]
    assert got[1] == [2, [ids[0]]]
    assert got[2:] == [[i, [ids[1]]] for i in range(2, 50)]


def test_groups_execute_members_in_parallel(queues: Any):
    # Dramatiq test_groups_execute_jobs_in_parallel / _inner_groups: instead of timing,
    # the members meet: each succeeds only if all of them run at the same time.
    wf = group([group([step(p.rendezvous, RENDEZVOUS, 6)] * 2) for _ in range(3)]).enqueue()
    drain(concurrency=6)
    assert wf.status == "succeeded"
    assert sorted(values(wf)) == [1, 2, 3, 4, 5, 6]


def test_groups_and_pipelines_can_be_incomplete_and_time_out(queues: Any):
    # Dramatiq test_groups_can_time_out, test_pipelines_can_be_incomplete,
    # test_pipeline_results_respect_timeouts: no worker yet.
    members = group([step(p.add, 1), step(p.add, 2)]).enqueue()
    pipe = chain(step(p.add, 1), step(p.accumulate, 1)).enqueue()
    for wf in (members, pipe):
        with pytest.raises(TimeoutError):
            wf.join(timeout=0.05)
        assert wf.status == "pending"
        assert wf.progress()["done"] == 0
    drain()
    assert members.join(timeout=5).status == "succeeded"
    assert values(pipe.join(timeout=5)) == [1, 2]


def test_pipelines_expose_completion_stats(queues: Any):
    # Dramatiq test_pipelines_expose_completion_stats: one job at a time, the count of
    # done steps grows by one each time; then the pipeline is complete.
    wf = chain(step(p.add, 1), step(p.accumulate), step(p.accumulate)).enqueue()
    for done in (1, 2, 3):
        assert wf.status == ("pending" if done == 1 else "running")
        drain(max_jobs=1)
        assert wf.progress()["done"] == done
    assert wf.status == "succeeded"


def test_groups_completion_count_when_members_finish_out_of_order(queues: Any):
    # Dramatiq test_groups_expose_completion_stats and
    # test_groups_completion_count_works_for_tasks_finishing_out_of_order (#452): the
    # members run in the reverse of group order (priorities), the count still grows by
    # one, and the step after them still gets their results in group order.
    low, high = p.echo.using(priority=-10), p.echo.using(priority=10)
    wf = group([step(low, "a"), step(p.echo, "b"), step(high, "c")]).then(step(p.collect)).enqueue()
    for done in (1, 2, 3):
        drain(max_jobs=1)
        assert wf.progress()["done"] == done
    assert ran(wf) == [2, 1, 0]
    assert wf.progress()["ready"] == 1
    drain()
    assert last(wf) == ["a", "b", "c"]


# --- chords: group(...).then(...) (Celery test_chord, Dramatiq completion callbacks) ------


def test_simple_chord(queues: Any):
    # Celery test_simple_chord_with_a_delay_in_group_save: chord([add(1, 1)] * 2, tsum).
    wf = run(group([step(p.add, 1, 1), step(p.add, 1, 1)]).then(step(p.accumulate)))
    assert last(wf) == 4
    assert_before(wf, [0, 1], [2])


def test_chord_order(queues: Any):
    # Celery test_chord_order: the body gets the header's results in header order, here
    # even with the members on two queues (across slots on Cluster).
    other = p.identity.using(queue_name="other")
    members = [step(other if i % 2 else p.identity, i) for i in range(10)]
    wf = run(group(members).then(step(p.collect)))
    assert [queue for queue, _, _ in wf.steps[:2]] == ["default", "other"]
    assert last(wf) == list(range(10))


def test_group_chain_into_a_body(queues: Any):
    # Celery test_group_chain: add(2, 2) | group(add(i) for i in range(4)) | add_to_all(8).
    wf = run(
        chain(
            step(p.add, 2, 2), group(step(p.accumulate, i) for i in range(4)), step(p.add_to_all, 8)
        )
    )
    assert last(wf) == [12, 13, 14, 15]


def test_nested_group_chain_then_a_step(queues: Any):
    # Celery test_nested_group_chain: the last step waits for every end of the middle.
    wf = run(
        chain(
            step(p.add, 1, 0),
            group(
                [
                    step(p.add, 1, 100),
                    chain(step(p.add, 1, 200), group([step(p.add, 1, 1000), step(p.add, 1, 2000)])),
                ]
            ),
            step(p.add, 1, 10),
        )
    )
    assert last(wf) == 11
    assert_before(wf, [0], [1, 2])
    assert_before(wf, [1, 3, 4], [5])


def test_single_member_header(queues: Any):
    # Celery test_single_task_header: chord([add(2, 5)], add_to_all(9)) -> [16].
    wf = run(group([step(p.add, 2, 5)]).then(step(p.add_to_all, 9)))
    assert last(wf) == [16]


def test_empty_header_chord(queues: Any):
    # Celery test_empty_header_chord: the body runs, given nothing.
    wf = run(group([]).then(step(p.add_to_all, 9)))
    assert len(wf.steps) == 1
    assert values(wf) == [[]]


def test_nested_chord(queues: Any):
    # Celery test_nested_chord (c2 and the deep one).
    c2 = group(
        [
            group([step(p.add, 1, 2), step(p.add, 3, 4)]).then(step(p.extend, 5)),
            group([step(p.add, 6, 7)]).then(step(p.extend, 10)),
        ]
    ).then(step(p.extend_each, "A"))
    assert last(run(c2)) == [[3, 7, 5, "A"], [13, 10, "A"]]
    deep = group(
        [
            group(
                [
                    group([group([step(p.add, 1, 2)]).then(step(p.extend, 3))]).then(
                        step(p.extend, 4)
                    )
                ]
            ).then(step(p.extend, 5))
        ]
    ).then(step(p.extend, 6))
    assert last(run(deep)) == [[[[3, 3], 4], 5], 6]


def test_parallel_chords(queues: Any):
    # Celery test_parallel_chords: group(chord, chord) -> [10, 10].
    def chord() -> Any:
        return group([step(p.add, 1, 2), step(p.add, 3, 4)]).then(step(p.accumulate))

    wf = run(group([chord(), chord()]))
    assert [values(wf)[n] for n in (2, 5)] == [10, 10]


def test_chord_in_chords_with_chains(queues: Any):
    # Celery test_chord_in_chords_with_chains: == 4, the outer body last.
    def member() -> Any:
        inner = group([step(p.add, 1, 2), step(p.add, 1, 2)]).then(step(p.add, 1, 2))
        return chain(step(p.add, 1, 2), inner)

    wf = run(group([member(), member()]).then(step(p.add, 2, 2)))
    assert last(wf) == 4
    assert ran(wf)[-1] == len(wf.steps) - 1
    assert_before(wf, [0], [1, 2])
    assert_before(wf, [1, 2], [3])


def test_chain_chord_chain_chord(queues: Any):
    # Celery test_chain_chord_chain_chord (#2573): == 7.
    inner = chain(
        step(p.identity, 3),
        group([step(p.identity, 4), step(p.identity, 5)]).then(step(p.identity, 6)),
    )
    wf = run(
        chain(
            step(p.identity, 1),
            group([step(p.identity, 2), inner]).then(step(p.identity, 7)),
        )
    )
    assert last(wf) == 7
    # steps: 1, 2, 3, 4, 5, 6, 7
    assert_before(wf, [0], [1, 2])
    assert_before(wf, [2], [3, 4])
    assert_before(wf, [3, 4], [5])
    assert_before(wf, [1, 5], [6])


def test_large_header(queues: Any):
    # Celery test_large_header (== 499500) and test_chain_to_a_chord_with_large_header
    # (== 1000): a group of 1000 members followed by a step, the most allowed.
    wf = run(group(step(p.identity, i) for i in range(1000)).then(step(p.accumulate)))
    assert last(wf) == 499500
    chained = run(
        chain(
            step(p.identity, 1), group(step(p.passthrough) for _ in range(1000)), step(p.accumulate)
        )
    )
    assert last(chained) == 1000


def test_chord_body_sees_its_parents(queues: Any):
    # Celery test_chord.test_parent_ids: the body's parents are the header's members, in
    # order; the step after the body has the body as its parent.
    header = group(step(p.parents, i) for i in range(3, 10))
    wf = run(
        chain(
            step(p.parents, 1),
            step(p.parents, 2),
            header.then(chain(step(p.parents, 50), step(p.parents, 51))),
        )
    )
    ids = [job_id for _, job_id, _ in wf.steps]
    got = values(wf)
    assert got[-2] == [50, ids[2:-2]]
    assert got[-1] == [51, [ids[-2]]]
    assert all(member == [i, [ids[1]]] for i, member in zip(range(3, 10), got[2:-2], strict=True))


def test_priority(queues: Any):
    # Celery test_priority and test_priority_chain: each step runs with its own priority.
    one = run(chain(step(p.return_priority.using(priority=3))))
    assert values(one) == ["Priority: 3"]
    two = run(
        chain(step(p.return_priority.using(priority=3)), step(p.return_priority.using(priority=5)))
    )
    assert values(two) == ["Priority: 3", "Priority: 5"]


def test_nested_chord_group(queues: Any):
    # Celery test_nested_chord_group: a group inside a chord header is unrolled.
    wf = run(group([group([step(p.identity, 42), step(p.identity, 42)])]).then(step(p.collect)))
    assert last(wf) == [42, 42]


def test_nested_chord_group_chain_group_tail(queues: Any):
    # Celery test_nested_chord_group_chain_group_tail gives [[42, 42]] (the chain keeps the
    # inner group's results together); a body here gets the last steps' results flat.
    header = group([chain(step(p.identity, 42), group([step(p.passthrough), step(p.passthrough)]))])
    wf = run(header.then(step(p.collect)))
    assert last(wf) == [42, 42]


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("one step", [42]),
        ("a chain of 42", [41]),
        ("a group of 42", list(range(42))),
        ("a chord", [31337]),
        ("a mix", [42, 41, *range(42), 1337]),
    ],
)
def test_nested_group_chord_counting(queues: Any, header: str, expected: list[int]):
    # Celery test_nested_group_chord_counting_simple / _chain / _group / _chord / _mixed:
    # group((chord(header, identity.s()),)) gets the header's last results.
    headers = {
        "one step": lambda: step(p.identity, 42),
        "a chain of 42": lambda: chain(*(step(p.identity, i) for i in range(42))),
        "a group of 42": lambda: group(step(p.identity, i) for i in range(42)),
        "a chord": lambda: group([step(p.identity, 1337)] * 42).then(step(p.identity, 31337)),
    }
    headers["a mix"] = lambda: group(
        [
            headers["one step"](),
            headers["a chain of 42"](),
            headers["a group of 42"](),
            group([step(p.identity, 42)] * 42).then(step(p.identity, 1337)),
        ]
    )
    wf = run(group([group([headers[header]()]).then(step(p.collect))]))
    assert last(wf) == expected


@pytest.mark.parametrize(
    ("member", "repeat", "size"),
    [
        # Celery test_chord_size_*: how many results the body is given.
        (lambda: step(p.identity, 0), 1, 1),
        (lambda: step(p.identity, 0), 42, 42),
        (lambda: chain(step(p.identity, 0)), 1, 1),
        (lambda: chain(*[step(p.identity, 0)] * 42), 1, 1),
        (lambda: chain(chain(*[step(p.identity, 0)] * 42)), 1, 1),
        (lambda: group([step(p.identity, 0)]).then(step(p.identity, 0)), 42, 42),
        (lambda: group([step(p.identity, 0)] * 4).then(step(p.identity, 0)), 2, 2),
        (
            lambda: chain(step(p.identity, 0), group([step(p.identity, 0)]), step(p.identity, 0)),
            42,
            42,
        ),
        (
            lambda: chain(
                step(p.identity, 0), group([step(p.identity, 0)] * 4), step(p.identity, 0)
            ),
            2,
            2,
        ),
        (lambda: chain(step(p.identity, 0), group([step(p.identity, 0)])), 42, 42),
        (lambda: chain(step(p.identity, 0), group([step(p.identity, 0)] * 4)), 2, 8),
    ],
    ids=[
        "simple",
        "group-many",
        "chain-single",
        "chain-many",
        "chain-chain-many",
        "group-chain-group-head-single",
        "group-chain-group-head-many",
        "group-chain-group-mid-single",
        "group-chain-group-mid-many",
        "group-chain-group-tail-single",
        "group-chain-group-tail-many",
    ],
)
def test_chord_size(queues: Any, member: Callable[[], Any], repeat: int, size: int):
    wf = run(group([member() for _ in range(repeat)]).then(step(p.collect)))
    assert last(wf) == [0] * size


def test_callback_called_by_group(queues: Any):
    # Celery test_callback_called_by_group, Dramatiq test_groups_can_have_completion_callbacks:
    # the callback runs once, after every member, with its own arguments.
    wf = run(group([step(p.identity, 42), step(p.identity, 1337)]).then(step(p.echo, "done")))
    assert values(wf) == [42, 1337, "done"]
    assert [e["task"] for e in p.entries()].count("echo:done") == 1
    assert_before(wf, [0, 1], [2])


def test_groups_of_pipelines_can_have_completion_callbacks(queues: Any):
    # Dramatiq test_groups_of_pipelines_can_have_completion_callbacks.
    members = group([chain(step(p.add, 1), step(p.accumulate)), step(p.add, 1)])
    wf = run(members.then(step(p.identity, 42)))
    assert values(wf) == [1, 1, 1, 42]
    assert_before(wf, [0, 1, 2], [3])
    assert len(ran(wf)) == 4


# --- errors and chords --------------------------------------------------------------------


@pytest.mark.parametrize(
    "where",
    ["before the group", "a member of the group"],
)
def test_error_propagates_from_chord(queues: Any, where: str):
    # Celery test_error_propagates_from_chord (an xfail there on Redis) and
    # test_error_propagates_from_chord2.
    if where == "before the group":
        wf = run(chain(step(p.add, 1, 1), step(p.fail), group([step(p.accumulate, 1)] * 2)))
        assert [error_of(r) for r in wf.results()[2:]] == [DEPENDENCY_FAILED] * 2
    else:
        wf = run(
            chain(
                step(p.add, 1, 1),
                step(p.accumulate, 1),
                group([step(p.accumulate, 1), step(p.fail)]),
            )
        )
        assert wf.results()[2].return_value == 4
        assert error_of(wf.results()[3]) == EXPECTED
    assert wf.status == "failed"


@pytest.mark.parametrize(
    "header",
    ["simple", "chain", "chain tail", "group"],
)
def test_error_propagates_to_chord(queues: Any, header: str):
    # Celery test_error_propagates_to_chord_from_simple / _chain / _chain_tail / _group:
    # the body never runs; it ends dead with DependencyFailed.
    headers = {
        "simple": lambda: step(p.fail),
        "chain": lambda: chain(step(p.identity, 42), step(p.fail), step(p.identity, 42)),
        "chain tail": lambda: chain(step(p.identity, 42), step(p.fail)),
        "group": lambda: group([step(p.identity, 42), step(p.fail)]),
    }
    wf = run(group([headers[header]()]).then(step(p.echo, "body")))
    assert "echo:body" not in [e["task"] for e in p.entries()]
    assert error_of(wf.results()[-1]) == DEPENDENCY_FAILED
    assert wf.status == "failed"


@pytest.mark.parametrize("body", ["single task", "chain", "group", "chord"])
def test_chord_error_propagation_with_different_body_types(queues: Any, body: str):
    # Celery test_chord_error_propagation_with_different_body_types (#9773): every step of
    # the body ends dead, none runs, the workflow ends failed.
    bodies = {
        "single task": lambda: step(p.echo, "body"),
        "chain": lambda: chain(step(p.echo, "body"), step(p.echo, "body")),
        "group": lambda: group([step(p.echo, "body"), step(p.echo, "body")]),
        "chord": lambda: group([step(p.echo, "body")] * 2).then(step(p.echo, "body")),
    }
    wf = run(chain(group([step(p.add, 15, 7), step(p.fail)]), bodies[body]()))
    assert "echo:body" not in [e["task"] for e in p.entries()]
    results = wf.results()
    assert results[0].return_value == 22
    assert error_of(results[1]) == EXPECTED
    assert [error_of(r) for r in results[2:]] == [DEPENDENCY_FAILED] * (len(results) - 2)
    assert wf.status == "failed"


def test_chord_error_in_nested_chain_does_not_crash(queues: Any):
    # Celery test_chord_error_in_nested_chain_does_not_crash (#4834).
    wf = run(
        chain(
            chain(group([step(p.add, 1, 1), step(p.fail)]), step(p.passthrough)),
            step(p.passthrough),
        )
    )
    assert statuses(wf) == ["SUCCESSFUL", "FAILED", "FAILED", "FAILED"]
    assert [error_of(r) for r in wf.results()[2:]] == [DEPENDENCY_FAILED] * 2


def test_failed_task_in_nested_chain_member_ends_the_chord(queues: Any):
    # Celery test_chord_unlock_with_failed_task_in_nested_chain_member (#9674): the chord
    # ends failed (it does not wait forever); only the first member ran to success.
    member = chain(
        step(p.fail), group([step(p.identity, 2), step(p.identity, 3)]), step(p.identity, 4)
    )
    wf = run(chain(group([step(p.identity, 1), member]), step(p.collect)))
    assert wf.join(timeout=5).status == "failed"
    assert statuses(wf) == ["SUCCESSFUL", "FAILED", "FAILED", "FAILED", "FAILED", "FAILED"]
    assert sorted(e["task"] for e in p.entries()) == ["fail", "identity"]


def test_chord_on_error_keeps_the_members_that_succeeded(queues: Any):
    # Celery test_chord_on_error: the body is not called; the header's successful results
    # ([3, 7]) are kept, with the one failure.
    wf = run(
        group([step(p.add, 1, 2), step(p.add, 3, 4), step(p.fail)]).then(step(p.echo, "not called"))
    )
    results = wf.results()
    assert [r.return_value for r in results[:2]] == [3, 7]
    assert [error_of(r) for r in results[2:]] == [EXPECTED, DEPENDENCY_FAILED]
    assert "echo:not called" not in [e["task"] for e in p.entries()]


@pytest.mark.parametrize(
    ("members", "expected"),
    [
        # Celery test_errback_called_by_group_fail_first / _fail_last
        (["fail", 42], [["FAILED", EXPECTED], ["SUCCESSFUL", 42]]),
        ([42, "fail"], [["SUCCESSFUL", 42], ["FAILED", EXPECTED]]),
        # Celery test_errback_called_by_group_fail_multiple: 24 pass, 42 fail
        (
            [42] * 24 + ["fail"] * 42,
            [["SUCCESSFUL", 42]] * 24 + [["FAILED", EXPECTED]] * 42,
        ),
    ],
    ids=["fail-first", "fail-last", "fail-multiple"],
)
def test_on_complete_after_a_group_with_failures(queues: Any, members: list[Any], expected: Any):
    # Celery's group errbacks: here one step after the group, once, however it ended,
    # seeing how each member ended, in group order.
    steps = [step(p.fail) if m == "fail" else step(p.identity, m) for m in members]
    wf = run(group(steps).on_complete(step(p.outcomes)))
    assert wf.results()[-1].return_value == expected
    assert [e["task"] for e in p.entries()].count("outcomes") == 1
    assert_before(wf, list(range(len(members))), [len(members)])
    assert wf.status == "failed"


def test_on_complete_after_a_chain_sees_only_its_last_step(queues: Any):
    # Celery test_mutable_errback_called_by_chord_from_chain: the error reaches what
    # follows the chain as its last step's DependencyFailed.
    wf = run(
        chain(step(p.identity, 1), step(p.fail), step(p.identity, 3)).on_complete(step(p.outcomes))
    )
    assert wf.results()[-1].return_value == [["FAILED", DEPENDENCY_FAILED]]


# --- delays (Dramatiq) --------------------------------------------------------------------


def test_pipeline_respects_delay_of_first_message(queues: Any):
    # Dramatiq test_pipeline_respects_delay_of_first_message.
    later = p.add.using(run_after=timezone.now() + timedelta(hours=1))
    wf = chain(step(later, 1, 2), step(p.accumulate, 3)).enqueue()
    drain()
    assert p.entries() == []
    assert wf.status == "pending"
    assert [job.state for job in wf.jobs()] == ["scheduled", "waiting"]
    with pytest.raises(TimeoutError):
        wf.join(timeout=0.05)


def test_pipeline_respects_delay_of_second_message(queues: Any):
    # Dramatiq test_pipeline_respects_delay_of_second_message: once the first ran, the
    # second still waits for its own time.
    later = p.accumulate.using(run_after=timezone.now() + timedelta(hours=1))
    wf = chain(step(p.add, 1, 2), step(later, 3)).enqueue()
    drain()
    assert ran(wf) == [0]
    assert wf.status == "running"
    assert [job.state for job in wf.jobs()] == ["done", "scheduled"]
    with pytest.raises(TimeoutError):
        wf.join(timeout=0.05)


# --- the workflow's record and EAGER ------------------------------------------------------


def test_rebuild_nested_workflow_from_its_id(queues: Any):
    # Celery test_signature_serialization (test_rebuild_nested_chain_chain / _group /
    # _chord, ...): a nested canvas' workflow found again from its id alone has the same
    # steps and reads the same results.
    canvas = chain(
        step(p.add, 1, 1),
        group([chain(step(p.accumulate, 1), step(p.accumulate, 1)), step(p.accumulate, 2)]),
        group([step(p.add, 1, 2)]).then(step(p.accumulate)),
    )
    wf = run(canvas)
    again = Workflow.get(wf.id, "default")
    assert again.steps == wf.steps
    assert [r.return_value for r in again.results()] == values(wf) == [2, 3, 4, 4, 3, 3]


def test_always_eager_passes_results_on(queues: Any, settings: Any):
    # Celery test_always_eager: ~(add.s(4, 4) | add.s(8)) == 16, and a chord eagerly.
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"EAGER": True}}}
    wf = chain(step(p.add, 4, 4), step(p.accumulate, 8)).enqueue()
    assert wf.status == "succeeded"
    assert values(wf) == [8, 16]
    chord = group([step(p.add, 1, 2), step(p.add, 3, 4)]).then(step(p.collect)).enqueue()
    assert values(chord) == [3, 7, [3, 7]]
    assert sum(queues[0].counts().values()) == 0  # it all ran here, nothing written
