"""Enqueueing through the Tasks API takes shortcuts (scalar arguments skip the JSON round
trip, the queue is kept between calls); what comes out is what the long way gives."""

from __future__ import annotations

import enum
import importlib
import json
import pickle
import threading
from typing import Any

import pytest
from django.conf import settings as django_settings

try:  # Django 6
    from django.tasks import task_backends
    from django.tasks.exceptions import InvalidTask, InvalidTaskBackend
except ImportError:  # Django 5.2: the backport
    from django_tasks import task_backends
    from django_tasks.exceptions import InvalidTaskBackendError as InvalidTaskBackend
    from django_tasks.exceptions import InvalidTaskError as InvalidTask

from django_redislock import get_queue, get_redis
from django_redislock.exceptions import JobNotFound
from django_redislock.tasks.redis_task import RedisTask
from django_redislock.tasks.results import FRAMEWORK
from tests.support.fixtures import Backend

from .. import task_examples as examples

BACKEND = "django_redislock.tasks.RedisTaskBackend"
IMMEDIATE = f"{FRAMEWORK}.backends.immediate.ImmediateBackend"


@pytest.fixture
def tasks(backend: Backend, settings: Any) -> Backend:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {}, "mail": {}}}
    settings.TASKS = {"default": {"BACKEND": BACKEND, "QUEUES": []}}
    return backend


class Colour(enum.IntEnum):
    RED = 1


class Name(str):
    pass


SCALARS = [0, -(2**70), 1.5, -0.0, float("inf"), True, None, "", "ünï\u2028code", "\ud800"]


def _typed(values: Any) -> Any:
    return [(type(value), value) for value in values]


@pytest.mark.parametrize(
    "value", [*SCALARS, Colour.RED, Name("text")], ids=lambda v: f"{type(v).__name__}:{v!r}"
)
def test_an_argument_as_json_returns_it(tasks: Backend, value: Any) -> None:
    """Exact types included: an int or str subclass comes back as an int or a str, as the
    worker will receive it."""
    through_json = _typed(json.loads(json.dumps([value])))
    positional, keyword = examples.echo.enqueue(value), examples.echo.enqueue(key=value)
    assert (_typed(positional.args), positional.kwargs) == (through_json, {})
    assert (keyword.args, _typed(keyword.kwargs.values())) == ([], through_json)
    for result in (positional, keyword):
        job = get_queue().get(result.id)
        assert (job.args, job.kwargs) == (result.args, result.kwargs)
        assert examples.echo.get_result(result.id) == result


def test_scalar_arguments_are_not_the_callers_objects(tasks: Backend) -> None:
    kwargs = {"a": 1}
    result = examples.echo.enqueue(1, **kwargs)
    assert type(result.args) is list
    assert result.kwargs == kwargs
    assert result.kwargs is not kwargs


def test_a_changed_setting_applies_to_the_next_enqueue(tasks: Backend, settings: Any) -> None:
    backend = task_backends["default"]
    mail = examples.echo.using(queue_name="mail")
    first = mail.enqueue(1)
    settings.REDISLOCK = {**settings.REDISLOCK, "KEY_PREFIX": "moved"}
    assert task_backends["default"] is backend  # the same backend, TASKS did not change
    second = mail.enqueue(2)
    queue = get_queue("mail")
    assert queue.base.startswith("moved:")
    assert queue.get(second.id).args == [2]
    assert [job.id for job in queue.peek(10)] == [second.id]
    assert first.id != second.id

    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {}}}
    with pytest.raises(InvalidTask, match="Unknown queue 'mail'"):
        mail.enqueue(3)
    assert examples.echo.enqueue(4).args == [4]


