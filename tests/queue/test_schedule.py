"""SCHEDULE: each tick enqueued exactly once, whatever number of schedulers race; no burst
of catch-up runs after downtime unless asked; cron in TIME_ZONE."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from datetime import datetime, timezone
from typing import Any

import pytest

from django_redislock import get_queue, get_redis
from django_redislock.checks import check_settings
from django_redislock.exceptions import RedisUnavailable
from django_redislock.queue.worker.loop import Worker
from django_redislock.queue.worker.schedule import Entry, Scheduler
from tests.support.fixtures import Backend, Processes
from tests.support.servers import RedisServer
from tests.support.waiting import wait_for

from .test_worker import done

TASK = "tests.tasks.record"  # a @task in an installed app: the check resolves it
T0 = 1_700_000_040.0  # in the past (jobs for its ticks are ready), a whole multiple of 60 s


def job_ids() -> list[str]:
    return sorted(job.id for job in get_queue().jobs("ready", 0, 1000))


def test_a_tick_is_enqueued_once_and_new_entries_start_at_their_next_tick(sched: Backend) -> None:
    scheduler = Scheduler()
    assert scheduler.run_pending(T0 + 10) == pytest.approx(50)
    assert job_ids() == []  # first sight: the current tick is only claimed
    scheduler.run_pending(T0 + 60)
    scheduler.run_pending(T0 + 61)
    Scheduler().run_pending(T0 + 62)
    tick = round((T0 + 60) * 1000)
    assert job_ids() == [f"schedule:backfill:{tick}", f"schedule:sweep:{tick}"]
    job = get_queue().get(f"schedule:sweep:{tick}")
    assert (job.task, job.args, job.score) == ("tests.tasks.record", [1], tick)


def test_downtime_runs_the_latest_tick_once_unless_catch_up(sched: Backend) -> None:
    scheduler = Scheduler()
    scheduler.run_pending(T0)
    scheduler.run_pending(T0 + 10 * 60 + 5)  # ten ticks were missed
    ids = job_ids()
    assert [i for i in ids if i.startswith("schedule:sweep:")] == [
        f"schedule:sweep:{round((T0 + 600) * 1000)}"
    ]
    backfill = [i for i in ids if i.startswith("schedule:backfill:")]
    assert sorted(backfill) == sorted(
        f"schedule:backfill:{round((T0 + 60 * k) * 1000)}" for k in range(1, 11)
    )


def test_racing_schedulers_enqueue_each_tick_once(sched: Backend) -> None:
    Scheduler().run_pending(T0)
    barrier = threading.Barrier(8)

    def race() -> None:
        scheduler = Scheduler()
        barrier.wait()
        scheduler.run_pending(T0 + 60)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(job_ids()) == 2
    # the failing entries' ticks too, each in its own queue
    assert [len(get_queue(name).jobs("ready", 0, 1000)) for name in ("mail", "retrying")] == [1, 1]


def test_cron_ticks_in_time_zone(settings: Any) -> None:
    settings.TIME_ZONE = "Asia/Kolkata"  # UTC+05:30
    entry = Entry.from_setting("nightly", {"task": "shop.tasks.report", "cron": "0 3 * * *"})
    now = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc).timestamp()
    latest = datetime.fromtimestamp(entry.latest(now), tz=timezone.utc)
    assert latest == datetime(2026, 11, 21, 21, 30, tzinfo=timezone.utc)  # 03:00 IST
    following = datetime.fromtimestamp(entry.next_after(entry.latest(now)), tz=timezone.utc)
    assert following == datetime(2026, 11, 22, 21, 30, tzinfo=timezone.utc)
    every = Entry.from_setting("five", {"task": "a.b", "cron": "*/5 * * * *"})
    at = datetime(2026, 11, 22, 12, 5, tzinfo=timezone.utc).timestamp()
    assert every.latest(at) == at  # exactly on a tick
    assert every.next_after(at) == at + 300


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"every": 5}, "'task'"),
        ({"task": TASK}, "exactly one of"),
        ({"task": TASK, "every": 5, "cron": "* * * * *"}, "exactly one of"),
        ({"task": TASK, "every": 0}, "'every'"),
        ({"task": TASK, "every": True}, "'every'"),
        ({"task": TASK, "cron": "every day"}, "not a valid cron"),
        ({"task": TASK, "every": 5, "args": 1}, "'args'"),
        ({"task": TASK, "every": 5, "priority": 101}, "'priority'"),
        ({"task": TASK, "every": 5, "catch_up": "yes"}, "'catch_up'"),
        ({"task": TASK, "every": 5, "at": 3}, "unknown option"),
        ({"task": TASK, "every": 5, "queue": "mail"}, "not in REDISLOCK['QUEUES']"),
    ],
)
def test_bad_entries_are_system_check_errors(settings: Any, entry: Any, message: str) -> None:
    settings.REDISLOCK = {"SCHEDULE": {"e": entry}}
    [error] = check_settings()
    assert error.id == "django_redislock.E012"
    assert message in error.msg
    assert error.hint


def test_bad_entry_names_are_system_check_errors(settings: Any) -> None:
    settings.REDISLOCK = {"SCHEDULE": {"a{b}": {"task": TASK, "every": 5}}}
    assert [e.id for e in check_settings()] == ["django_redislock.E012"]


def test_good_entries_pass_the_check(settings: Any) -> None:
    settings.REDISLOCK = {
        "QUEUES": {"default": {}, "mail": {}},
        "SCHEDULE": {
            "a": {"task": TASK, "every": 0.5, "args": [1], "kwargs": {"x": 1}},
            "b": {
                "task": TASK,
                "cron": "0 3 * * 1-5",
                "queue": "mail",
                "priority": 5,
                "catch_up": True,
            },
        },
    }
    assert check_settings() == []


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"args": [object()]}, "JSON-serializable"),
        ({"args": [{1, 2}]}, "JSON-serializable"),
        ({"kwargs": {"x": {1}}}, "JSON-serializable"),
        ({"kwargs": {1: "x"}}, "keys of 'kwargs'"),
        ({"task": "tests.tasks.not_a_task"}, "not a task"),
        ({"task": "tests.tasks.missing"}, "does not exist"),
        ({"task": "subprocess.run"}, "not in an installed app"),
        ({"every": 0.05}, "'every'"),
        ({"every": 400 * 86400}, "'every'"),
        ({"every": 10**400}, "'every'"),
        ({"queue": ["mail"]}, "'queue'"),
    ],
)
def test_entries_that_would_fail_every_tick_are_system_check_errors(
    settings: Any, entry: Any, message: str
) -> None:
    settings.REDISLOCK = {"SCHEDULE": {"e": {"task": TASK, "every": 60, **entry}}}
    [error] = check_settings()
    assert error.id == "django_redislock.E012"
    assert message in error.msg, error.msg
    assert "0.1" in error.hint  # the bounds are documented where the error is read


def test_without_the_tasks_framework_the_task_is_an_error_not_a_crash(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on Django 5.2 without the backport: importing django_redislock.tasks raises
    # ImproperlyConfigured.
    from django_redislock.tasks.backend import FRAMEWORK

    monkeypatch.delitem(sys.modules, "django_redislock.tasks.backend")
    monkeypatch.delitem(sys.modules, "django_redislock.tasks.results")
    monkeypatch.delitem(sys.modules, "django_redislock.queue.execution")
    monkeypatch.setitem(sys.modules, f"{FRAMEWORK}.base", None)
    settings.REDISLOCK = {"SCHEDULE": {"e": {"task": TASK, "every": 60}}}
    [error] = check_settings()
    assert error.id == "django_redislock.E012"
    assert "pip install" in error.msg


# --- one bad entry never stops the others (real server) ------------------------------------


@pytest.fixture
def two(redis_backend: Backend, settings: Any) -> Any:
    def configure(first: dict[str, Any]) -> None:
        settings.REDISLOCK = {
            **settings.REDISLOCK,
            "QUEUES": {"default": {}},
            "SCHEDULE": {  # the bad entry first: it used to stop every entry after it
                "bad": {"task": TASK, "every": 60, **first},
                "good": {"task": TASK, "every": 60, "args": [2]},
            },
        }

    return configure


def good_ticks() -> list[str]:
    return [i for i in job_ids() if i.startswith("schedule:good:")]


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("args", [[object()], [{1, 2}]])
def test_an_entry_with_args_that_are_not_json_never_stops_the_others(
    two: Any, args: Any, caplog: pytest.LogCaptureFixture
) -> None:
    two({"args": args})
    with caplog.at_level(logging.ERROR, "django_redislock"):
        scheduler = Scheduler()
        for k in range(4):
            scheduler.run_pending(T0 + 60 * k)
    assert good_ticks() == [f"schedule:good:{round((T0 + 60 * k) * 1000)}" for k in (1, 2, 3)]
    [error] = errors(caplog)  # once, when the worker starts: it never runs
    assert "'bad'" in error
    assert "JSON" in error


def test_an_entry_failing_at_its_ticks_is_logged_once_per_tick(
    two: Any, caplog: pytest.LogCaptureFixture
) -> None:
    two({"queue": "mail"})  # not in QUEUES: get_queue raises at each tick
    scheduler = Scheduler()
    with caplog.at_level(logging.ERROR, "django_redislock"):
        for now in (T0, T0 + 60, T0 + 60.5, T0 + 61, T0 + 120):
            assert scheduler.run_pending(now) == pytest.approx(60 - now % 60)
    assert len(good_ticks()) == 2
    logged = errors(caplog)
    assert len(logged) == 3  # T0, T0 + 60 (looked at three times), T0 + 120
    assert all("'bad'" in line and "mail" in line for line in logged)


def test_a_redis_error_of_one_entry_never_stops_the_others(
    two: Any, caplog: pytest.LogCaptureFixture
) -> None:
    two({})
    scheduler = Scheduler()
    scheduler.run_pending(T0)
    claim = get_queue().key("tick:bad")
    get_redis().delete(claim)
    get_redis().hset(claim, "x", 1)  # GET of the claim now fails with WRONGTYPE
    with caplog.at_level(logging.ERROR, "django_redislock"):
        scheduler.run_pending(T0 + 60)
    assert len(good_ticks()) == 1
    [error] = errors(caplog)
    assert "'bad'" in error
    assert "WRONGTYPE" in error
    get_redis().delete(claim)
    scheduler.run_pending(T0 + 120)  # repaired: it starts again at its next tick
    scheduler.run_pending(T0 + 180)
    assert f"schedule:bad:{round((T0 + 180) * 1000)}" in job_ids()


def test_redis_unreachable_for_every_entry_is_raised_for_the_backoff(settings: Any) -> None:
    with RedisServer() as server:
        settings.REDISLOCK = {
            "URL": server.url,
            "SCHEDULE": {"a": {"task": TASK, "every": 60}, "b": {"task": TASK, "every": 60}},
        }
        scheduler = Scheduler()
        scheduler.run_pending(T0)
        server.stop()
        with pytest.raises(RedisUnavailable):
            scheduler.run_pending(T0 + 60)


def test_the_scheduler_says_redis_is_unreachable_once_per_message(
    settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Running in a worker with Redis gone, the scheduler warns and backs off; each warning
    says "unreachable" once, not wrapped in itself."""
    with RedisServer() as server:
        settings.REDISLOCK = {"URL": server.url, "SCHEDULE": {"a": {"task": TASK, "every": 1}}}
        scheduler = Scheduler()
        server.stop()
        stopping = threading.Event()
        runner = threading.Thread(target=scheduler.run, args=(stopping,))
        with caplog.at_level(logging.WARNING, "django_redislock"):
            runner.start()
            time.sleep(0.5)
            stopping.set()
            runner.join(10)
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("django_redislock")]
    assert warnings  # it said so, more than once while backing off
    for message in warnings:
        assert message.count("unreachable") == 1, message


