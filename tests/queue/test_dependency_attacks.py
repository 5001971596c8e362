"""Job dependencies and workflows (issue 28) under an outside attack suite's fire: inputs at
and past their bounds (a 10,000-step chain, a group of 1,000 on another queue with its
callback, 3,000 jobs whose dependencies cross the 1,000-job batches), corrupt data planted
in Redis (a waiting job's ``dw``, ``@<ref>``, ``dp``, ``dn`` and priority, outbox entries,
workflow records), worker processes stopped and killed in cross-queue workflows, Redis
restarted or gone for a moment, threads racing (joins, cancels, dependants enqueued as their
dependency ends or is retried) and hostile ids.

Tests marked ``xfail(strict=True)`` show bugs found by this suite and still there (each
reason says what goes wrong); they pass the day the bug is fixed, and then fail until the
mark is removed. Tests whose docstring says "Found on dcac3d0" failed on that commit and
pass since the fix."""

from __future__ import annotations

import itertools
import logging
import os
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import redis

from django_redislock import get_queue, get_redis
from django_redislock.exceptions import JobNotFound, RedisUnavailable
from django_redislock.queue import depending, joining
from django_redislock.queue import outbox as outbox_module
from django_redislock.queue.jobs import Job
from django_redislock.queue.outbox import deliver
from django_redislock.queue.queue import Queue
from django_redislock.queue.worker.loop import Worker
from django_redislock.redis.pools import with_connection
from django_redislock.tasks.results import FrameworkInvalidTask as InvalidTaskError
from django_redislock.workflows import MAX_STEPS, Workflow, chain, enqueueing, group, step
from django_redislock.workflows import workflow as workflow_module
from tests import attack_workflow_tasks as t
from tests.support.fixtures import Backend, Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_for

from .test_dependencies import run_one

TASK = "tests.tasks.record"
STATES = ("ready", "scheduled", "running", "dead", "parked", "waiting")
DEPENDENCY_FAILED = "django_redislock.exceptions.DependencyFailed"
TASKS = {"default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend", "QUEUES": []}}


def configure(settings: Any, **options: Any) -> tuple[Queue, Queue]:
    """Queues "default" and "other" (on Cluster, two slots) with ``options``, and a Tasks
    backend that takes any queue."""
    options = {"LEASE": 30, "MAX_ATTEMPTS": 1, "RETRY_BACKOFF": 0, **options}
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": options, "other": options}}
    settings.TASKS = TASKS
    get_redis().delete(t.RUNS)
    return get_queue("default"), get_queue("other")


@pytest.fixture
def queues(backend: Backend, settings: Any) -> tuple[Queue, Queue]:
    """fakeredis, a real server, a real Cluster."""
    return configure(settings)


@pytest.fixture
def real_queues(real_backend: Backend, settings: Any) -> tuple[Queue, Queue]:
    """A real server and a real Cluster only (threads by the hundred, big inputs)."""
    return configure(settings)


@pytest.fixture
def own_server(settings: Any) -> Iterator[RedisServer]:
    """A redis-server of the test's own, which the test stops and restarts; with an AOF
    synced at every write, so that a restart forgets nothing."""
    with RedisServer("--appendonly", "yes", "--appendfsync", "always") as server:
        settings.REDISLOCK = {"URL": server.url}
        configure(settings, LEASE=2, MAX_ATTEMPTS=10, RETRY_BACKOFF=0.01)
        yield server


def state(queue: Queue, job: Any) -> str:
    return str(queue.get(job if isinstance(job, str) else job.id).state)


def listed(queue: Queue, job_id: str) -> list[str]:
    """The states whose listing shows ``job_id`` (what the admin and ``counts`` see)."""
    return [s for s in STATES if any(j.id == job_id for j in queue.jobs(s, 0, 1000))]


def drain(*names: str, rounds: int = 50) -> None:
    """Burst workers in this process until nothing of ``names`` is ready, scheduled or
    running (a step on another queue becomes ready as the outbox is delivered)."""
    for _ in range(rounds):
        Worker(list(names), burst=True).run()
        counts = [get_queue(name).counts() for name in names]
        if not any(c["ready"] + c["scheduled"] + c["running"] for c in counts):
            return
    raise AssertionError(f"still pending after {rounds} drains: {counts}")


def first_ok_end(name: str, seen: list[dict[str, Any]]) -> float:
    ends = [r["end"] for r in seen if r["name"] == name and r["ok"]]
    assert ends, f"{name} never succeeded: {[r['name'] for r in seen]}"
    return min(ends)


def never_early(edges: list[tuple[str, str]]) -> None:
    """For each (before, after): ``after`` never started before a run of ``before`` had
    succeeded (a run frozen past its lease may record a late success; the step it released
    must still have waited for the first one)."""
    seen = t.runs()
    for before, after in edges:
        starts = [r["start"] for r in seen if r["name"] == after]
        assert starts, f"{after} never ran"
        assert min(starts) >= first_ok_end(before, seen), f"{after} started before {before}"


# --- huge inputs ----------------------------------------------------------------------------


@pytest.mark.timeout(300)
@pytest.mark.django_db(transaction=True)
def test_a_chain_of_the_most_steps_allowed_runs_in_order(real_queues: Any) -> None:
    """MAX_STEPS steps one after another: ten DEPENDs of 1,000, each chunk's first step
    waiting for the last of the chunk before; drained, every step ran once, in order."""
    default = real_queues[0]
    wf = chain(*[step(t.mark, f"s{n}") for n in range(MAX_STEPS)]).enqueue()
    assert default.counts()["waiting"] == MAX_STEPS - 1
    assert len(Workflow.get(wf.id).steps) == MAX_STEPS
    drain("default")
    assert t.names() == [f"s{n}" for n in range(MAX_STEPS)]
    assert wf.status == "succeeded"
    assert default.counts()["waiting"] == 0


@pytest.mark.timeout(300)
@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_chain_crossing_queues_at_every_step_runs_in_order(
    real_queues: Any, processes: Processes
) -> None:
    """1,000 steps alternating between two queues (two Cluster slots), each queue with a
    worker process of its own: every hand-off goes through an outbox (1,000 registrations
    at enqueue, 999 deliveries by the workers); each step runs once, in order."""
    there = t.mark.using(queue_name="other")
    total = 1000
    wf = chain(*[step(there if n % 2 else t.mark, f"x{n}") for n in range(total)]).enqueue()
    assert [q.client.llen(q.keys.outbox) for q in real_queues] == [0, 0]  # all registered
    for names in (["default"], ["other"]):
        processes.start(run_worker, names)
    wait_for(lambda: wf.status == "succeeded", 240, "the chain ran")
    assert t.names() == [f"x{n}" for n in range(total)]


