"""The per-task history (``django_redislock.history``): minutes in fixed buckets that roll
over and expire a day after, percentiles within the stated error, task names bounded by the
registered tasks, each task's recent jobs indexed (trimmed, expiring, read back as they are
now), unreadable fields and entries skipped, and a recording that never fails a job. On
fakeredis, a real server and a real Cluster."""

from __future__ import annotations

import logging
import math
import random
import time
from typing import Any

import pytest

from django_redislock import get_queue
from django_redislock.exceptions import RetryLater, TaskImportFailed
from django_redislock.history import recording
from django_redislock.history.durations import RELATIVE_ERROR, TOP, bucket, estimate, percentile
from django_redislock.history.keys import RECENT, SPAN_MINUTES, HistoryKeys
from django_redislock.history.reading import series, summaries, tasks
from django_redislock.history.recent import RecentJobs, recent_jobs
from django_redislock.history.recording import OTHER, Recorder, task_label
from django_redislock.queue.worker.loop import Worker
from tests.support.counts import job_counts
from tests.support.fixtures import Backend
from tests.support.history_checks import assert_kept_a_day, assert_under_hash_tag
from tests.support.servers import free_port

pytestmark = pytest.mark.django_db

TASK = "tests.tasks.record"


def nearest_rank(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


def test_every_bucket_estimate_is_within_the_stated_error() -> None:
    for index in range(1, TOP):
        low, high = 2 ** ((index - 1) / 2) / 1000, 2 ** (index / 2) / 1000
        for seconds in (low, (low + high) / 2, high * 0.999999):
            assert bucket(seconds) == index
            assert abs(estimate(index) / seconds - 1) <= RELATIVE_ERROR + 1e-9
    assert bucket(0.0) == bucket(0.0009) == bucket(float("nan")) == bucket(-1) == 0
    assert bucket(2 * 3600) == bucket(float("inf")) == TOP
    assert percentile({}, 0.5) is None


def test_percentiles_of_known_data_are_within_the_stated_error(backend: Backend) -> None:
    queue = get_queue()
    rng = random.Random(30)
    durations = [rng.lognormvariate(math.log(0.08), 1.2) for _ in range(5000)]
    recorder = Recorder()
    now = time.time()
    for seconds in durations:
        recorder.add(queue, TASK, seconds, failed=False, now=now)
    assert recorder.flush() == 1
    minute = series(queue, TASK, 1, now=now).minutes[-1]
    assert minute.runs == 5000
    for fraction, found in ((0.5, minute.p50), (0.95, minute.p95)):
        assert found is not None
        assert abs(found / nearest_rank(durations, fraction) - 1) <= RELATIVE_ERROR
    (summary,) = summaries(queue, now=now)
    assert (summary.runs, summary.p50, summary.p95) == (5000, minute.p50, minute.p95)


def test_minutes_roll_over_into_their_own_buckets(backend: Backend) -> None:
    queue = get_queue()
    now = time.time()
    boundary = (int(now // 60) // SPAN_MINUTES) * SPAN_MINUTES  # a span's first minute
    if boundary == int(now // 60):  # (the minute before it must be in the past hour)
        boundary -= SPAN_MINUTES
    recorder = Recorder()
    recorder.add(queue, TASK, 0.01, failed=False, now=(boundary - 1) * 60 + 30)
    recorder.add(queue, TASK, 0.02, failed=True, now=boundary * 60 + 1)
    recorder.add(queue, TASK, 0.02, failed=False, now=boundary * 60 + 59)
    recorder.add(queue, TASK, 3.0, failed=False, now=(boundary + 1) * 60)
    recorder.flush()
    minutes = {m.start: m for m in series(queue, TASK, 1, now=now).minutes if m.runs}
    assert {at // 60 - boundary: (m.runs, m.failures) for at, m in minutes.items()} == {
        -1: (1, 0),
        0: (2, 1),
        1: (1, 0),
    }
    assert minutes[(boundary + 1) * 60.0].p50 == estimate(bucket(3.0))
    keys = HistoryKeys(queue.keys)
    span = boundary // SPAN_MINUTES
    assert backend.client.exists(keys.span(TASK, span - 1), keys.span(TASK, span)) == 2
    assert series(queue, TASK, 1, now=now).skipped == 0
    assert len(series(queue, TASK, 24, now=now).minutes) == 24 * 60


def test_each_bucket_expires_a_day_after_its_last_minute(backend: Backend) -> None:
    queue = get_queue()
    now = time.time()
    recorder = Recorder()
    recorder.add(queue, TASK, 0.01, failed=False, now=now, job_id="j1")
    recorder.flush()
    keys = HistoryKeys(queue.keys)
    minute = int(now // 60)
    assert_kept_a_day(backend.client, keys.span(TASK, minute // SPAN_MINUTES), SPAN_MINUTES * 60)
    assert_kept_a_day(backend.client, keys.hour(TASK, minute // 60), 3600)
    assert_kept_a_day(backend.client, keys.tasks)
    assert_kept_a_day(backend.client, keys.recent(TASK))


def test_recent_jobs_are_indexed_trimmed_and_under_the_hash_tag(backend: Backend) -> None:
    queue = get_queue()
    now = time.time()
    recorder = Recorder()
    for n in range(RECENT + 10):  # more than are kept, in one flush
        recorder.add(queue, TASK, 0.01, failed=False, now=now - 100 + n, job_id=f"a{n}")
    assert len(recorder.pending[("default", None)].jobs[TASK]) == RECENT  # (in memory too)
    recorder.started(queue, OTHER, "stray", now=now)
    recorder.flush()
    keys = HistoryKeys(queue.keys)
    index = backend.client.zrevrange(keys.recent(TASK), 0, -1, withscores=True)
    assert [(m.decode(), s) for m, s in index] == [
        (f"a{n}", float(int((now - 100 + n) * 1000))) for n in reversed(range(10, RECENT + 10))
    ]
    assert backend.client.zrange(keys.recent(OTHER), 0, -1) == [b"stray"]
    assert tasks(queue) == [TASK]  # (a start alone is no run)
    for n in range(20):  # a second flush: Redis trims what the two hold together
        recorder.add(queue, TASK, 0.01, failed=False, now=now + n, job_id=f"b{n}")
    recorder.flush()
    newest = [m.decode() for m in backend.client.zrevrange(keys.recent(TASK), 0, -1)]
    assert newest == [f"b{n}" for n in reversed(range(20))] + [
        f"a{n}" for n in reversed(range(30, RECENT + 10))
    ]
    for key in (keys.recent(TASK), keys.recent(OTHER)):
        assert_under_hash_tag(queue, key)
        assert_kept_a_day(backend.client, key)
    assert_under_hash_tag(queue, keys.span(TASK, 1))
    assert_under_hash_tag(queue, keys.hour(TASK, 1))


def test_recent_jobs_read_back_each_as_it_is_now(backend: Backend, settings: Any) -> None:
    """Noted as it starts (so a running job is there), again as it ends; read back in its
    current state, the latest first; an id whose job is gone, or now another task's, is
    counted as gone."""
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"MAX_ATTEMPTS": 1}}}
    queue = get_queue()
    first, second = queue.enqueue(TASK, args=[1]), queue.enqueue(TASK, args=[2])
    (job,) = queue.pop()
    seen: list[Any] = []

    def run(job: Any, watch: Any) -> None:
        recording.RECORDER.flush()
        seen.extend(recent_jobs(queue, TASK).jobs)

    recording.timed_run(queue, job, run, None)
    assert [(r.job.id, r.job.state) for r in seen] == [(first.id, "running")]
    queue.ack(job, "1")  # (kept with its result, as a worker does)
    Worker(["default"], burst=True).run()
    recording.RECORDER.flush()
    found = recent_jobs(queue, TASK)
    assert [(r.job.id, r.job.state) for r in found.jobs] == [
        (second.id, "done"),
        (first.id, "done"),
    ]
    assert found.jobs[0].at >= found.jobs[1].at
    assert (found.gone, found.skipped) == (0, 0)
    keys = HistoryKeys(queue.keys)
    other = queue.enqueue("tests.tasks.boom")
    backend.client.zadd(keys.recent(TASK), {"no-such-job": 1, other.id: 2})
    found = recent_jobs(queue, TASK)
    assert [r.job.id for r in found.jobs] == [second.id, first.id]
    assert (found.gone, found.skipped) == (2, 0)
    queue.enqueue_many([{"task": f"tests.nowhere{n}.task"} for n in range(3)])
    Worker(["default"], burst=True).run()
    recording.RECORDER.flush()
    assert [r.job.state for r in recent_jobs(queue, OTHER).jobs] == ["dead"] * 3
    assert [r.job.task for r in recent_jobs(queue, "tests.tasks.boom").jobs] == ["tests.tasks.boom"]
    with pytest.raises(ValueError, match="task"):
        recent_jobs(queue, "")


def test_an_unreadable_recent_jobs_index_is_skipped_and_counted(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    queue = get_queue()
    job = queue.enqueue(TASK, args=[1])
    keys = HistoryKeys(queue.keys)
    planted = {b"\xff\xfe": 5, b"": 6, b"a{b}": 7, b"x" * 5000: 8, b"tab\there": 9}
    backend.client.zadd(keys.recent(TASK), {**planted, job.id: 10, "later": "inf"})
    found = recent_jobs(queue, TASK)
    assert [r.job.id for r in found.jobs] == [job.id]
    assert (found.gone, found.skipped) == (0, 6)
    # the key of another type: nothing shown, one skipped; the next flush starts it anew
    backend.client.delete(keys.recent(TASK))
    backend.client.set(keys.recent(TASK), "not a sorted set")
    assert recent_jobs(queue, TASK) == RecentJobs(TASK, [], 0, 1)
    recorder = Recorder()
    recorder.add(queue, TASK, 0.01, failed=False, job_id=job.id)
    with caplog.at_level(logging.WARNING, "django_redislock.history.sending"):
        assert recorder.flush() == 1
    assert "was no sorted set: deleted" in caplog.text
    assert tasks(queue) == [TASK]  # what else the flush sent is there
    assert backend.client.type(keys.recent(TASK)) == b"none"
    recorder.add(queue, TASK, 0.01, failed=False, job_id=job.id)
    recorder.flush()
    assert [r.job.id for r in recent_jobs(queue, TASK).jobs] == [job.id]


def test_jobs_under_a_worker_are_recorded_and_unknown_tasks_share_one_bucket(
    backend: Backend, settings: Any
) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"MAX_ATTEMPTS": 1}}}
    queue = get_queue()
    queue.enqueue_many([{"task": TASK, "args": [n]} for n in range(5)])
    queue.enqueue("tests.tasks.boom")
    # hostile or stale paths: each its own name, none gets a history of its own
    queue.enqueue_many([{"task": f"tests.nowhere{n}.task"} for n in range(40)])
    queue.enqueue("tests.tasks.not_a_task")
    Worker(["default"], burst=True).run()
    assert queue.counts() == job_counts(dead=42)
    recording.RECORDER.flush()
    assert tasks(queue) == sorted([OTHER, TASK, "tests.tasks.boom"])
    found = {s.task: (s.runs, s.failures) for s in summaries(queue)}
    assert found == {TASK: (5, 0), "tests.tasks.boom": (1, 1), OTHER: (41, 41)}


def test_with_history_off_workers_record_nothing(backend: Backend, settings: Any) -> None:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "HISTORY": False,
        "QUEUES": {"default": {"MAX_ATTEMPTS": 1}},
    }
    queue = get_queue()
    queue.enqueue_many([{"task": TASK, "args": [n]} for n in range(3)])
    queue.enqueue("tests.tasks.boom")
    Worker(["default"], burst=True).run()
    assert queue.counts() == job_counts(dead=1)  # (the jobs ran all the same)
    recording.RECORDER.flush()
    assert tasks(queue) == []
    assert recent_jobs(queue, TASK).jobs == []
    assert backend.client.keys("*hist*") == []


def test_task_labels_are_the_registered_tasks_only(backend: Backend) -> None:
    assert task_label(TASK) == TASK
    for path in ("tests.tasks.not_a_task", "os.system", "", "x" * 5000, "tests.nope.t"):
        assert task_label(path) == OTHER


def test_unreadable_fields_and_keys_are_skipped_the_rest_shown(backend: Backend) -> None:
    queue = get_queue()
    now = time.time()
    recorder = Recorder()
    recorder.add(queue, TASK, 0.05, failed=True, now=now)
    recorder.add(queue, "tests.tasks.boom", 0.05, failed=True, now=now)
    recorder.flush()
    keys = HistoryKeys(queue.keys)
    minute = int(now // 60)
    span, offset = divmod(minute, SPAN_MINUTES)
    planted = {f"{offset}:h3": "many", f"{offset}:x": "1", "zz:n": "2", f"{offset}:h99": "1"}
    backend.client.hset(keys.span(TASK, span), mapping={**planted, f"{offset}:f": "-4"})
    backend.client.hset(keys.hour(TASK, minute // 60), mapping={"n": "lots", "h2": "1"})
    backend.client.delete(keys.span(TASK, span - 1))
    backend.client.set(keys.span(TASK, span - 1), "not a hash")
    read = series(queue, TASK, 1, now=now)
    assert read.skipped == 6  # five fields, and the key of another type
    last = read.minutes[-1]
    assert (last.runs, last.failures, last.p50) == (1, 0, estimate(bucket(0.05)))
    found = {s.task: s for s in summaries(queue, now=now)}
    assert (found[TASK].runs, found[TASK].failures, found[TASK].skipped) == (0, 1, 1)
    assert found[TASK].p50 == estimate(2)  # (the planted one: a count, read as any)
    assert (found["tests.tasks.boom"].runs, found["tests.tasks.boom"].skipped) == (1, 0)
    with pytest.raises(ValueError, match="hours"):
        series(queue, TASK, 25)
    with pytest.raises(ValueError, match="task"):
        series(queue, "", 1)


def test_a_recording_that_fails_never_fails_the_job(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    queue = get_queue()

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("recording is broken")

    monkeypatch.setattr(recording.RECORDER, "add", broken)
    queue.enqueue(TASK, args=[1])
    with caplog.at_level(logging.ERROR, "django_redislock.history.recording"):
        Worker(["default"], burst=True).run()
    assert queue.counts() == job_counts()
    assert queue.counts(done=True)["done"] == 1
    assert "Could not count a job run in the task history" in caplog.text


def test_a_flush_while_redis_is_away_is_logged_and_dropped(
    backend: Backend, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings.REDISLOCK = {"URL": f"redis://127.0.0.1:{free_port()}/0"}
    queue = get_queue()
    recorder = Recorder()
    recorder.add(queue, TASK, 0.01, failed=False)
    with caplog.at_level(logging.WARNING, "django_redislock.history.recording"):
        assert recorder.flush() == 0
    assert "Could not record the task history of 'default'" in caplog.text
    assert recorder.pending == {}


def test_a_job_given_back_is_no_run_in_the_history(backend: Backend) -> None:
    """A ``RetryLater``, and a job whose task's module failed to import, come back later:
    neither is counted as a run (nor as a failure); a real failure is."""
    queue = get_queue()
    job = queue.enqueue(TASK, args=[1])
    given_back = [RetryLater(5), TaskImportFailed("tests.broken", ImportError("no such"))]
    for exc in given_back:

        def run(job: Any, watch: Any, exc: BaseException = exc) -> None:
            raise exc

        with pytest.raises(type(exc)):
            recording.timed_run(queue, job, run, None)
    recording.RECORDER.flush()
    assert tasks(queue) == []

    def fail(job: Any, watch: Any) -> None:
        raise ValueError("a real failure")

    with pytest.raises(ValueError, match="a real failure"):
        recording.timed_run(queue, job, fail, None)
    recording.RECORDER.flush()
    assert {s.task: (s.runs, s.failures) for s in summaries(queue)} == {TASK: (1, 1)}