# --- three worker processes with the same SCHEDULE, on a real server ------------------------

EVERY = 0.25  # exact in binary: tick ms are whole multiples of 250
TICKS = 20


@pytest.mark.processes
def test_three_workers_enqueue_each_tick_exactly_once(
    real_backend: Backend, settings: Any, processes: Processes
) -> None:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": 5}},
        "SCHEDULE": {"tick": {"task": "tests.tasks.record", "every": EVERY, "args": [7]}},
    }
    queue = get_queue()
    claim = queue.key("tick:tick")

    def work() -> None:
        Worker(["default"], concurrency=2, schedule=True).run()

    workers = [processes.start(work) for _ in range(3)]
    wait_for(lambda: get_redis().get(claim) is not None)
    first = int(get_redis().get(claim))
    wait_for(lambda: int(get_redis().get(claim)) >= first + TICKS * 250, timeout=30)
    for worker in workers:
        os.kill(worker.pid, signal.SIGTERM)
    processes.join_all(15)
    # A scheduler may enqueue a tick while the workers drain: run what is left.
    Worker(["default"], burst=True).run()
    last = int(get_redis().get(claim))
    ticks = range(first + 250, last + 1, 250)
    assert len(ticks) >= TICKS
    for tick in ticks:  # every tick ran, as its own job ...
        assert queue.get(f"schedule:tick:{tick}").state == "done", tick
    # ... and none ran twice. (The first claim seen is a job's too when the poll above
    # missed the entry's start, which is claimed without a job.)
    ran = len(ticks) + int(get_redis().exists(queue.key(f"result:schedule:tick:{first}")))
    assert len(done()) == ran
