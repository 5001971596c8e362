"""SCHEDULE: each tick enqueued exactly once, whatever number of schedulers race; no burst
of catch-up runs after downtime unless asked; cron in TIME_ZONE."""

from __future__ import annotations

import os
import signal
import threading
from datetime import datetime, timezone
from typing import Any

import pytest

from django_redislock import get_queue, get_redis
from django_redislock.checks import check_settings
from django_redislock.schedule import Entry, Scheduler
from django_redislock.worker import Worker

from .conftest import Backend, Processes
from .test_worker import done, wait_for

TASK = "tests.tasks.record"  # a @task in an installed app: the check resolves it
T0 = 1_700_000_040.0  # in the past (jobs for its ticks are ready), a whole multiple of 60 s


@pytest.fixture
def sched(backend: Backend, settings: Any) -> Backend:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {}},
        "SCHEDULE": {
            "sweep": {"task": "tests.tasks.record", "every": 60, "args": [1]},
            "backfill": {
                "task": "tests.tasks.record",
                "every": 60,
                "args": [2],
                "catch_up": True,
            },
        },
    }
    return backend


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
    last = int(get_redis().get(claim))
    ticks = range(first + 250, last + 1, 250)
    assert len(ticks) >= TICKS
    for tick in ticks:  # every tick ran, as its own job ...
        assert queue.get(f"schedule:tick:{tick}").state == "done", tick
    # ... and none ran twice. (The first claim seen is a job's too when the poll above
    # missed the entry's start, which is claimed without a job.)
    ran = len(ticks) + int(get_redis().exists(queue.key(f"result:schedule:tick:{first}")))
    assert len(done()) == ran