def test_a_changed_cache_applies_to_the_next_enqueue(redis_backend: Backend, settings: Any) -> None:
    """REDISLOCK unchanged, the cache it names moved to another database: the backend's
    queue follows the new client."""
    assert redis_backend.url is not None
    cache = {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": redis_backend.url}
    settings.CACHES = {**settings.CACHES, "jobs": cache}
    settings.REDISLOCK = {"CACHE": "jobs", "QUEUES": {"default": {}}}
    settings.TASKS = {"default": {"BACKEND": BACKEND, "QUEUES": []}}
    first = examples.echo.enqueue(1)
    backend = task_backends["default"]
    other_db = redis_backend.url.rsplit("/", 1)[0] + "/1"
    settings.CACHES = {**settings.CACHES, "jobs": {**cache, "LOCATION": other_db}}
    try:
        second = examples.echo.enqueue(2)
        assert task_backends["default"] is backend
        assert get_queue().get(second.id).args == [2]
        with pytest.raises(JobNotFound):
            get_queue().get(first.id)
    finally:
        get_redis().flushdb()


def test_a_setting_assigned_without_a_signal_applies_too(tasks: Backend) -> None:
    """Assigned straight to django.conf.settings (no setting_changed, so the same client),
    KEY_PREFIX applies to the next enqueue, as it does to get_queue."""
    examples.echo.enqueue(1)
    before = django_settings.REDISLOCK
    django_settings.REDISLOCK = {**before, "KEY_PREFIX": "assigned"}
    try:
        result = examples.echo.enqueue(2)
        queue = get_queue()
        assert queue.base.startswith("assigned:")
        assert [job.id for job in queue.peek(10)] == [result.id]
    finally:
        django_settings.REDISLOCK = before


def test_tasks_made_again_and_again_each_enqueue_as_made(tasks: Backend) -> None:
    """The backend keeps what it found out about a task object while that object lives: a
    new object (same function, other options) is never taken for an earlier one."""
    for round_ in range(3):
        for priority in (-5, 0, 7):
            for queue_name in ("default", "mail"):
                result = examples.echo.using(priority=priority, queue_name=queue_name).enqueue(
                    round_
                )
                job = get_queue(queue_name).get(result.id)
                assert (job.priority, job.queue, job.args) == (priority, queue_name, [round_])
                assert result.task.priority == priority
                assert examples.echo.get_result(result.id) == result


def test_a_new_result_is_the_one_the_framework_would_build(tasks: Backend) -> None:
    from django_redislock.tasks import new_results as task_jobs

    # Built field by field on both Django lines: a framework whose TaskResult changed
    # shape goes the long way (its own __init__), and this says so.
    assert task_jobs.FIELD_BY_FIELD
    made = task_jobs.new_result(examples.echo, "an-id", [1, "a"], {"k": None}, "default")
    assert isinstance(made, task_jobs.TaskResult)  # the framework's, with join and progress
    framework = task_jobs.RedisTaskResult(
        task=examples.echo,
        id="an-id",
        status=task_jobs.TaskResultStatus.READY,
        enqueued_at=None,
        started_at=None,
        finished_at=None,
        last_attempted_at=None,
        args=[1, "a"],
        kwargs={"k": None},
        backend="default",
        errors=[],
        worker_ids=[],
    )
    assert made == framework
    assert made.errors is not framework.errors  # lists of its own
    with pytest.raises(ValueError, match="has not finished"):
        made.return_value  # noqa: B018 (the framework's property, as on its own result)
    result = examples.echo.enqueue(1, key="v")
    assert result == examples.echo.get_result(result.id)


def test_a_task_finds_the_backend_the_framework_finds(tasks: Backend, settings: Any) -> None:
    """RedisTaskBackend's tasks (its ``task_class``) keep the backend they looked up, and
    still find the one the framework's own look-up finds: the backend of their alias in
    this thread, a new one once TASKS changes, another alias's through ``using``."""
    echo = examples.echo
    assert isinstance(echo, RedisTask)
    if FRAMEWORK == "django.tasks":  # Django 6 pickles tasks (the backport cannot)
        assert pickle.loads(pickle.dumps(echo.using(priority=3))) == echo.using(priority=3)
    first = task_backends["default"]
    assert echo.get_backend() is first
    assert echo.get_backend() is first
    settings.TASKS = {
        "default": {"BACKEND": BACKEND, "QUEUES": []},
        "immediate": {"BACKEND": IMMEDIATE},
    }
    assert echo.get_backend() is task_backends["default"]
    assert echo.get_backend() is not first
    immediate = echo.using(backend="immediate")
    assert immediate.get_backend() is task_backends["immediate"]
    assert immediate.enqueue(key=1).return_value == {"args": [], "kwargs": {"key": 1}}
    assert echo.enqueue(2).status == "READY"  # the Redis backend again, for the same task

    found: list[tuple[Any, Any]] = []
    thread = threading.Thread(
        target=lambda: found.append((echo.get_backend(), task_backends["default"]))
    )
    thread.start()
    thread.join()
    assert found[0][0] is found[0][1]  # that thread's own, as the framework gives it

    settings.TASKS = {"default": {"BACKEND": BACKEND, "QUEUES": []}}  # "immediate" gone
    for _ in range(2):  # the framework's error, every time: a failed look-up is not kept
        with pytest.raises(InvalidTaskBackend):
            immediate.get_backend()
    assert echo.get_backend() is task_backends["default"]


def test_task_enqueued_reaches_its_receivers_once_the_job_is_in_redis(tasks: Backend) -> None:
    """The receivers are looked up while the job is on its way to Redis, then called as
    ``Signal.send`` calls them: each live receiver for this sender once, after the push;
    an asynchronous one too; none of another sender, none that was collected."""
    import asyncio
    import gc

    from django_redislock.tasks import RedisTaskBackend

    signal = importlib.import_module(f"{FRAMEWORK}.signals").task_enqueued
    heard: list[tuple[str, Any, Any, bool]] = []

    def plain(sender: Any, task_result: Any, signal: Any, **kwargs: Any) -> None:
        in_redis = get_queue().get(task_result.id).enqueued > 0
        heard.append(("plain", sender, task_result, in_redis and signal is not None))

    def other(sender: Any, task_result: Any, **kwargs: Any) -> None:
        heard.append(("other", sender, task_result, False))

    def collected(sender: Any, task_result: Any, **kwargs: Any) -> None:
        heard.append(("collected", sender, task_result, False))

    async def asynchronous(sender: Any, task_result: Any, **kwargs: Any) -> None:
        await asyncio.sleep(0)
        heard.append(("async", sender, task_result, task_result.enqueued_at is not None))

    signal.connect(plain)
    signal.connect(other, sender=object)
    signal.connect(collected)
    del collected
    gc.collect()
    try:
        result = examples.echo.enqueue(1)
        assert heard == [("plain", RedisTaskBackend, result, True)]
        heard.clear()
        signal.connect(asynchronous)
        result = examples.echo.enqueue(2)
        assert heard == [
            ("plain", RedisTaskBackend, result, True),
            ("async", RedisTaskBackend, result, True),
        ]
    finally:
        for receiver in (plain, other, asynchronous):
            signal.disconnect(receiver, sender=object if receiver is other else None)


def test_a_receiver_that_raises_stops_the_enqueue_call_not_the_job(tasks: Backend) -> None:
    """As ``Signal.send``: the receiver's error reaches the caller; the job was pushed."""
    signal = importlib.import_module(f"{FRAMEWORK}.signals").task_enqueued
    ids: list[str] = []

    def failing(sender: Any, task_result: Any, **kwargs: Any) -> None:
        ids.append(task_result.id)
        raise LookupError("receiver failed")

    signal.connect(failing)
    try:
        with pytest.raises(LookupError, match="receiver failed"):
            examples.echo.enqueue(3)
    finally:
        signal.disconnect(failing)
    assert len(ids) == 1
    assert get_queue().get(ids[0]).args == [3]
