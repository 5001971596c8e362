"""Keyed concurrency limits (issue 27) as the queue's own calls see them: ``concurrency_key``
templates filled at enqueue, jobs over their key's limit parked in Redis (no worker slot, no
attempt), let go as a permit frees (a job's end, a lapsed lease, a give-back), cancelled or
replaced while parked, and corrupt limit state repaired at the next fetch. On fakeredis, a
real server and Cluster; the real workers' tests are in ``test_worker_concurrency``."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from django_redislock import get_queue
from django_redislock.exceptions import JobNotFound
from django_redislock.queue.job_keys import check_template, render_key
from django_redislock.queue.queue import Queue
from django_redislock.queue.worker.expiry import ExpiredAtStart
from django_redislock.tasks import task
from tests import keyed_tasks
from tests.support.fixtures import Backend

TASK = "tests.tasks.record"


@pytest.fixture
def queue(backend: Backend, settings: Any) -> Queue:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": 30, "MAX_ATTEMPTS": 3, "RETRY_BACKOFF": 0}},
    }
    return get_queue("default")


def keyed(queue: Queue, n: int, key: str = "export:{0}", limit: int = 1, *args: Any) -> Any:
    return queue.enqueue(TASK, [n, *args], concurrency_key=key, concurrency_limit=limit)


def parked(queue: Queue) -> int:
    return int(queue.client.zcard(queue.keys.parked))


def states(queue: Queue, jobs: list[Any]) -> list[str]:
    return [str(queue.get(job.id).state) for job in jobs]


# --- templates ------------------------------------------------------------------------------


def f(user_id: int, fmt: str = "csv", *rest: Any, **more: Any) -> None:
    """A task function to fill templates from."""


def test_a_template_is_filled_from_the_call_by_name_position_and_default():
    assert render_key("export:{user_id}", [42], {}, f) == "export:42"
    assert render_key("export:{user_id}:{fmt}", [], {"user_id": 7}, f) == "export:7:csv"
    assert render_key("{0}-{1}", [1, "a"], {}) == "1-a"
    assert render_key("plain", [], {}) == "plain"


@pytest.mark.parametrize(
    ("template", "args", "kwargs", "message"),
    [
        ("export:{user_id}", [], {}, "reads argument 'user_id', not given"),
        ("export:{2}", [1], {}, "reads argument 2, not given"),
        ("{user_id}", ["x" * 300], {}, "concurrency_key name is 300 characters long"),
        ("{user_id}", ["a b"], {}, "whitespace"),
        ("{user_id}", ["{tag}"], {}, "brace"),
        ("{user_id.pk}", [1], {}, "must name an argument"),
        ("{user_id!r}", [1], {}, "takes no format"),
        ("{user_id", [1], {}, "not a valid template"),
    ],
)
def test_a_key_the_call_cannot_fill_is_a_value_error_naming_it(template, args, kwargs, message):
    with pytest.raises(ValueError, match="concurrency_key") as caught:
        render_key(template, args, kwargs, f)
    assert message in str(caught.value)


def test_a_template_is_checked_against_the_function_at_decoration():
    check_template("export:{user_id}:{0}", f)
    check_template("{anything}", lambda **kw: None)
    with pytest.raises(ValueError, match=r"concurrency_key .* no argument 'who'"):
        check_template("{who}", lambda user_id: None)
    with pytest.raises(ValueError, match="no positional argument 1"):
        check_template("{1}", lambda user_id: None)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"concurrency_key": "k", "concurrency_limit": 0}, ValueError, "concurrency_limit"),
        ({"concurrency_key": "k", "concurrency_limit": 1.5}, TypeError, "concurrency_limit"),
        ({"concurrency_key": "k", "concurrency_limit": True}, TypeError, "concurrency_limit"),
        ({"concurrency_key": ""}, TypeError, "concurrency_key"),
        ({"concurrency_key": 5}, TypeError, "concurrency_key"),
        ({"concurrency_limit": 2}, ValueError, "concurrency_limit needs a concurrency_key"),
    ],
)
def test_bad_options_at_enqueue_name_the_option_and_push_nothing(queue, options, error, message):
    with pytest.raises(error, match=message):
        queue.enqueue(TASK, [1], **options)
    assert queue.counts()["ready"] == 0


def test_the_rendered_key_and_limit_ride_in_the_metadata(queue):
    job = keyed(queue, 42, "export:{0}", 2)
    assert queue.get(job.id).meta["concurrency"] == {"key": "export:42", "limit": 2}
    default = queue.enqueue(TASK, [1], concurrency_key="solo")
    assert queue.get(default.id).meta["concurrency"] == {"key": "solo", "limit": 1}


def test_enqueue_many_items_take_the_options_too(queue):
    jobs = queue.enqueue_many(
        [
            {"task": TASK, "args": [1], "concurrency_key": "u:{0}", "concurrency_limit": 3},
            {"task": TASK, "args": [2], "concurrency_key": "u:{0}", "job_id": "named"},
            {"task": TASK, "args": [3], "concurrency_key": "u:{0}", "unique_by_args": True},
            {"task": TASK, "args": [4]},
        ]
    )
    found = [queue.get(job.id).meta.get("concurrency") for job in jobs]
    assert found == [
        {"key": "u:1", "limit": 3},
        {"key": "u:2", "limit": 1},
        {"key": "u:3", "limit": 1},
        None,
    ]
    with pytest.raises(ValueError, match="reads argument 'who'"):
        queue.enqueue_many([{"task": TASK, "args": [5], "concurrency_key": "{who}"}])
    assert queue.counts()["ready"] == 4  # the bad batch pushed nothing


# --- parking ----------------------------------------------------------------------------------


def test_jobs_over_their_keys_limit_are_parked_and_the_others_start(queue):
    hot = [keyed(queue, 1, "hot", 2) for _ in range(5)]
    cold = [queue.enqueue(TASK, [n]) for n in range(3)]
    got = queue.fetch(10, worker="w1").jobs
    assert sorted(job.id for job in got) == sorted([hot[0].id, hot[1].id] + [c.id for c in cold])
    assert parked(queue) == 3
    assert states(queue, hot[2:]) == ["parked"] * 3
    assert [queue.get(h.id).attempts for h in hot[2:]] == [0, 0, 0]  # not charged
    assert queue.fetch(10, worker="w1").jobs == []  # nothing may start


def test_the_end_of_a_run_lets_the_oldest_parked_job_of_its_key_go(queue):
    hot = [keyed(queue, n, "hot") for n in range(3)]
    (first,) = queue.fetch(10, worker="w1").jobs
    assert first.id == hot[0].id
    assert queue.ack(first)
    (second,) = queue.fetch(10, worker="w1").jobs  # the oldest parked one, and only it
    assert second.id == hot[1].id
    assert queue.retry(second, delay=0)  # a failed attempt frees the permit too
    got = queue.fetch(10, worker="w1").jobs
    assert [job.id for job in got] == [hot[2].id]  # its turn; the retried one waits behind
    assert states(queue, [hot[1]]) == ["parked"]


def test_a_parked_jobs_priority_and_arrival_keep_their_order(queue):
    low = queue.enqueue(TASK, [0], concurrency_key="k")
    later = queue.enqueue(TASK, [1], concurrency_key="k")
    urgent = queue.enqueue(TASK, [2], concurrency_key="k", priority=10)
    assert [job.id for job in queue.fetch(1, worker="w").jobs] == [urgent.id]
    queue.fetch(5, worker="w")  # parks the other two
    assert parked(queue) == 2
    (running,) = [j for j in [queue.get(urgent.id)] if j.state == "running"]
    queue.ack(running)
    assert [job.id for job in queue.fetch(5, worker="w").jobs] == [low.id]
    queue.ack(queue.get(low.id))
    assert [job.id for job in queue.fetch(5, worker="w").jobs] == [later.id]


def test_a_give_back_and_a_lapsed_lease_free_the_permit(queue):
    a, b, _ = (keyed(queue, n, "k") for n in range(3))
    (first,) = queue.fetch(5, worker="w").jobs
    assert queue.release([first]) == 1  # never started: back, and its permit freed
    got = queue.fetch(5, worker="w", lease=0.05).jobs
    assert [job.id for job in got] == [a.id]
    time.sleep(0.1)  # the lease runs out: the next fetch takes it back, permit included
    swept = queue.fetch(5, worker="w2")  # (the jobs it sent back to ready: for the next one)
    got = swept.jobs or queue.fetch(5, worker="w2").jobs
    assert swept.jobs or swept.wait == 0
    assert len(got) == 1  # the lapsed one or the one its freed permit let go, not both
    assert got[0].id in (a.id, b.id)
    assert parked(queue) == 2


def test_a_parked_job_can_be_cancelled_and_is_never_let_go_again(queue):
    _, b, c = (keyed(queue, n, "k") for n in range(3))
    (first,) = queue.fetch(5, worker="w").jobs
    assert queue.cancel(b.id)
    assert parked(queue) == 1
    with pytest.raises(JobNotFound):
        queue.get(b.id)
    queue.ack(first)
    assert [job.id for job in queue.fetch(5, worker="w").jobs] == [c.id]


def test_enqueueing_a_parked_id_again_keeps_it_and_replace_takes_it_off_the_parked_set(queue):
    queue.enqueue(TASK, [0], concurrency_key="k")
    queue.enqueue(TASK, [1], concurrency_key="k", job_id="second")
    (first,) = queue.fetch(5, worker="w").jobs
    assert states(queue, [queue.get("second")]) == ["parked"]
    queue.enqueue(TASK, [2], concurrency_key="k", job_id="second")
    assert queue.get("second").args == [1]  # still pending (parked): kept
    queue.enqueue(TASK, [3], job_id="second", replace=True, delay=3600)
    assert parked(queue) == 0
    assert queue.get("second").state == "scheduled"
    queue.ack(first)
    assert queue.fetch(5, worker="w").jobs == []  # not let go: it is scheduled now


def test_the_permit_of_each_key_is_counted_alone(queue):
    for user in range(4):
        for _ in range(2):
            keyed(queue, user, "export:{0}", 1)
    got = queue.fetch(20, worker="w").jobs
    assert sorted(job.args[0] for job in got) == [0, 1, 2, 3]
    assert parked(queue) == 4


# --- corrupt state ----------------------------------------------------------------------------


def test_a_permit_held_by_a_job_no_longer_running_is_taken_back_at_the_next_fetch(queue, caplog):
    job = keyed(queue, 1, "k")
    queue.client.zadd(queue.keys.held, {"k\x00ghost": 0})  # left by a job long gone
    fetched = queue.fetch(5, worker="w")
    assert [j.id for j in fetched.jobs] == [job.id]
    assert "{permit}k ghost" in fetched.lost
    ExpiredAtStart().lost(fetched.lost)  # what the worker logs of it
    assert "concurrency key 'k' was held by job ghost" in caplog.text


def test_a_held_set_that_is_not_a_sorted_set_is_set_aside_and_no_job_is_lost(queue):
    jobs = [keyed(queue, n, "k") for n in range(2)]
    queue.client.set(queue.keys.held, "garbage")
    fetched = queue.fetch(5, worker="w")
    assert [j.id for j in fetched.jobs] == [jobs[0].id]
    assert f"{{limits}}{queue.keys.held}" in fetched.lost
    queue.ack(fetched.jobs[0])
    assert [j.id for j in queue.fetch(5, worker="w").jobs] == [jobs[1].id]


def test_a_malformed_concurrency_in_the_metadata_sets_that_job_aside_alone(queue):
    bad = queue.enqueue(TASK, [0], meta={"concurrency": {"key": "", "limit": 1}})
    good = keyed(queue, 1, "k")
    got = queue.fetch(5, worker="w").jobs
    assert [j.id for j in got] == [good.id]
    dead = queue.get(bad.id)
    assert dead.state == "dead"
    assert "concurrency" in dead.error


def test_a_parked_member_is_the_key_its_order_and_the_id(queue):
    keyed(queue, 0, "k")
    second = keyed(queue, 1, "k")
    queue.fetch(5, worker="w")
    (member,) = queue.client.zrange(queue.keys.parked, 0, -1)
    key, rest = member.split(b"\x00")
    assert key == b"k"
    assert rest.endswith(second.id.encode())
    assert len(rest) == 16 + len(second.id)
    assert json.loads(queue.client.hget(queue.keys.job(second.id), "m"))["concurrency"]


# --- through the Tasks API --------------------------------------------------------------------


def test_a_tasks_template_is_filled_from_each_calls_arguments(queue, settings):
    settings.TASKS = {
        "default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend", "QUEUES": []}
    }
    first = keyed_tasks.export.enqueue(5, 1)
    by_name = keyed_tasks.export.enqueue(n=2, user=6)
    assert queue.get(first.id).meta["concurrency"] == {"key": "export:5", "limit": 2}
    assert queue.get(by_name.id).meta["concurrency"] == {"key": "export:6", "limit": 2}
    assert keyed_tasks.export.get_result(first.id).task == keyed_tasks.export
    solo = keyed_tasks.export.using(concurrency_key="all", concurrency_limit=1).enqueue(1, 1)
    assert queue.get(solo.id).meta["concurrency"] == {"key": "all", "limit": 1}


def test_a_task_whose_template_names_no_argument_is_refused_when_declared():
    with pytest.raises(ValueError, match=r"concurrency_key 'x:\{missing\}': the task has no"):

        @task(concurrency_key="x:{missing}")
        def job(user: int) -> None: ...


# --- rate keys --------------------------------------------------------------------------------


def test_a_rate_key_lets_that_many_start_per_window_and_parks_the_rest_until_allowed(queue):
    jobs = [queue.enqueue(TASK, [n], rate_key="stripe:{0}", rate="2/5s") for n in [7] * 4]
    other = queue.enqueue(TASK, [8], rate_key="stripe:{0}", rate="2/5s")
    got = queue.fetch(10, worker="w")
    assert sorted(j.id for j in got.jobs) == sorted([jobs[0].id, jobs[1].id, other.id])
    assert parked(queue) == 2
    assert 4000 < got.wait * 1000 <= 5000  # until the first start leaves the window
    assert queue.get(jobs[2].id).meta["rate_limit"] == {
        "key": "stripe:7",
        "count": 2,
        "period": 5000,
    }
    for job in got.jobs:  # the ends of the runs change nothing: starts are what count
        queue.ack(job)
    assert queue.fetch(10, worker="w").jobs == []


def test_a_rate_parked_job_starts_once_its_window_allows(queue):
    first = queue.enqueue(TASK, [1], rate_key="k", rate="1/1s")
    second = queue.enqueue(TASK, [2], rate_key="k", rate="1/1s")
    started = time.time()
    (got,) = queue.fetch(5, worker="w").jobs
    assert got.id == first.id
    fetched = queue.fetch(5, worker="w")
    assert fetched.jobs == []
    assert 0 < fetched.wait <= 1
    time.sleep(max(0.0, started + 1.05 - time.time()))
    again = queue.fetch(5, worker="w")  # lets it go; the next fetch (or this one) starts it
    ids = [j.id for j in again.jobs] or [j.id for j in queue.fetch(5, worker="w").jobs]
    assert ids == [second.id]


def test_a_job_with_both_a_concurrency_key_and_a_rate_key_takes_neither_when_parked(queue):
    options = {"concurrency_key": "c", "concurrency_limit": 1, "rate_key": "r", "rate": "5/m"}
    a = queue.enqueue(TASK, [1], **options)
    b = queue.enqueue(TASK, [2], **options)
    (got,) = queue.fetch(5, worker="w").jobs
    assert got.id == a.id
    assert queue.client.zcard(queue.keys.starts) == 1  # b was parked by the limit, unstamped
    queue.ack(got)
    assert [j.id for j in queue.fetch(5, worker="w").jobs] == [b.id]
    assert queue.client.zcard(queue.keys.starts) == 2


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"rate_key": "k"}, ValueError, "rate_key needs a rate"),
        ({"rate": "1/s"}, ValueError, "rate needs a rate_key"),
        ({"rate_key": "k", "rate": "0/s"}, ValueError, "at least one start"),
        ({"rate_key": "k", "rate": "lots"}, ValueError, "rate"),
        ({"rate_key": "{missing}", "rate": "1/s"}, ValueError, "rate_key"),
    ],
)
def test_bad_rate_options_name_the_option(queue, options, error, message):
    with pytest.raises(error, match=message):
        queue.enqueue(TASK, [1], **options)
    assert queue.counts()["ready"] == 0


def test_a_malformed_rate_in_the_metadata_sets_that_job_aside_alone(queue):
    bad = queue.enqueue(TASK, [0], meta={"rate_limit": {"key": "k", "count": 0, "period": 5}})
    good = queue.enqueue(TASK, [1], rate_key="k", rate="1/s")
    assert [j.id for j in queue.fetch(5, worker="w").jobs] == [good.id]
    assert "rate limit" in queue.get(bad.id).error


def test_old_starts_are_trimmed_as_the_key_is_used(queue):
    queue.client.zadd(queue.keys.starts, {f"k\x00{1:015d}old": 0})  # long gone
    queue.enqueue(TASK, [1], rate_key="k", rate="1/s")
    assert len(queue.fetch(5, worker="w").jobs) == 1
    members = queue.client.zrange(queue.keys.starts, 0, -1)
    assert len(members) == 1
    assert not members[0].endswith(b"old")


def test_a_tasks_rate_key_is_filled_from_each_calls_arguments(queue, settings):
    settings.TASKS = {
        "default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend", "QUEUES": []}
    }
    result = keyed_tasks.charge.enqueue("acct_1", 5)
    assert queue.get(result.id).meta["rate_limit"] == {
        "key": "stripe:acct_1",
        "count": 3,
        "period": 1000,
    }
    assert keyed_tasks.charge.get_result(result.id).task == keyed_tasks.charge


def test_a_task_with_a_rate_key_and_no_rate_is_refused_when_declared():
    with pytest.raises(ValueError, match="rate_key needs a rate"):

        @task(rate_key="x:{user}")
        def job(user: int) -> None: ...