@pytest.mark.timeout(120)
@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_a_pooled_worker_hands_a_step_to_another_queue_at_once(
    real_queues: Any, processes: Processes
) -> None:
    """Two workers with --concurrency 2, one a queue, run a chain crossing queues at every
    step: the median gap between a step's end and the next one's start is well below the
    keeper's 50 ms tick (a loaded machine makes it longer, never shorter: a pass is real)."""
    there = t.mark.using(queue_name="other")
    total = 61
    wf = chain(*[step(there if n % 2 else t.mark, f"x{n}") for n in range(total)]).enqueue()
    for names in (["default"], ["other"]):
        processes.start(run_worker, names)
    wait_for(lambda: wf.status == "succeeded", 90, "the chain ran")
    seen = t.runs()
    assert [r["name"] for r in seen] == [f"x{n}" for n in range(total)]
    gaps = sorted(b["start"] - a["end"] for a, b in itertools.pairwise(seen))
    assert gaps[len(gaps) // 2] < 0.025, f"median hand-off {gaps[len(gaps) // 2] * 1000:.1f} ms"


@pytest.mark.django_db(transaction=True)
def test_a_burst_worker_on_both_queues_runs_a_cross_queue_chain_to_its_end(
    queues: tuple[Queue, Queue],
) -> None:
    """``--burst`` exits when nothing is ready: not while its own delivery of the outbox
    just made the next step ready on a queue it serves. (Found on dcac3d0: it delivered
    after its fetches and exited on their "nothing ready", one hand-off per run.)"""
    there = t.mark.using(queue_name="other")
    wf = chain(step(t.mark, "a"), step(there, "b"), step(t.mark, "c")).enqueue()
    Worker(["default", "other"], burst=True).run()
    assert t.names() == ["a", "b", "c"]
    assert wf.status == "succeeded"


@pytest.mark.timeout(300)
@pytest.mark.django_db(transaction=True)
def test_a_group_of_a_thousand_elsewhere_then_a_callback_gets_every_result(
    real_queues: Any,
) -> None:
    """A group of 1,000 (the most a step waits for) on another queue, then a step that
    collects their results; and the same with some members dying and ``on_complete``."""
    there = t.mark.using(queue_name="other")
    members = [step(there, f"g{n}") for n in range(1000)]
    wf = group(members).then(step(t.collect, "callback")).enqueue()
    dying = [step(there, f"d{n}", fail=n % 97 == 0) for n in range(1000)]
    report = group(dying).on_complete(step(t.collect, "report")).enqueue()
    after_death = group([step(there, "ok"), step(there, "dies", fail=True)]).then(
        step(t.mark, "never")
    )
    doomed = after_death.enqueue()
    drain("other", "default")
    names = t.names()
    assert Counter(names)["callback"] == Counter(names)["report"] == 1
    assert names.index("callback") > max(names.index(f"g{n}") for n in range(1000))
    assert wf.results()[-1].return_value == [f"g{n}" for n in range(1000)]  # in order
    expected = [None if n % 97 == 0 else f"d{n}" for n in range(1000)]
    assert report.results()[-1].return_value == expected
    assert (wf.status, report.status, doomed.status) == ("succeeded", "failed", "failed")
    assert "never" not in names
    assert [q.counts()["waiting"] for q in real_queues] == [0, 0]


@pytest.mark.timeout(300)
def test_enqueue_many_of_3000_with_dependencies_across_the_batches(real_queues: Any) -> None:
    """3,000 jobs, given in shuffled order, whose dependencies cross the 1,000-job batches
    (jobs 999 and 1,000 positions back, one job waiting for 1,000 spread over all three
    batches, jobs of another queue ended and pending): each job runs once, never before
    every job it waits for ended."""
    default, other = real_queues
    rng = random.Random(28)
    elsewhere_done = other.enqueue(TASK, [0], job_id="od")
    run_one(other, elsewhere_done)
    elsewhere = other.enqueue(TASK, [0], job_id="op")
    total = 3000
    deps: dict[str, list[Any]] = {}
    for n in range(total):
        mine = {f"j{m}" for m in (n - 1, n - 999, n - 1000) if m >= 0 and n % 5}
        mine |= {f"j{rng.randrange(n)}" for _ in range(3) if n}
        deps[f"j{n}"] = sorted(mine)
    deps["j2999"] = [f"j{m}" for m in range(0, 3000, 3)][:1000]  # the most: 1,000
    deps["j1500"] = [*deps["j1500"], Job("od", "other", "")]
    deps["j2500"] = [*deps["j2500"], Job("op", "other", "")]
    specs = [{"task": TASK, "args": [n], "job_id": f"j{n}"} for n in range(total)]
    for spec in specs:
        spec["depends_on"] = deps[spec["job_id"]]
    rng.shuffle(specs)
    jobs = default.enqueue_many(specs)
    assert [job.id for job in jobs] == [spec["job_id"] for spec in specs]  # as given
    assert other.get("op").dependants == ("default\tj2500",)
    waits_for_op = {"j2500"}
    for n in range(total):  # (deps only name earlier jobs)
        if any(isinstance(r, str) and r in waits_for_op for r in deps[f"j{n}"]):
            waits_for_op.add(f"j{n}")
    ended: set[str] = set()
    run_checked(default, deps, ended, waits_for_op)
    assert ended == set(deps) - waits_for_op
    assert default.counts()["waiting"] == len(waits_for_op) > 1
    run_one(other, elsewhere)
    run_checked(default, deps, ended, set())
    assert ended == set(deps)
    assert default.counts() == dict.fromkeys(STATES, 0)


def run_checked(queue: Queue, deps: dict[str, list[Any]], ended: set[str], held: set[str]) -> None:
    """Lease and end ``queue``'s jobs, 100 at a time, until none is ready: each only once
    every job of ``deps`` it waits for in this queue ended, none of ``held``, none twice."""
    while True:
        leased = queue.pop(100)
        if not leased:
            return
        for job in leased:
            refs = {r for r in deps[job.id] if isinstance(r, str)}
            assert refs <= ended, f"{job.id} started before {refs - ended}"
            assert job.id not in held | ended, f"{job.id} ran early, or twice"
        for job in leased:
            assert queue.ack(job, "1")
            ended.add(job.id)


def test_a_chain_enqueued_under_a_dead_job_keeps_its_errors_short(
    queues: tuple[Queue, Queue],
) -> None:
    """1,000 jobs, one after another, enqueued at once behind a job that ended dead: each
    ends dead with DependencyFailed at once, with an error that does not grow with its
    place in the chain (as when the same cascade goes through the outbox)."""
    default = queues[0]
    dead = default.enqueue(TASK, [0], job_id="dead")
    run_one(default, dead, fail=True)
    specs = [
        {"task": TASK, "args": [n], "job_id": f"c{n}", "depends_on": [f"c{n - 1}" if n else "dead"]}
        for n in range(1000)
    ]
    jobs = default.enqueue_many(specs)
    assert {job.state for job in jobs} == {"dead"}
    ended = default.get_many([f"c{n}" for n in range(1000)])
    assert {job.error_class for job in ended if job} == {DEPENDENCY_FAILED}
    assert max(len(job.error) for job in ended if job) <= 2000


# --- corrupt data planted in Redis ----------------------------------------------------------


@pytest.mark.parametrize("waiting_on", ["garbage", None, "-3", "nan"])
def test_a_garbage_waiting_count_never_starts_a_job_early(
    queues: tuple[Queue, Queue], waiting_on: str | None
) -> None:
    """A waiting job's count of dependencies left (``dw``) damaged, absent, negative or
    'nan': the first dependency to end does not release it while the other still runs;
    the last one does (or it is set aside dead). (Found on dcac3d0: ``num(dw, 1) or 1``
    counted the damage as 1 and released the job at the first end.)"""
    default = queues[0]
    first, second = default.enqueue(TASK, [1]), default.enqueue(TASK, [2])
    child = default.enqueue(TASK, [3], depends_on=[first, second])
    key = default.keys.job(child.id)
    if waiting_on is None:
        default.client.hdel(key, "dw")
    else:
        default.client.hset(key, "dw", waiting_on)
    run_one(default, first)
    # second has not ended: the child must not be ready (waiting, or set aside dead)
    assert listed(default, child.id) in (["waiting"], ["dead"])
    run_one(default, second)
    deliver(default)
    assert listed(default, child.id) in (["ready"], ["dead"])


@pytest.mark.parametrize("mark", ["zz", None])
def test_a_garbage_dependency_mark_leaves_no_job_waiting_for_good(
    queues: tuple[Queue, Queue], mark: str | None
) -> None:
    """A waiting job's mark of one dependency (``@<ref>``) damaged or deleted: once both
    dependencies ended, it runs (or is set aside dead), never waits for good. (Found on
    dcac3d0: a tell whose mark was not 'w' was ignored as if told already.)"""
    default = queues[0]
    first, second = default.enqueue(TASK, [1]), default.enqueue(TASK, [2])
    child = default.enqueue(TASK, [3], depends_on=[first, second])
    key = default.keys.job(child.id)
    if mark is None:
        default.client.hdel(key, "@" + first.id)
    else:
        default.client.hset(key, "@" + first.id, mark)
    run_one(default, first)
    run_one(default, second)
    deliver(default)
    # both dependencies ended: it runs, or is set aside dead with the reason; never waits on
    assert state(default, child) in ("ready", "dead")


@pytest.mark.parametrize("where", ["same queue", "across queues"])
def test_a_waiting_job_whose_priority_is_nan_is_set_aside_alone(
    queues: tuple[Queue, Queue], where: str
) -> None:
    """A waiting job whose priority field is 'nan' (which Lua's tonumber takes): its
    dependency's ack succeeds, its sibling is released, and it is ready (priority 0) or
    dead, never in no set. (Found on dcac3d0: make_ready's ZADD of a NaN score failed
    mid-script; Redis kept the writes before it, leaving the job in state 'w' in no set,
    and the ack, or the delivery raised to the ack's caller, failed.)"""
    default, other = queues
    home = default if where == "same queue" else other
    parent = home.enqueue(TASK, [1])
    child = default.enqueue(TASK, [2], depends_on=[parent])
    sibling = default.enqueue(TASK, [3], depends_on=[parent])
    default.client.hset(default.keys.job(child.id), "pr", "nan")
    [leased] = home.pop()
    try:
        acked = home.ack(leased, "1")
    except Exception as exc:  # a corrupt dependant must not fail its dependency's ack
        raise AssertionError(f"the ack raised {exc!r}") from exc
    assert acked
    deliver(home)
    assert listed(default, sibling.id) == ["ready"]
    assert listed(default, child.id) in (["ready"], ["dead"])  # never in no set at all


def test_garbage_in_depends_and_dependants_harms_nothing_around_it(
    queues: tuple[Queue, Queue], caplog: pytest.LogCaptureFixture
) -> None:
    """A job's ``dn`` naming a queue not configured, absent jobs, a lone tab, bytes that are
    no UTF-8 and a 20 kB ref, and a waiting job's ``dp`` of garbage: the job's end is
    recorded, its real dependants are released, the outbox empties, the bad refs are
    logged, and the jobs with garbage read back."""
    default, other = queues
    parent = default.enqueue(TASK, [1])
    child = default.enqueue(TASK, [2], depends_on=[parent])
    far = other.enqueue(TASK, [3], depends_on=[parent])
    garbage_dp = default.enqueue(TASK, [4], depends_on=[parent])
    key = default.keys.job(parent.id)
    dn = default.client.hget(key, "dn")
    junk = [b"nowhere\tx", b"absent", b"\t", b"default\t", b"\xff\xfe\x00bin", b"r" * 20_000]
    default.client.hset(key, "dn", b"\n".join([*junk[:3], dn, *junk[3:]]))
    default.client.hset(default.keys.job(garbage_dp.id), "dp", b"\xff\n\t\tnowhere\tzz\n\n")
    assert default.get(garbage_dp.id).state == "waiting"  # read back, garbage and all
    with caplog.at_level(logging.ERROR, "django_redislock.queue.outbox"):
        run_one(default, parent)
        deliver(default)
    assert "nowhere" in caplog.text
    assert [listed(default, child.id), listed(other, far.id)] == [["ready"], ["ready"]]
    assert listed(default, garbage_dp.id) == ["ready"]
    assert [q.client.llen(q.keys.outbox) for q in queues] == [0, 0]
    assert default.counts()["waiting"] == 0


def test_malformed_outbox_entries_are_set_aside_and_the_rest_delivered(
    queues: tuple[Queue, Queue], caplog: pytest.LogCaptureFixture
) -> None:
    """Garbage of every kind planted in an outbox among real entries (a dependant to tell
    across queues, a joiner to wake): each bad entry is dropped or delivered to nothing,
    the real ones are delivered, the outbox empties, nothing is raised."""
    default, other = queues
    parent = default.enqueue(TASK, [1])
    child = other.enqueue(TASK, [2], depends_on=[parent])
    waiter = default.enqueue(TASK, [3])
    joined: list[Any] = []
    joiner = threading.Thread(target=lambda: joined.append(default.join(waiter.id, 30)))
    joiner.start()
    wait_for(lambda: default.client.hget(default.keys.job(waiter.id), "jw") == b"1")
    [leased] = default.pop()  # leased before the garbage: its end goes behind it
    garbage = [
        b"",
        b"t",
        b"zz\ngarbage",
        b"t\nonly\ntwo",
        b"\xff\xfe\xfd\n\x00\n\x80",  # no UTF-8
        b"t\n\xff\xfe\n" + parent.id.encode() + b"\nk\n",
        b"t\nnowhere\tx\n" + parent.id.encode() + b"\nk\n",  # a queue not configured
        b"t\nabsent\nalso-absent\nd\n" + b"w" * 1_000_000,  # a 1 MB reason
        b"e\nabsent\nnot-a-number",
        b"e\n" + b"e" * 5000 + b"\n-7",
        b"r\nnowhere\tx\nabsent\n1",
        b"r\nother\tabsent\nabsent\nnot-a-time",
        b"x" * 2_000_000,  # 2 MB of nothing
    ]
    default.client.rpush(default.keys.outbox, *garbage)
    with caplog.at_level(logging.ERROR, "django_redislock.queue.outbox"):
        assert default.ack(leased, "1")  # (delivers the outbox, garbage first)
        deliver(default)
    assert "malformed" in caplog.text
    assert listed(other, child.id) == ["ready"]
    run_one(default, waiter)
    joiner.join(30)
    assert [job.state for job in joined] == ["done"]
    assert [q.client.llen(q.keys.outbox) for q in queues] == [0, 0]


def test_an_outbox_entry_with_an_unknown_outcome_releases_nothing(
    queues: tuple[Queue, Queue],
) -> None:
    """A tell whose outcome is neither done nor dead does not release the dependant of a
    job that has not even started. (Found on dcac3d0: TELL took any outcome but 'd' for
    success.)"""
    default = queues[0]
    parent = default.enqueue(TASK, [1])
    child = default.enqueue(TASK, [2], depends_on=[parent])
    default.client.rpush(default.keys.outbox, f"t\n{child.id}\n{parent.id}\n?\n")
    deliver(default)
    assert state(default, parent) == "ready"  # it has not even started
    assert listed(default, child.id) == ["waiting"]


@pytest.mark.timeout(300)
def test_registrations_not_found_yet_stall_nothing_behind_them(
    queues: tuple[Queue, Queue],
) -> None:
    """200 registrations whose dependencies are not written yet at the head of an outbox
    (kept a minute, by design): the end of a step behind them is still delivered at once,
    and its dependant in the other queue is ready."""
    default, other = queues
    parent = default.enqueue(TASK, [1])
    child = other.enqueue(TASK, [2], depends_on=[parent])
    now = int(time.time() * 1000)
    # registrations as a workflow being written leaves them: their dependencies come next
    pending = [f"r\nother\tnot-yet-{n}\nw{n}\n{now}" for n in range(200)]
    default.client.rpush(default.keys.outbox, *pending)
    run_one(default, parent)  # its end, behind them: child is to be told
    deliver(default)
    assert listed(other, child.id) == ["ready"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "record",
    [
        "not JSON",
        "[1]",
        '{"steps": 5}',
        '{"steps": [1]}',
        '{"steps": [["default", 5, "t"]]}',
    ],
)
def test_a_corrupt_workflow_record_is_set_aside_and_the_others_cleaned_up(
    queues: tuple[Queue, Queue], monkeypatch: pytest.MonkeyPatch, record: str
) -> None:
    """A record that is not a workflow's: the handle is JobNotFound ("corrupt"), and the
    workers' clean-up deletes it and the ended workflows' records after it, never raising.
    (Found on dcac3d0 for the last three: Workflow.get caught only what json.loads and
    ["steps"] raise, so a bad list of steps raised TypeError there, or in Workflow.jobs,
    and the worker's sweep failed on it every minute, never reaching the others.)"""
    default = queues[0]
    default.client.set(default.keys.workflow("bad"), record)
    default.client.zadd(default.keys.workflows, {"bad": 1})  # the first to look at
    ended = chain(step(t.mark, "a")).enqueue()
    drain("default")
    with pytest.raises(JobNotFound, match="corrupt"):
        Workflow.get("bad").progress()
    later = time.time() + default.result_ttl + 60
    monkeypatch.setattr(workflow_module, "time", SimpleNamespace(time=lambda: later))
    assert workflow_module.sweep(default) == 2
    assert not default.client.exists(default.keys.workflow(ended.id))


@pytest.mark.django_db(transaction=True)
def test_a_record_naming_a_queue_removed_from_the_settings_stops_no_clean_up(
    queues: tuple[Queue, Queue], monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """A workflow's record naming a step of a queue since removed from QUEUES, the first
    the workers' clean-up looks at: it does not raise, and still deletes the ended
    workflows' records after it. (Found on dcac3d0: Workflow.jobs raised
    ImproperlyConfigured, which sweep did not catch: every minute, for good.)"""
    default = queues[0]
    gone = chain(step(t.mark, "here"), step(t.mark.using(queue_name="other"), "there")).enqueue()
    wf = chain(step(t.mark, "alone")).enqueue()
    drain("default", "other")
    assert (gone.status, wf.status) == ("succeeded", "succeeded")
    default.client.zadd(default.keys.workflows, {gone.id: 1})  # the first looked at
    options = settings.REDISLOCK["QUEUES"]["default"]
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": options}}  # "other" gone
    later = time.time() + default.result_ttl + 60
    monkeypatch.setattr(workflow_module, "time", SimpleNamespace(time=lambda: later))
    workflow_module.sweep(default)
    assert not default.client.exists(default.keys.workflow(wf.id))


# --- worker processes stopped and killed, Redis restarted or away ---------------------------


def reachable(call: Any) -> Any:
    """``call()`` once this process's connections, cut by a restart, are made again."""
    found: list[Any] = []

    def attempt() -> bool:
        try:
            found.append(call())
        except (RedisUnavailable, redis.ConnectionError):
            return False
        return True

    wait_for(attempt, 30, "Redis reachable again")
    return found[0]


def run_worker(queues: list[str]) -> None:
    Worker(queues, concurrency=2).run()


def cross_queue_workflow(
    tag: str, branches: int = 4, depth: int = 2, seconds: float = 0.02
) -> tuple[Any, list[tuple[str, str]]]:
    """start, then ``branches`` chains of ``depth`` steps crossing between the two queues
    at every step, then a step that collects their ends, then a last one on "other"; and
    its (before, after) edges."""
    there = t.mark.using(queue_name="other")
    rows = [[f"{tag}{n}.{d}" for d in range(depth)] for n in range(branches)]
    canvas = chain(
        step(t.mark, f"{tag}start", seconds),
        group(
            [
                chain(*[step((there, t.mark)[d % 2], name, seconds) for d, name in enumerate(row)])
                for row in rows
            ]
        ),
        step(t.collect, f"{tag}gather"),
        step(there, f"{tag}end", seconds),
    )
    edges = [(f"{tag}start", row[0]) for row in rows]
    edges += [pair for row in rows for pair in itertools.pairwise(row)]
    edges += [(row[-1], f"{tag}gather") for row in rows]
    edges += [(f"{tag}gather", f"{tag}end")]
    return canvas.enqueue(), edges


@pytest.mark.timeout(240)
@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_workers_frozen_and_killed_at_random_in_cross_queue_workflows(
    real_backend: Backend, settings: Any, processes: Processes
) -> None:
    """Three workflows crossing two queues; their workers SIGSTOPped past their leases (a
    frozen run finishes late, its lease lost), SIGCONTed, SIGKILLed and replaced at random:
    every step succeeds, none starts before a run of every step it waits for succeeded,
    nothing is left waiting or in an outbox."""
    queues = configure(settings, LEASE=2, MAX_ATTEMPTS=20, RETRY_BACKOFF=0.01)
    rng = random.Random(int(os.environ.get("CHAOS_SEED", "0")) or None)
    flows = [cross_queue_workflow(tag, 3, 8, 0.15) for tag in ("p", "q", "r")]
    serve = [["default"], ["other"], ["default", "other"]]
    workers = [processes.start(run_worker, names) for names in serve]
    frozen: dict[int, float] = {}  # pid -> when to thaw it
    attacks = itertools.cycle(["kill", "freeze past the lease", "freeze"])
    done: Counter[str] = Counter()
    ended = ("succeeded", "failed")
    while sum(done.values()) < 24 and not all(wf.status in ended for wf, _ in flows):
        time.sleep(rng.uniform(0.1, 0.4))
        for pid, thaw in list(frozen.items()):
            if time.monotonic() >= thaw:
                os.kill(pid, signal.SIGCONT)
                del frozen[pid]
        free = [n for n, w in enumerate(workers) if w.pid not in frozen]
        if not free:
            continue
        victim, attack = rng.choice(free), next(attacks)
        pid = workers[victim].pid
        assert pid is not None
        if attack == "kill":
            os.kill(pid, signal.SIGKILL)
            workers[victim].join(5)
            workers[victim] = processes.start(run_worker, serve[victim])
        else:
            os.kill(pid, signal.SIGSTOP)
            frozen[pid] = time.monotonic() + (3.0 if attack == "freeze past the lease" else 0.3)
        done[attack] += 1
    for pid in frozen:
        os.kill(pid, signal.SIGCONT)
    assert min(done.values()) >= 2, done  # the attacks came while the workflows ran
    wait_for(lambda: all(wf.status in ended for wf, _ in flows), 120, "the workflows ended")
    assert [wf.status for wf, _ in flows] == ["succeeded"] * 3
    for _, edges in flows:
        never_early(edges)
    for queue in queues:
        assert queue.counts()["waiting"] == 0
        assert queue.counts()["dead"] == 0
    wait_for(lambda: [q.client.llen(q.keys.outbox) for q in queues] == [0, 0], 30)


@pytest.mark.timeout(240)
@pytest.mark.processes
@pytest.mark.django_db(transaction=True)
def test_redis_restarted_mid_workflow_loses_no_step(
    own_server: RedisServer, processes: Processes
) -> None:
    """The server restarted three times (with its AOF) while workers run two cross-queue
    workflows: they finish, every step succeeded, none early, nothing left over."""
    queues = get_queue("default"), get_queue("other")
    flows = [cross_queue_workflow(tag) for tag in ("m", "n")]
    for names in (["default"], ["other"]):
        processes.start(run_worker, names)
    for restarts in range(1, 4):
        wait_for(lambda n=restarts: len(reachable(t.runs)) >= 4 * n, 60, "steps ran")
        own_server.restart()
    wait_for(lambda: reachable(lambda: [wf.status for wf, _ in flows]) == ["succeeded"] * 2, 120)
    for _, edges in flows:
        never_early(edges)
    for queue in queues:
        assert queue.counts()["waiting"] == queue.counts()["dead"] == 0
    wait_for(lambda: [q.client.llen(q.keys.outbox) for q in queues] == [0, 0], 30)


def test_an_enqueue_with_dependencies_while_redis_is_away_raises_redis_unavailable(
    own_server: RedisServer,
) -> None:
    """Redis refusing connections as an enqueue looks its dependency up: RedisUnavailable,
    and nothing written."""
    default, other = get_queue("default"), get_queue("other")
    parent = other.enqueue(TASK, [1])
    own_server.stop()
    try:
        with pytest.raises(RedisUnavailable):
            default.enqueue(TASK, [2], depends_on=[parent])
    finally:
        own_server.start()
    assert sum(reachable(default.counts).values()) == 0


@pytest.mark.parametrize("call", ["enqueue", "ack"])
def test_redis_lost_right_after_a_call_leaves_its_delivery_to_the_sweep(
    own_server: RedisServer, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    """Redis gone after the call's script ran, before it delivered the outbox: the call
    returns as done; the dependant waits (never started early) until a sweep delivers."""
    default, other = get_queue("default"), get_queue("other")
    real = outbox_module.deliver

    def delivered_while_away(queue: Queue, **kwargs: Any) -> int:
        own_server.stop()
        try:
            return real(queue, **kwargs)
        finally:
            own_server.start()

    if call == "enqueue":  # the registration at its dependency, elsewhere, is left
        parent = other.enqueue(TASK, [1])
        monkeypatch.setattr(outbox_module, "deliver", delivered_while_away)
        child = default.enqueue(TASK, [2], depends_on=[parent])
        monkeypatch.setattr(outbox_module, "deliver", real)
        assert child.state == "waiting"
        run_one(other, parent)  # its end knows no dependant yet
        source = default
    else:  # the tell of its dependant, elsewhere, is left
        parent = default.enqueue(TASK, [1])
        child = other.enqueue(TASK, [2], depends_on=[parent])
        [leased] = default.pop()
        monkeypatch.setattr(outbox_module, "deliver", delivered_while_away)
        assert default.ack(leased, "1")
        monkeypatch.setattr(outbox_module, "deliver", real)
        source = default
    where = other if call == "ack" else default
    assert listed(where, child.id) == ["waiting"]  # not started early
    deliver(source)  # the workers' sweep
    assert listed(where, child.id) == ["ready"]


def test_a_join_across_a_redis_restart_ends_within_its_timeout(
    own_server: RedisServer,
) -> None:
    """Redis restarted while a join waits, then the job ends: the join returns the job as
    it ended, or raises RedisUnavailable; never hangs, never returns it unended."""
    default = get_queue("default")
    waited = default.enqueue(TASK, [3])
    ends: list[Any] = []

    def join() -> None:
        try:
            ends.append(default.join(waited.id, timeout=60).state)
        except RedisUnavailable as exc:
            ends.append(exc)

    joiner = threading.Thread(target=join)
    joiner.start()
    wait_for(lambda: default.client.hget(default.keys.job(waited.id), "jw") == b"1")
    own_server.restart()
    [leased] = reachable(default.pop)
    assert leased.id == waited.id
    assert default.ack(leased, "1")
    joiner.join(60)
    assert not joiner.is_alive()
    assert ends == ["done"] or isinstance(ends[0], RedisUnavailable), ends


@pytest.mark.django_db(transaction=True)
def test_a_workflow_whose_enqueue_failed_between_queues_runs_no_step_twice(
    own_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis lost between the two queues' writes of a workflow: enqueue raises
    RedisUnavailable; the caller enqueues it again once Redis is back; each step runs
    once."""
    real = depending.Depending.push_dependent

    def redis_lost_before_other(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.name == "other":
            own_server.stop()
        return real(self, *args, **kwargs)

    there = t.mark.using(queue_name="other")
    canvas = chain(step(t.mark, "reserve"), step(there, "charge"), step(t.mark, "ship"))
    monkeypatch.setattr(depending.Depending, "push_dependent", redis_lost_before_other)
    with pytest.raises(RedisUnavailable):
        canvas.enqueue()
    monkeypatch.setattr(depending.Depending, "push_dependent", real)
    own_server.start()
    wf = canvas.enqueue()  # the caller tries again
    drain("default", "other")
    assert wf.status == "succeeded"
    assert Counter(t.names()) == {"reserve": 1, "charge": 1, "ship": 1}


@pytest.mark.django_db(transaction=True)
def test_a_group_of_more_than_a_thousand_whose_enqueue_failed_half_way_runs_nothing(
    own_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1,001-step group of one queue takes two DEPENDs: Redis lost before the second,
    nothing starts (its first steps wait for the gate the second opens); enqueued again,
    each step runs once."""
    real = depending.Depending.push_dependent
    calls: list[int] = []

    def redis_lost_before_the_second(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            own_server.stop()
        return real(self, *args, **kwargs)

    canvas = group([step(t.mark, f"m{n}") for n in range(1001)])
    monkeypatch.setattr(depending.Depending, "push_dependent", redis_lost_before_the_second)
    with pytest.raises(RedisUnavailable):
        canvas.enqueue()
    monkeypatch.setattr(depending.Depending, "push_dependent", real)
    own_server.start()
    default = get_queue("default")
    assert default.counts()["waiting"] == 1000  # the first DEPEND's 999 steps and the gate
    drain("default")
    assert t.names() == []
    wf = canvas.enqueue()  # the caller tries again
    drain("default")
    assert wf.status == "succeeded"
    assert Counter(t.names()) == {f"m{n}": 1 for n in range(1001)}


@pytest.mark.django_db(transaction=True)
def test_a_workflow_whose_gate_never_opened_is_cancelled_by_the_sweep(
    own_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis lost as a workflow across two queues is about to open its gate: enqueue raises
    RedisUnavailable and none of its steps starts; a minute on, the workers' sweep cancels
    it: every step dead as cancelled, the gate gone, nothing left waiting."""

    def redis_lost(*args: Any, **kwargs: Any) -> Any:
        raise RedisUnavailable("Redis is unreachable (the test's)")

    canvas = chain(step(t.mark, "a"), step(t.mark.using(queue_name="other"), "b"))
    monkeypatch.setattr(enqueueing, "_open", redis_lost)
    with pytest.raises(RedisUnavailable):
        canvas.enqueue()
    monkeypatch.undo()
    default, other = get_queue("default"), get_queue("other")
    [workflow_id] = default.client.zrange(default.keys.workflows, 0, -1)
    wf = Workflow.get(workflow_id.decode())
    assert wf.gate is not None
    drain("default", "other")
    assert t.names() == []
    assert wf.status == "pending"
    assert workflow_module.sweep(default) == 0  # its first look is RESULT_TTL away
    assert wf.status == "pending"
    real = time.time()
    later = SimpleNamespace(time=lambda: real + default.result_ttl + 61, monotonic=time.monotonic)
    monkeypatch.setattr(workflow_module, "time", later)
    workflow_module.sweep(default)  # cancelled (by this clock its steps ended long ago)
    jobs = wf.jobs()
    assert [job.state for job in jobs if job is not None] == ["dead", "dead"]
    assert all("cancelled" in (job.error or "") for job in jobs if job is not None)
    assert default.counts()["waiting"] == other.counts()["waiting"] == 0
    drain("default", "other")
    assert t.names() == []
    assert default.client.llen(default.keys.outbox) == other.client.llen(other.keys.outbox) == 0


# --- threads racing -------------------------------------------------------------------------


def start_joiners(queue: Queue, job_ids: list[str], returned: list[Any]) -> list[Any]:
    """A thread joining each of ``job_ids``: each appends the state it saw end ("gone"
    for a job deleted, as a cancel deletes one, JobNotFound)."""

    def join(job_id: str) -> None:
        try:
            returned.append(queue.join(job_id, timeout=90).state)
        except JobNotFound:
            returned.append("gone")

    threads = [threading.Thread(target=join, args=(i,), daemon=True) for i in job_ids]
    for thread in threads:
        thread.start()
    return threads


def joined_count(queue: Queue, job_id: str) -> int:
    """How many wait for the job; read as the library reads, waiting for a free connection
    (the joiners' scripts may hold all of the pool's for a moment)."""
    job = queue.keys.job(job_id)
    return int(with_connection(queue.client, lambda: queue.client.hget(job, "jw")) or 0)


def test_threads_joining_the_same_and_different_jobs_are_all_woken(
    real_queues: tuple[Queue, Queue], monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 threads join one job, 60 others 30 jobs (two each), across two queues; the
    jobs end (done, dead, cancelled: deleted): every join returns as the job ended, woken
    by its end (the fallback look every JOIN_RECHECK s is put off past the test's
    patience)."""
    monkeypatch.setattr(joining, "JOIN_RECHECK", 300.0)
    default, other = real_queues
    one = default.enqueue(TASK, [0])
    many = [(default if n % 2 else other).enqueue(TASK, [n]) for n in range(30)]
    returned: list[Any] = []
    threads = start_joiners(default, [one.id] * 100, returned)
    for job in many:
        threads += start_joiners(get_queue(job.queue), [job.id] * 2, returned)
    wait_for(lambda: joined_count(default, one.id) == 100, 60, "100 joiners counted")
    for job in many:
        wait_for(lambda j=job: joined_count(get_queue(j.queue), j.id) == 2, 60)
    run_one(default, one)
    for n, job in enumerate(many):
        queue = get_queue(job.queue)
        if n % 3 == 2:
            assert queue.cancel(job.id)
        else:
            [leased] = queue.pop()
            assert leased.id == job.id
            assert queue.ack(leased, "1") if n % 3 == 0 else queue.bury(leased, "boom")
    wait_for(lambda: len(returned) == 160, 60, "every join returned")
    assert Counter(returned) == {"done": 100 + 20, "dead": 20, "gone": 20}


def test_more_than_a_hundred_joiners_of_one_job_are_all_woken_by_its_end(
    real_queues: tuple[Queue, Queue], monkeypatch: pytest.MonkeyPatch
) -> None:
    """120 threads join one job: its end wakes every one (the fallback look is put off
    past the test's patience)."""
    monkeypatch.setattr(joining, "JOIN_RECHECK", 300.0)
    default = real_queues[0]
    job = default.enqueue(TASK, [0])
    returned: list[Any] = []
    start_joiners(default, [job.id] * 120, returned)
    wait_for(lambda: joined_count(default, job.id) == 120, 60, "120 joiners counted")
    run_one(default, job)
    wait_for(lambda: len(returned) == 120, 30, "every join woken")


@pytest.mark.django_db(transaction=True)
def test_two_cancels_of_one_workflow_at_once(queues: tuple[Queue, Queue]) -> None:
    """Two threads cancel a 2,400-step workflow on two queues (batches of 1,000) at the
    same moment: no step runs, each ends dead once (cancelled, or DependencyFailed when
    the other cancel's cascade got there first), the two reach no step twice, and nothing
    is left waiting or in an outbox."""
    there = t.mark.using(queue_name="other")
    links = [group([step(t.mark, f"h{n}"), step(there, f"t{n}")]) for n in range(1200)]
    wf = chain(*links).enqueue()
    reached: list[int] = []
    barrier = threading.Barrier(2)

    def cancel() -> None:
        barrier.wait()
        reached.append(Workflow.get(wf.id).cancel())

    threads = [threading.Thread(target=cancel) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(reached) == 2
    assert 2 <= sum(reached) <= 2400, reached  # (the first two steps only a cancel ends)
    drain("default", "other")
    assert t.names() == []
    assert wf.progress() == {"waiting": 0, "ready": 0, "running": 0, "done": 0, "dead": 2400}
    for job in wf.jobs():
        assert job is not None
        assert "cancelled" in job.error or job.error_class == DEPENDENCY_FAILED, job.error
        assert job.attempts == 0
    for queue in queues:
        assert queue.counts()["dead"] == 1200
        assert queue.counts()["waiting"] == 0
        assert queue.client.llen(queue.keys.outbox) == 0


def race_dependants_with_the_end(
    queue: Queue, home: Queue, leased: Job, fails: bool
) -> tuple[list[Job], list[bool]]:
    """Eight threads enqueue dependants of ``leased`` in ``queue`` while another ends it
    (dead if ``fails``), all let go at once."""
    children: list[Job] = []
    recorded: list[bool] = []
    barrier = threading.Barrier(9)

    def enqueue_child() -> None:
        barrier.wait()
        children.append(queue.enqueue(TASK, [0], depends_on=[leased]))

    def end() -> None:
        barrier.wait()
        recorded.append(home.bury(leased, "boom") if fails else home.ack(leased, "1"))

    threads = [threading.Thread(target=enqueue_child) for _ in range(8)]
    threads.append(threading.Thread(target=end))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return children, recorded


@pytest.mark.parametrize("where", ["same queue", "across queues"])
def test_dependants_enqueued_as_their_dependency_ends(
    queues: tuple[Queue, Queue], where: str
) -> None:
    """Round after round, eight threads enqueue dependants of a job while another ends it
    (done, or dead): each dependant ends up as its dependency ended (ready, or dead with
    DependencyFailed), never waiting for good, never released by a dead one."""
    default, other = queues
    home = default if where == "same queue" else other
    for round_ in range(15):
        fails = round_ % 3 == 2
        home.enqueue(TASK, [round_])
        [leased] = home.pop()
        children, recorded = race_dependants_with_the_end(default, home, leased, fails)
        assert (len(children), recorded) == (8, [True])
        deliver(home)  # (as a worker's sweep: the calls delivered their own entries)
        deliver(default)
        for child in children:
            found = default.get(child.id)
            if fails:
                assert (found.state, found.error_class) == ("dead", DEPENDENCY_FAILED)
            else:
                assert found.state == "ready", (round_, found.state)
        if not fails:
            released = default.pop(8)
            assert sorted(j.id for j in released) == sorted(c.id for c in children)
            for job in released:
                assert default.ack(job, "1")
    assert default.counts()["waiting"] == 0


def pop_when_due(queue: Queue) -> Job:
    """The next job leased, once one is due (a retry is scheduled, however soon)."""
    leased: list[Job] = []
    wait_for(lambda: leased.extend(queue.pop()) or leased, 30, "a job due")
    [job] = leased
    return job


@pytest.mark.parametrize("where", ["same queue", "across queues"])
def test_a_dependant_enqueued_while_its_dependency_is_retried(
    queues: tuple[Queue, Queue], where: str
) -> None:
    """A dependency that failed once is scheduled for its retry, then running it: a
    dependant enqueued at either moment waits; the retry that succeeds releases it, the
    one that fails for good ends it dead."""
    default, other = queues
    home = default if where == "same queue" else other
    for outcome in ("done", "dead"):
        parent = home.enqueue(TASK, [1], max_attempts=2)
        [first] = home.pop()
        assert home.fail(first, RuntimeError("once"))
        assert state(home, parent) in ("ready", "scheduled")
        while_due = default.enqueue(TASK, [2], depends_on=[parent])
        retry = pop_when_due(home)
        assert retry.id == parent.id
        while_running = default.enqueue(TASK, [3], depends_on=[parent])
        assert [state(default, j) for j in (while_due, while_running)] == ["waiting"] * 2
        if outcome == "done":
            assert home.ack(retry, "1")
        else:
            assert home.fail(retry, RuntimeError("twice"))
        deliver(home)
        for child in (while_due, while_running):
            found = default.get(child.id)
            assert found.state == ("ready" if outcome == "done" else "dead")
            if outcome == "dead":
                assert found.error_class == DEPENDENCY_FAILED
        if outcome == "done":
            released = default.pop(2)
            assert {j.id for j in released} == {while_due.id, while_running.id}
            for job in released:
                assert default.ack(job, "1")


# --- hostile values -------------------------------------------------------------------------

HOSTILE_IDS = [
    "with spaces  and  more ",
    "ünïcödé-ñ",
    "日本語のジョブ",
    "emoji-🙂-🚀",
    "e\u0301\u0301combining",
    "other:looks-like-a-ref",
    "@at-sign",
    "quote'\"back\\slash%s",
    "x" * 200,
    "名" * 200,  # 200 characters, 600 bytes
]


def test_hostile_but_valid_ids_as_dependencies(queues: tuple[Queue, Queue]) -> None:
    """Ids with spaces, unicode, combining marks, what looks like a ref, quotes and the
    longest allowed, in a chain that crosses queues at every link: each waits, is released
    in turn, and its refs read back exactly."""
    default, other = queues
    jobs: list[Job] = []
    for n, job_id in enumerate(HOSTILE_IDS):
        queue = (default, other)[n % 2]
        after = [jobs[-1]] if jobs else []
        jobs.append(queue.enqueue(TASK, [n], job_id=job_id, depends_on=after))
    assert [job.state for job in jobs] == ["ready"] + ["waiting"] * (len(jobs) - 1)
    for n, job in enumerate(jobs):
        queue, theirs = (default, other)[n % 2], (other, default)[n % 2]
        if n:
            assert queue.get(job.id).depends_on == (f"{theirs.name}\t{jobs[n - 1].id}",)
        if n + 1 < len(jobs):
            assert queue.get(job.id).dependants == (f"{theirs.name}\t{jobs[n + 1].id}",)
            assert listed(theirs, jobs[n + 1].id) == ["waiting"]
        [leased] = queue.pop()
        assert leased.id == job.id
        assert queue.ack(leased, "1")
    assert [q.counts()["waiting"] for q in queues] == [0, 0]
    assert [q.client.llen(q.keys.outbox) for q in queues] == [0, 0]


REFUSED_IDS = [
    "tab\there",
    "new\nline",
    "carriage\rreturn",
    "vertical\x0btab",
    "form\x0cfeed",
    "file\x1csep",
    "group\x1dsep",
    "record\x1esep",
    "next\x85line",
    "line\u2028sep",
    "para\u2029sep",
    "nul\x00byte",
    "rtl\u202eoverride",
    "{brace}",
    "",
    "y" * 201,
]


@pytest.mark.parametrize("bad", REFUSED_IDS, ids=[repr(i)[:20] for i in REFUSED_IDS])
def test_ids_with_tab_or_line_like_characters_are_refused(
    queues: tuple[Queue, Queue], bad: str
) -> None:
    """As a new job's id, as a dependency's id, as a TaskResult's: a ValueError before
    anything is written (a tab would make an id of this queue a ref to another, a line
    break two refs)."""
    default = queues[0]
    result = SimpleNamespace(id=bad, task=SimpleNamespace(queue_name="default"))
    attempts = [
        lambda: default.enqueue(TASK, [1], job_id=bad, depends_on=[]),
        lambda: default.enqueue(TASK, [1], depends_on=[bad]),
        lambda: default.enqueue(TASK, [1], depends_on=[result]),
        lambda: default.enqueue_many([{"task": TASK, "job_id": "a", "depends_on": [bad]}]),
    ]
    for attempt in attempts:
        with pytest.raises(ValueError, match="job_id"):
            attempt()
    assert sum(default.counts().values()) == 0


def test_a_job_object_whose_id_holds_a_tab_is_refused(queues: tuple[Queue, Queue]) -> None:
    """A Job whose id holds a tab is refused as a dependency, as a str or TaskResult id is."""
    default, other = queues
    other.enqueue(TASK, [1], job_id="x")
    with pytest.raises(ValueError, match="job_id"):
        default.enqueue(TASK, [2], depends_on=[Job("other\tx", "default", "")])


@pytest.mark.django_db(transaction=True)
def test_dependencies_in_queues_not_configured_are_refused(queues: tuple[Queue, Queue]) -> None:
    """A Job, a TaskResult, a workflow step of a queue not in QUEUES: refused before
    anything is written."""
    default = queues[0]
    result = SimpleNamespace(id="abc", task=SimpleNamespace(queue_name="nowhere"))
    for item in (Job("abc", "nowhere", ""), result):
        with pytest.raises(ValueError, match="'nowhere'"):
            default.enqueue(TASK, [1], depends_on=[item])
    with pytest.raises(InvalidTaskError, match="'nowhere'"):
        chain(step(t.mark, "a"), step(t.mark.using(queue_name="nowhere"), "b")).enqueue()
    assert sum(default.counts().values()) == 0
    assert default.client.zcard(default.keys.workflows) == 0


@pytest.mark.django_db(transaction=True)
def test_every_read_with_redis_away_raises_redis_unavailable(own_server: RedisServer) -> None:
    """The plain reads (a job, a listing, the counts, a workflow and its progress, what a
    job published) raise RedisUnavailable with Redis away, as the scripts do; none a
    redis-py error."""
    default = get_queue("default")
    wf = chain(step(t.mark, "a"), step(t.mark.using(queue_name="other"), "b")).enqueue()
    job_id = wf.steps[0][1]
    reads = {
        "get": lambda: default.get(job_id),
        "get_many": lambda: default.get_many([job_id]),
        "counts": default.counts,
        "jobs": lambda: default.jobs("ready"),
        "parked": lambda: default.jobs("parked"),
        "oldest_ready_age": default.oldest_ready_age,
        "expired_count": default.expired_count,
        "enqueue_options": lambda: default.enqueue_options(job_id),
        "lease_expiry": lambda: default.lease_expiry(job_id),
        "still_dead": lambda: default.still_dead([job_id]),
        "paused": default.paused,
        "published": lambda: default.published(job_id),
        "Workflow.get": lambda: Workflow.get(wf.id),
        "progress": wf.progress,
        "status": lambda: wf.status,
    }
    own_server.stop()
    raised = {}
    try:
        for name, read in reads.items():
            try:
                read()
            except Exception as exc:  # each read's error is the point
                raised[name] = type(exc).__name__
    finally:
        own_server.start()
    assert raised == dict.fromkeys(reads, "RedisUnavailable")
