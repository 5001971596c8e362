"""The operator's queue commands, through ``call_command``, on fakeredis and a real server:
``redislock_stats``, ``redislock_requeue``, ``redislock_purge``."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from django_redislock import Lock, get_queue, get_redis
from django_redislock.management.commands import redislock_purge, redislock_requeue
from django_redislock.queue.queue import Queue
from django_redislock.queue.worker.loop import Worker
from tests.support.counts import job_counts
from tests.support.fixtures import configure_backend

# The worker run here closes stale database connections, as after each job: a database
# test that ran before left one open, which a test without database access may not touch.
pytestmark = pytest.mark.django_db(transaction=True)

QUEUES = {"default": {"MAX_ATTEMPTS": 1}, "mail": {}}


@pytest.fixture(params=["fakeredis", "redis"])
def queue(request: pytest.FixtureRequest, settings: Any) -> Queue:
    configure_backend(request, settings, request.param)
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    return get_queue("default")


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def dead(queue: Queue, count: int) -> list[str]:
    """``count`` jobs that failed their only attempt."""
    queue.enqueue_many([{"task": "tests.tasks.boom"} for _ in range(count)])
    jobs = queue.pop(count)
    for job in jobs:
        queue.fail(job, ValueError("poison"))
    return [job.id for job in jobs]


def test_stats_count_each_state_and_show_the_live_workers(queue: Queue) -> None:
    dead(queue, 2)
    queue.enqueue_many([{"task": "tests.tasks.record", "args": [i]} for i in range(3)])
    queue.enqueue("tests.tasks.record", args=[9], delay=600)
    assert len(queue.pop(1)) == 1
    Worker(["default"]).tracker.beat()  # a worker's registry entry, as its heartbeat writes it

    out, _ = run("redislock_stats", "--json")
    stats = json.loads(out)
    assert stats["queues"]["default"] == {
        "ready": 2,
        "scheduled": 1,
        "running": 1,
        "dead": 2,
        "parked": 0,
        "waiting": 0,
        "oldest_ready_age": stats["queues"]["default"]["oldest_ready_age"],
        "paused": [],
    }
    assert stats["queues"]["default"]["oldest_ready_age"] >= 0
    assert stats["queues"]["mail"] == {
        "ready": 0,
        "scheduled": 0,
        "running": 0,
        "dead": 0,
        "parked": 0,
        "waiting": 0,
        "oldest_ready_age": None,
        "paused": [],
    }
    [worker] = stats["workers"]
    assert worker["queues"] == ["default"]
    assert 0 <= worker["heartbeat_age"] < 60

    table, _ = run("redislock_stats")
    lines = table.splitlines()
    assert lines[0].split() == [
        "queue",
        "ready",
        "scheduled",
        "running",
        "dead",
        "waiting",
        "parked",
        "oldest",
        "ready",
    ]
    assert lines[1].split()[:7] == ["default", "2", "1", "1", "2", "0", "0"]
    assert lines[2].split() == ["mail", "0", "0", "0", "0", "0", "0", "-"]
    assert "1 live worker(s)" in table
    assert f"{worker['id']}: queues default; running 0 of 1" in table

    only_mail = json.loads(run("redislock_stats", "--json", "--queue", "mail")[0])
    assert list(only_mail["queues"]) == ["mail"]
    assert only_mail["workers"] == []  # the worker serves default only


def test_stats_of_an_unknown_queue_is_a_command_error(queue: Queue) -> None:
    with pytest.raises(CommandError, match=r"Unknown queue 'nope'.*default, mail"):
        run("redislock_stats", "--queue", "nope")


def test_requeue_by_id_runs_those_dead_jobs_now_and_says_which_were_not(queue: Queue) -> None:
    first, second, kept = dead(queue, 3)
    ready = queue.enqueue("tests.tasks.record", args=[1]).id
    with pytest.raises(CommandError, match="2 of 4 job"):
        # --id=: a generated id may start with "-"
        run(
            "redislock_requeue",
            "--queue",
            "default",
            f"--id={first}",
            f"--id={second}",
            f"--id={ready}",
            "--id",
            "nope",
        )
    assert {job.id for job in queue.jobs("ready")} == {first, second, ready}
    assert queue.get(first).attempts == 0  # a fresh start
    assert [job.id for job in queue.jobs("dead")] == [kept]


def test_requeue_all_goes_page_by_page_and_steps_over_what_cannot_be_requeued(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redislock_requeue, "BATCH", 3)
    ids = dead(queue, 7)
    # A dead id whose job is gone (a damaged queue): tried once, then stepped over.
    get_redis().zadd(queue.key("dead"), {"ghost": 0})
    out, _ = run("redislock_requeue", "--queue", "default", "--yes")
    assert "Requeued 7 dead job(s) of queue 'default'." in out
    assert "1 could not be" in out
    assert out.count(" of 8…") == 4  # progress, a line per page
    assert {job.id for job in queue.jobs("ready")} == set(ids)
    assert [job.id for job in queue.jobs("dead")] == ["ghost"]


def test_requeue_scheduled_jobs_runs_them_now(queue: Queue) -> None:
    later = queue.enqueue("tests.tasks.record", args=[1], delay=600).id
    out, _ = run("redislock_requeue", "--queue", "default", "--state", "scheduled", "--yes")
    assert "Requeued 1 scheduled job(s)" in out
    assert [job.id for job in queue.jobs("ready")] == [later]


def test_purge_deletes_one_state_in_batches_with_progress(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redislock_purge, "BATCH", 2)
    dead(queue, 5)
    queue.enqueue("tests.tasks.record", args=[1])
    out, _ = run("redislock_purge", "--queue", "default", "--state", "dead", "--noinput")
    assert "Deleted 5 dead job(s) of queue 'default'." in out
    assert [line.strip() for line in out.splitlines()[:3]] == ["2 of 5…", "4 of 5…", "5 of 5…"]
    assert queue.counts() == job_counts(ready=1)
    out, _ = run("redislock_purge", "--queue", "default", "--state", "dead", "--yes")
    assert out.strip() == "No dead jobs in queue 'default'."


@pytest.mark.parametrize(
    "args",
    [
        ("redislock_purge", "--queue", "default", "--state", "ready"),
        ("redislock_requeue", "--queue", "default"),
    ],
)
def test_bulk_changes_ask_first_and_never_guess_without_a_terminal(
    queue: Queue, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
) -> None:
    dead(queue, 1)
    queue.enqueue("tests.tasks.record", args=[1])
    before = queue.counts()
    with pytest.raises(CommandError, match="No terminal to confirm on: pass --yes"):
        run(*args)  # the test's stdin is not a terminal
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    answers: list[str] = []
    monkeypatch.setattr("builtins.input", lambda question: answers.append(question) or "no")
    out, _ = run(*args)
    assert "Type 'yes' to go on" in answers[0]
    assert "1 " in answers[0]  # says how many
    assert "Cancelled; nothing changed." in out
    assert queue.counts() == before
    monkeypatch.setattr("builtins.input", lambda question: "yes")
    run(*args)
    assert queue.counts() != before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("redislock_purge", "--queue", "nope", "--state", "dead"), "Unknown queue 'nope'"),
        (("redislock_requeue", "--queue", "mails", "--yes"), "Unknown queue 'mails'"),
        (("redislock_purge", "--queue", "default", "--state", "running"), "invalid choice"),
        (("redislock_requeue", "--queue", "default", "--state", "ready"), "invalid choice"),
    ],
)
def test_wrong_arguments_are_command_errors(
    queue: Queue, args: tuple[str, ...], message: str
) -> None:
    with pytest.raises(CommandError, match=message):
        run(*args)


def test_stats_and_locks_on_a_cluster(request: pytest.FixtureRequest, settings: Any) -> None:
    """The registry, each queue and the lock shards live on their own hash tags."""
    configure_backend(request, settings, "cluster")
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    dead(get_queue(), 1)
    get_queue("mail").enqueue("tests.tasks.record", args=[1])
    Worker(["default", "mail"]).tracker.beat()
    with Lock("order:1", ttl=30):
        stats = json.loads(run("redislock_stats", "--json")[0])
        locks = json.loads(run("redislock_locks", "--json")[0])
    assert (stats["queues"]["default"]["dead"], stats["queues"]["mail"]["ready"]) == (1, 1)
    assert len(stats["workers"]) == 1
    assert [lock["name"] for lock in locks["locks"]] == ["order:1"]
    assert (
        "Deleted 1 dead job(s)"
        in run("redislock_purge", "--queue", "default", "--state", "dead", "--yes")[0]
    )
