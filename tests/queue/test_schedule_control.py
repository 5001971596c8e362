"""Operating a SCHEDULE entry (issue 30): a pause lives in Redis and is kept by every
scheduler, a restarted one too; resume runs the next tick, never the ones passed while
paused; a run now is one job per nonce, however many callers race; the state read back
says which job ran last and how it ended."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from django_redislock import get_queue, get_redis
from django_redislock.exceptions import RedisUnavailable
from django_redislock.queue.worker.loop import Worker
from django_redislock.queue.worker.schedule import Scheduler
from django_redislock.queue.worker.schedule_keys import FOREVER, entry_keys
from django_redislock.queue.worker.schedule_state import (
    checked_nonce,
    entry_named,
    entry_states,
    new_nonce,
    pause_entry,
    resume_entry,
    run_entry_now,
)
from tests.support.fixtures import Backend
from tests.support.servers import free_port
from tests.support.waiting import wait_for

T0 = 1_700_000_040.0  # in the past (jobs for its ticks are ready), a whole multiple of 60 s
TICK = 60_000  # ms


def ids(prefix: str = "schedule:") -> list[str]:
    """The ready jobs of queue "default" (entry "poison" enqueues into "mail")."""
    return sorted(job.id for job in get_queue().jobs("ready", 0, 1000) if job.id.startswith(prefix))


def ms(epoch: float) -> int:
    return round(epoch * 1000)


def test_a_paused_entry_is_skipped_by_every_scheduler_until_resumed(sched: Backend) -> None:
    sweep, backfill = entry_named("sweep"), entry_named("backfill")
    Scheduler().run_pending(T0)  # first sight: T0 claimed
    assert pause_entry(sweep, by="ops")
    assert pause_entry(backfill)
    assert not pause_entry(sweep, by="someone else")  # paused already: kept as it was
    for minute in range(1, 6):  # five ticks pass, seen by new schedulers (restarted workers)
        Scheduler().run_pending(T0 + 60 * minute + 1)
    assert ids() == []
    state = {s.entry.name: s for s in entry_states([sweep, backfill])}
    assert state["sweep"].paused
    assert state["sweep"].paused_by == "ops"
    assert state["sweep"].paused_at is not None
    assert state["sweep"].last_tick == T0  # the claim before the pause is kept
    # Resumed at T0 + 5 min 30 s: the tick of 5 min was passed while paused, and is not run,
    # nor (catch_up or not) any other: the next is T0 + 6 min.
    assert resume_entry(sweep, now=T0 + 330)
    assert resume_entry(backfill, now=T0 + 330)
    assert not resume_entry(sweep, now=T0 + 330)
    Scheduler().run_pending(T0 + 331)
    assert ids() == []
    Scheduler().run_pending(T0 + 361)
    assert ids() == [f"schedule:backfill:{ms(T0 + 360)}", f"schedule:sweep:{ms(T0 + 360)}"]
    assert not entry_states([sweep])[0].paused


def test_a_new_entry_paused_before_its_first_tick_starts_at_its_next_tick(
    sched: Backend,
) -> None:
    sweep = entry_named("sweep")
    assert pause_entry(sweep)  # nothing was ever claimed
    assert entry_states([sweep])[0].last_tick is None
    Scheduler().run_pending(T0 + 5)
    assert resume_entry(sweep, now=T0 + 10)
    Scheduler().run_pending(T0 + 11)
    assert ids("schedule:sweep:") == []
    Scheduler().run_pending(T0 + 61)
    assert ids("schedule:sweep:") == [f"schedule:sweep:{ms(T0 + 60)}"]


def test_no_tick_is_enqueued_after_a_pause_returns_however_schedulers_race(
    sched: Backend,
) -> None:
    """Schedulers in threads walk through ticks while the entry is paused: every tick
    enqueued is at most the one the pause kept, so none got in after it."""
    sweep = entry_named("sweep")
    Scheduler().run_pending(T0)
    minute = [0]
    stop = threading.Event()
    running = threading.Barrier(5)

    def schedule() -> None:
        scheduler = Scheduler()
        running.wait()
        while not stop.is_set():
            scheduler.run_pending(T0 + 60 * minute[0] + 1)

    threads = [threading.Thread(target=schedule) for _ in range(4)]
    for thread in threads:
        thread.start()
    running.wait()
    tick = entry_keys(get_queue().keys, "sweep").tick
    kept = None
    for step in range(1, 40):
        minute[0] = step
        if step < 20:  # the schedulers claim each tick, racing
            wait_for(lambda: int(get_redis().get(tick)) == ms(T0 + 60 * minute[0]))
        elif step == 20:  # paused while they race for this one
            assert pause_entry(sweep)
            kept = entry_states([sweep])[0].last_tick
    stop.set()
    for thread in threads:
        thread.join(30)
    assert kept is not None
    enqueued = [int(i.rsplit(":", 1)[1]) for i in ids("schedule:sweep:")]
    assert len(enqueued) >= 19
    assert max(enqueued) <= ms(kept)
    assert len(enqueued) == len(set(enqueued))


def test_a_run_now_is_enqueued_once_per_nonce_however_many_race(sched: Backend) -> None:
    sweep = entry_named("sweep")
    nonce = new_nonce()
    got: list[Any] = []
    start = threading.Barrier(8)

    def run() -> None:
        start.wait()
        got.append(run_entry_now(sweep, str(nonce)))

    threads = [threading.Thread(target=run) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len([job for job in got if job is not None]) == 1
    assert ids() == [f"schedule:sweep:now:{nonce}"]
    job = get_queue().get(f"schedule:sweep:now:{nonce}")
    assert (job.task, job.args, job.state) == ("tests.tasks.record", [1], "ready")
    assert run_entry_now(sweep, nonce - 1) is None  # older than the last one: refused
    assert run_entry_now(sweep, nonce + 1) is not None
    # Without a nonce (the command), each call is one more job, even right after another.
    assert run_entry_now(sweep) is not None
    assert run_entry_now(sweep) is not None
    assert len(ids("schedule:sweep:now:")) == 4


def test_a_run_now_of_a_paused_entry_runs_and_its_ticks_stay_paused(sched: Backend) -> None:
    sweep = entry_named("sweep")
    Scheduler().run_pending(T0)
    pause_entry(sweep)
    job = run_entry_now(sweep)
    assert job is not None
    assert ids("schedule:sweep:") == [job.id]
    Scheduler().run_pending(T0 + 61)
    assert ids("schedule:sweep:") == [job.id]
    assert entry_states([sweep])[0].paused


def test_the_last_run_is_the_latest_job_kept_and_says_how_it_ended(sched: Backend) -> None:
    sweep, poison, backfill = entry_named("sweep"), entry_named("poison"), entry_named("backfill")
    scheduler = Scheduler()
    scheduler.run_pending(T0)
    states = entry_states([sweep, poison, backfill])
    assert [s.last_run for s in states] == [None, None, None]  # a first claim runs nothing
    scheduler.run_pending(T0 + 61)
    last = entry_states([sweep])[0].last_run
    assert last is not None
    assert (last.job_id, last.outcome, last.run_now) == (
        f"schedule:sweep:{ms(T0 + 60)}",
        "pending",
        False,
    )
    Worker(["default", "mail", "retrying"], burst=True).run()
    sweep_state, poison_state, flaky_state = entry_states([sweep, poison, entry_named("flaky")])
    assert sweep_state.last_run is not None
    assert sweep_state.last_run.outcome == "succeeded"
    assert sweep_state.last_run.outcome_at is not None
    assert poison_state.last_run is not None
    assert poison_state.last_run.outcome == "dead"
    assert flaky_state.last_run is not None
    assert flaky_state.last_run.outcome == "failed"  # an attempt failed; it runs again
    # A run now after the tick is the last run.
    job = run_entry_now(sweep)
    assert job is not None
    last = entry_states([sweep])[0].last_run
    assert last is not None
    assert (last.job_id, last.run_now, last.outcome) == (
        job.id,
        True,
        "pending",
    )


def test_an_unreadable_pause_record_or_claim_is_shown_and_the_others_still_read(
    sched: Backend,
) -> None:
    sweep, backfill, poison = entry_named("sweep"), entry_named("backfill"), entry_named("poison")
    keys = entry_keys(get_queue().keys, "sweep")
    get_redis().rpush(keys.paused, "planted")
    get_redis().hset(entry_keys(get_queue().keys, "backfill").tick, "x", "y")
    Scheduler().run_pending(T0)
    sweep_state, backfill_state, poison_state = entry_states([sweep, backfill, poison])
    assert sweep_state.paused
    assert "pause record is unreadable" in sweep_state.problem
    assert "tick claim is unreadable" in backfill_state.problem
    assert not poison_state.paused
    assert poison_state.last_tick == T0
    with pytest.raises(redis.ResponseError, match="is a list, not a hash"):
        pause_entry(sweep)
    assert resume_entry(sweep, now=T0)  # clears it
    assert not entry_states([sweep])[0].paused
    assert pause_entry(sweep)


def test_a_claim_put_back_under_a_pause_is_parked_again_by_the_next_pause(
    sched: Backend,
) -> None:
    sweep = entry_named("sweep")
    Scheduler().run_pending(T0)
    pause_entry(sweep)
    tick = entry_keys(get_queue().keys, "sweep").tick
    assert int(get_redis().get(tick)) == FOREVER
    get_redis().set(tick, ms(T0))  # written by hand, say
    assert not pause_entry(sweep)
    assert int(get_redis().get(tick)) == FOREVER


def test_wrong_names_and_nonces_are_value_errors_naming_them(sched: Backend, settings: Any) -> None:
    with pytest.raises(
        ValueError, match=r"No entry 'nope' .*its entries: backfill, flaky, poison, sweep"
    ):
        entry_named("nope")
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "SCHEDULE": {"odd": {"task": "tests.tasks.record", "every": 5, "queue": "nowhere"}},
    }
    with pytest.raises(ValueError, match="names queue 'nowhere', not in QUEUES"):
        entry_named("odd")
    for bad in ("", "12a", "-5", 0, True, FOREVER, "1" * 17, 1.5):
        with pytest.raises(ValueError, match="nonce must be"):
            checked_nonce(bad)
    assert checked_nonce("42") == 42


def test_redis_unreachable_is_redis_unavailable(backend: Backend, settings: Any) -> None:
    settings.REDISLOCK = {
        "URL": f"redis://127.0.0.1:{free_port()}/0",
        "QUEUES": {"default": {}},
        "SCHEDULE": {"sweep": {"task": "tests.tasks.record", "every": 60}},
    }
    sweep = entry_named("sweep")
    for call in (
        lambda: pause_entry(sweep),
        lambda: resume_entry(sweep),
        lambda: run_entry_now(sweep),
        lambda: entry_states([sweep]),
    ):
        with pytest.raises(RedisUnavailable):
            call()
