"""``manage.py redislock_schedule`` (issue 30): list the entries with their state, next tick
and last run; pause, resume and run one now, each logged beside the admin's actions; an
unknown entry or Redis down is a ``CommandError``, never a traceback."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
from django.core.management import CommandError

from django_redislock import get_queue
from django_redislock.queue.worker.schedule import Scheduler
from django_redislock.queue.worker.schedule_state import entry_named, entry_states
from tests.support.fixtures import Backend
from tests.support.fresh_manage import run_manage
from tests.support.servers import free_port

from .test_queue_commands import run

pytestmark = pytest.mark.django_db
SCHEDULE = {
    "sweep": {"task": "tests.tasks.record", "every": 60, "args": [1]},
    "nightly": {"task": "tests.tasks.record", "cron": "0 3 * * *", "queue": "mail"},
    "broken": {"task": "tests.tasks.record"},
}


@pytest.fixture
def sched(backend: Backend, settings: Any) -> Backend:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {}, "mail": {}},
        "SCHEDULE": SCHEDULE,
    }
    return backend


def scheduled_ids() -> list[str]:
    return sorted(job.id for job in get_queue().jobs("ready", 0, 100))


def test_pause_resume_and_run_an_entry(sched: Backend, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "django_redislock.admin")
    Scheduler().run_pending(time.time() - 60)
    out, _ = run("redislock_schedule", "pause", "sweep")
    assert out.strip() == "Paused schedule entry 'sweep'."
    state = entry_states([entry_named("sweep")])[0]
    assert state.paused
    assert state.paused_by == "redislock_schedule"
    out, _ = run("redislock_schedule", "pause", "sweep")
    assert out.strip() == "Schedule entry 'sweep' was paused already."
    assert "Paused schedule entry 'sweep' (redislock_schedule)." in caplog.text
    Scheduler().run_pending(time.time() + 120)
    assert scheduled_ids() == []
    out, _ = run("redislock_schedule", "run", "sweep")  # paused or not, one job
    assert out.startswith("Enqueued job schedule:sweep:now:")
    out, _ = run("redislock_schedule", "run", "sweep")
    [first, second] = scheduled_ids()
    assert first.startswith("schedule:sweep:now:")
    assert second.startswith("schedule:sweep:now:")
    assert "Ran schedule entry 'sweep' now: job schedule:sweep:now:" in caplog.text
    out, _ = run("redislock_schedule", "resume", "sweep")
    assert out.strip() == "Resumed schedule entry 'sweep'. It runs again from its next tick."
    out, _ = run("redislock_schedule", "resume", "sweep")
    assert out.strip() == "Schedule entry 'sweep' was not paused."


def test_list_shows_state_next_tick_and_last_run(sched: Backend) -> None:
    Scheduler().run_pending(time.time() - 60)
    run("redislock_schedule", "pause", "nightly")
    run("redislock_schedule", "run", "sweep")
    out, _ = run("redislock_schedule")  # list is the default
    lines = out.splitlines()
    assert lines[0].split() == ["entry", "state", "next", "tick", "last", "run"]
    sweep = next(line for line in lines if line.startswith("sweep "))
    assert " active " in sweep
    assert "pending" in sweep
    assert "(schedule:sweep:now:" in sweep
    nightly = next(line for line in lines if line.startswith("nightly "))
    assert " paused " in nightly
    assert "[paused by redislock_schedule at " in nightly
    broken = next(line for line in lines if line.startswith("broken "))
    assert "invalid: Schedule entry 'broken' is invalid: give exactly one of" in broken
    listed = json.loads(run("redislock_schedule", "list", "--json")[0])["entries"]
    by_name = {row["name"]: row for row in listed}
    assert by_name["sweep"]["last_run"]["outcome"] == "pending"
    assert by_name["sweep"]["next_tick"] > time.time()
    assert by_name["nightly"]["paused"] is True
    assert by_name["nightly"]["next_tick"] is None
    assert "error" in by_name["broken"]


def test_an_unknown_entry_is_a_command_error_naming_the_entries(sched: Backend) -> None:
    for action in ("pause", "resume", "run"):
        with pytest.raises(CommandError, match=r"No entry 'nope' .*broken, nightly, sweep"):
            run("redislock_schedule", action, "nope")
    assert scheduled_ids() == []


def test_redis_unreachable_is_a_command_error_exiting_3(settings: Any) -> None:
    settings.REDISLOCK = {
        "URL": f"redis://127.0.0.1:{free_port()}/0",
        "QUEUES": {"default": {}},
        "SCHEDULE": {"sweep": SCHEDULE["sweep"]},
    }
    for args in (("list",), ("pause", "sweep"), ("resume", "sweep"), ("run", "sweep")):
        with pytest.raises(CommandError, match=r"Cannot reach Redis \(.*\)\. Check") as err:
            run("redislock_schedule", *args)
        assert err.value.returncode == 3


def test_from_the_command_line_an_unknown_entry_exits_non_zero() -> None:
    result = run_manage(
        "redislock_schedule",
        "pause",
        "nope",
        REDISLOCK={
            "QUEUES": {"default": {}},
            "SCHEDULE": {"sweep": {"task": "tests.tasks.record", "every": 60}},
        },
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("CommandError: No entry 'nope' in REDISLOCK['SCHEDULE']")
    assert "Traceback" not in result.stderr
