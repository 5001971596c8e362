"""``manage.py check`` never crashes on a wrong value: every wrong value of every setting the
app reads is an Error with an id, from ``call_command('check')`` and from the check
functions themselves."""

from __future__ import annotations

import math
from importlib import import_module
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from django_redislock import get_queue
from django_redislock.checks import check_redis_durability, check_settings
from django_redislock.conf import DEFAULTS, QUEUE_DEFAULTS, conf
from django_redislock.queue.worker.schedule import ENTRY_OPTIONS, Scheduler
from django_redislock.tasks.backend import FRAMEWORK

WRONG: dict[str, Any] = {
    "None": None,
    "list": [None],
    "empty list": [],
    "str": "no such thing",
    "int": 7,
    "set": {1},
    "q: None": {"q": None},
    "q: []": {"q": []},
    "q: LEASE x": {"q": {"LEASE": "x"}},
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "negative": -5,
    "huge int": 10**400,
    "huge float": 1e300,
    "True": True,
    "False": False,
}

# The few (setting, value) pairs above that are right.
VALID_KEYS = {
    ("URL", "None"),
    ("CLUSTER", "False"),
    ("LOCK_TTL", "int"),
    ("LOCK_TIMEOUT", "int"),
    ("LOCK_TIMEOUT", "inf"),
    ("LOCK_RETRY_DELAY", "int"),
    ("LOCK_SHARDS", "int"),
    ("MAX_CONNECTIONS", "int"),
    ("REDLOCK_NODES", "empty list"),
    ("METRICS", "True"),
    ("METRICS", "False"),
    ("METRICS_TOKEN", "None"),
    ("HISTORY", "True"),
    ("HISTORY", "False"),
}
FLAGS = ("ON_COMMIT", "EAGER")
VALID_QUEUE_OPTIONS = {(option, "int") for option in QUEUE_DEFAULTS if option not in FLAGS} | {
    *((flag, value) for flag in FLAGS for value in ("True", "False")),
    ("TIME_LIMIT", "None"),  # no limit
}
VALID_ENTRY_OPTIONS = {
    ("every", "int"),
    ("cron", "None"),  # None is "not given": the entry runs on `every`
    ("args", "list"),
    ("args", "empty list"),
    ("kwargs", "q: None"),
    ("kwargs", "q: []"),
    ("kwargs", "q: LEASE x"),
    ("priority", "int"),
    ("priority", "negative"),
    ("catch_up", "True"),
    ("catch_up", "False"),
}
VALID_TASKS = {("QUEUES", "empty list")}


def framework_check() -> list[Any]:
    """The Tasks framework's own check, which runs RedisTaskBackend.check()."""
    backends = import_module(FRAMEWORK).task_backends
    return [message for backend in backends.all() for message in backend.check()]


def assert_reported(expected_id: str, valid: bool) -> None:
    """Nothing raises but SystemCheckError, and a wrong value is an Error with an id."""
    settings_errors = check_settings()
    messages = settings_errors + framework_check()
    durability = check_redis_durability()  # never raises; skipped on wrong settings
    assert durability == [] or not settings_errors
    if valid:
        assert messages == []
        call_command("check")
        return
    assert any(m.id.startswith(expected_id) for m in messages), messages
    assert all(m.id and m.hint for m in messages)
    with pytest.raises(SystemCheckError, match=expected_id.replace(".", r"\.")):
        call_command("check")


@pytest.mark.parametrize("label", WRONG)
def test_a_wrong_redislock(settings: Any, label: str) -> None:
    settings.REDISLOCK = WRONG[label]
    assert_reported("django_redislock.E00", valid=False)


@pytest.mark.parametrize("label", WRONG)
@pytest.mark.parametrize("key", DEFAULTS)
def test_a_wrong_value_of_each_key(settings: Any, key: str, label: str) -> None:
    settings.REDISLOCK = {key: WRONG[label]}
    assert_reported("django_redislock.E0", valid=(key, label) in VALID_KEYS)


@pytest.mark.parametrize("label", WRONG)
@pytest.mark.parametrize("option", QUEUE_DEFAULTS)
def test_a_wrong_queue_option(settings: Any, option: str, label: str) -> None:
    settings.REDISLOCK = {"QUEUES": {"default": {option: WRONG[label]}}}
    assert_reported("django_redislock.E009", valid=(option, label) in VALID_QUEUE_OPTIONS)


@pytest.mark.parametrize("label", WRONG)
@pytest.mark.parametrize("option", ENTRY_OPTIONS)
def test_a_wrong_schedule_option(settings: Any, option: str, label: str) -> None:
    entry = {"task": "tests.tasks.record", "every": 60, option: WRONG[label]}
    settings.REDISLOCK = {"SCHEDULE": {"e": entry}}
    assert_reported("django_redislock.E012", valid=(option, label) in VALID_ENTRY_OPTIONS)


@pytest.mark.parametrize("label", WRONG)
@pytest.mark.parametrize(("option", "expected"), [("QUEUES", "E013"), ("OPTIONS", "E014")])
def test_a_wrong_tasks_backend_option(
    settings: Any, option: str, expected: str, label: str
) -> None:
    settings.TASKS = {
        "default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend", option: WRONG[label]}
    }
    assert_reported(f"django_redislock.{expected}", valid=(option, label) in VALID_TASKS)


@pytest.mark.parametrize("value", [[], "default", None, {"q": None}])
def test_wrong_queues_in_both_settings_at_once(settings: Any, value: Any) -> None:
    settings.REDISLOCK = {"QUEUES": value}
    settings.TASKS = {
        "default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend", "QUEUES": value}
    }
    assert_reported("django_redislock.E0", valid=False)


@pytest.mark.parametrize("value", [[], "default", None, {"q": None}, {"q": []}])
def test_code_reading_a_wrong_queues_says_which_setting(settings: Any, value: Any) -> None:
    # Not a ValueError or TypeError from deep inside: the setting is named.
    settings.REDISLOCK = {"QUEUES": value}
    with pytest.raises(ImproperlyConfigured, match=r"REDISLOCK\['QUEUES'\]"):
        get_queue("default")
    names = conf.QUEUE_NAMES  # what the checks read: never raises
    assert names == (["q"] if isinstance(value, dict) else [])


@pytest.mark.parametrize("value", [[], "sweep", None])
def test_code_reading_a_wrong_schedule_says_which_setting(settings: Any, value: Any) -> None:
    settings.REDISLOCK = {"SCHEDULE": value}
    with pytest.raises(ImproperlyConfigured, match=r"REDISLOCK\['SCHEDULE'\]"):
        Scheduler()
