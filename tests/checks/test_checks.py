"""Every wrong REDISLOCK setting is a system-check error with an id and a hint."""

from __future__ import annotations

import math

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from django_redislock.checks import check_settings
from tests.support.fresh_manage import run_manage


def ids(settings, value):
    settings.REDISLOCK = value
    errors = check_settings()
    assert all(e.hint for e in errors), "every error carries a hint"
    return [e.id for e in errors]


def test_valid_settings_pass(settings):
    assert ids(settings, {}) == []
    assert ids(settings, {"URL": "redis://localhost:6379/1", "LOCK_TTL": 30}) == []
    assert ids(settings, {"URL": "redis://h:1", "CLUSTER": True}) == []
    assert ids(settings, {"LOCK_TIMEOUT": math.inf, "BUSY_STATUS": 429}) == []
    assert ids(settings, {"QUEUES": {"default": {"LEASE": 60}, "mail": {}}}) == []
    assert ids(settings, {"REDLOCK_NODES": ["default", "redis://a:1", "unix:///tmp/r.sock"]}) == []
    assert ids(settings, {"LOCK_SHARDS": 1}) == ids(settings, {"LOCK_SHARDS": 16384}) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([], ["django_redislock.E001"]),
        ("redis://x", ["django_redislock.E001"]),
        ({"TTL": 5}, ["django_redislock.E002"]),
        ({"CACHE": 3}, ["django_redislock.E003"]),
        ({"CLUSTER": "yes", "URL": "redis://a"}, ["django_redislock.E003"]),
        ({"HISTORY": "off"}, ["django_redislock.E003"]),
        ({"HISTORY": None}, ["django_redislock.E003"]),
        ({"URL": 5}, ["django_redislock.E003"]),
        ({"URL": "http://localhost"}, ["django_redislock.E007"]),
        ({"LOCK_TTL": "15"}, ["django_redislock.E003"]),
        ({"LOCK_TTL": True}, ["django_redislock.E003"]),
        ({"LOCK_TTL": 0}, ["django_redislock.E004"]),
        ({"LOCK_TTL": math.inf}, ["django_redislock.E004"]),
        ({"LOCK_TIMEOUT": -1}, ["django_redislock.E004"]),
        ({"LOCK_RETRY_DELAY": 0}, ["django_redislock.E004"]),
        ({"BUSY_STATUS": 200}, ["django_redislock.E004"]),
        ({"BUSY_STATUS": "409"}, ["django_redislock.E004"]),
        ({"ON_REDIS_ERROR": "ignore"}, ["django_redislock.E004"]),
        ({"CACHE": "missing"}, ["django_redislock.E005"]),
        ({"CACHE": "locmem"}, ["django_redislock.E006"]),
        ({"KEY_PREFIX": "a b"}, ["django_redislock.E008"]),
        ({"KEY_PREFIX": "{x}"}, ["django_redislock.E008"]),
        ({"KEY_PREFIX": ""}, ["django_redislock.E008"]),
        ({"QUEUES": []}, ["django_redislock.E003"]),
        ({"QUEUES": {"bad name": {}}}, ["django_redislock.E009"]),
        ({"QUEUES": {"q": {"LEASES": 3}}}, ["django_redislock.E009"]),
        ({"QUEUES": {"q": {"LEASE": -3}}}, ["django_redislock.E009"]),
        ({"QUEUES": {"q": {"MAX_ATTEMPTS": 2.5}}}, ["django_redislock.E009"]),
        ({"QUEUES": {"q": "fast"}}, ["django_redislock.E009"]),
        ({"REDLOCK_NODES": "redis://a"}, ["django_redislock.E003"]),
        ({"REDLOCK_NODES": ["nowhere"]}, ["django_redislock.E010"]),
        ({"CLUSTER": True}, ["django_redislock.E011"]),
        ({"SCHEDULE": {"a": 1}}, ["django_redislock.E012"]),
        ({"SCHEDULE": []}, ["django_redislock.E012"]),
        ({"SPIN_WAIT": "fast"}, ["django_redislock.E003"]),
        ({"SPIN_WAIT": -0.001}, ["django_redislock.E004"]),
        ({"SPIN_WAIT": 0.5}, ["django_redislock.E004"]),
        ({"SPIN_WAIT": math.inf}, ["django_redislock.E004"]),
        ({"LOCK_SHARDS": "16"}, ["django_redislock.E003"]),
        ({"LOCK_SHARDS": 4.0}, ["django_redislock.E003"]),
        ({"LOCK_SHARDS": True}, ["django_redislock.E003"]),
        ({"LOCK_SHARDS": None}, ["django_redislock.E003"]),
        ({"LOCK_SHARDS": 0}, ["django_redislock.E004"]),
        ({"LOCK_SHARDS": -2}, ["django_redislock.E004"]),
        ({"LOCK_SHARDS": 16385}, ["django_redislock.E004"]),
        ({"LOCK_SHARDS": 10**400}, ["django_redislock.E004"]),
    ],
)
def test_each_mistake_is_reported(settings, value, expected):
    assert ids(settings, value) == expected


def test_several_mistakes_are_all_reported(settings):
    assert ids(settings, {"LOCK_TTL": -1, "BUSY_STATUS": 1, "NOPE": 1}) == [
        "django_redislock.E004",
        "django_redislock.E004",
        "django_redislock.E002",
    ]


def test_manage_py_check_reports_them(settings):
    settings.REDISLOCK = {"LOCK_TTL": 0}
    with pytest.raises(SystemCheckError, match=r"django_redislock\.E004"):
        call_command("check")


def test_manage_py_check_runs_the_task_backend_checks():
    # In a fresh process: nothing but the app may have imported the Tasks framework.
    result = run_manage(
        "check",
        REDISLOCK={"QUEUES": {"default": {}}},
        TASKS={
            "default": {
                "BACKEND": "django_redislock.tasks.RedisTaskBackend",
                "QUEUES": ["default", "mail"],
            }
        },
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("django_redislock.E013") == 1, result.stderr


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"LOCK_TTL": 0.001}, "django_redislock.E004"),  # expires during its own round trips
        ({"LOCK_TTL": 400 * 86400}, "django_redislock.E004"),
        ({"LOCK_TTL": 10**400}, "django_redislock.E004"),  # beyond a float: no crash
        ({"LOCK_RETRY_DELAY": 0.0001}, "django_redislock.E004"),
        ({"LOCK_RETRY_DELAY": 61}, "django_redislock.E004"),
        ({"QUEUES": {"q": {"LEASE": 0.5}}}, "django_redislock.E009"),
        ({"QUEUES": {"q": {"RESULT_TTL": 0.5}}}, "django_redislock.E009"),
        ({"QUEUES": {"q": {"RESULT_TTL": 400 * 86400}}}, "django_redislock.E009"),
        ({"QUEUES": {"q": {"MAX_ATTEMPTS": 0}}}, "django_redislock.E009"),
        ({"QUEUES": {"q": {"MAX_ATTEMPTS": 1001}}}, "django_redislock.E009"),
        ({"QUEUES": {"q": {"RETRY_BACKOFF": 0}}}, "django_redislock.E009"),
        ({"QUEUES": {"q": {"LEASE": 10**400}}}, "django_redislock.E009"),
    ],
)
def test_values_beyond_sane_bounds_are_reported(settings, value, expected):
    settings.REDISLOCK = value
    [error] = check_settings()
    assert error.id == expected
    assert ">" in error.msg  # the message says the bounds


def test_values_at_the_bounds_pass(settings):
    assert ids(settings, {"LOCK_TTL": 0.01, "LOCK_RETRY_DELAY": 0.001}) == []
    options = {"LEASE": 1, "RESULT_TTL": 365 * 86400, "MAX_ATTEMPTS": 1, "RETRY_BACKOFF": 0.01}
    assert ids(settings, {"QUEUES": {"default": options}}) == []
    settings.REDISLOCK = {"QUEUES": {"q": {"LEASE": 0.5}}}
    [error] = check_settings()
    assert "1 to a year" in error.hint  # every queue option's bounds, where they are read


def test_lock_shards_errors_say_what_fits(settings):
    settings.REDISLOCK = {"LOCK_SHARDS": 0}
    (error,) = check_settings()
    assert "LOCK_SHARDS" in error.msg
    assert "a whole number >= 1 and <= 16384" in error.hint
