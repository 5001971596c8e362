"""W004: queues configured, but the default Tasks backend is the framework's Immediate or
Dummy backend (``.enqueue()`` would never reach a queue); E006 names a cache's backend whole."""

from __future__ import annotations

from typing import Any

import django
import pytest
from django.conf import global_settings

from django_redislock.checks import check_redis_durability, check_settings

QUEUES = {"QUEUES": {"default": {}}}
PACKAGE = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"
IMMEDIATE = f"{PACKAGE}.backends.immediate.ImmediateBackend"
DUMMY = f"{PACKAGE}.backends.dummy.DummyBackend"
OURS = "django_redislock.tasks.RedisTaskBackend"


def messages(settings: Any, redislock: Any, tasks: Any) -> list[Any]:
    settings.REDISLOCK = redislock
    settings.TASKS = tasks
    return [m for m in check_settings() if m.id == "django_redislock.W004"]


@pytest.mark.parametrize("backend", [IMMEDIATE, DUMMY], ids=["immediate", "dummy"])
def test_queues_with_the_frameworks_own_backend_warn(settings: Any, backend: str) -> None:
    [warning] = messages(settings, QUEUES, {"default": {"BACKEND": backend}})
    assert not warning.is_serious()  # a warning: tests may mean it
    assert f"TASKS['default']['BACKEND'] is the Tasks framework's {backend!r}" in warning.msg
    assert ".enqueue() does not reach the queues" in warning.msg
    assert f"'BACKEND': {OURS!r}" in warning.hint
    assert "SILENCED_SYSTEM_CHECKS" in warning.hint


def test_the_other_lines_backend_paths_are_known_too(settings: Any) -> None:
    other = "django_tasks" if PACKAGE == "django.tasks" else "django.tasks"
    backend = f"{other}.backends.immediate.ImmediateBackend"
    assert len(messages(settings, QUEUES, {"default": {"BACKEND": backend}})) == 1


def test_tasks_not_set_is_the_frameworks_immediate_backend(settings: Any) -> None:
    settings.REDISLOCK = QUEUES
    if django.VERSION >= (6, 0):  # Django's own default: the framework's Immediate backend
        settings.TASKS = global_settings.TASKS
    else:  # the backport's, when TASKS is not set
        del settings.TASKS
    [warning] = [m for m in check_settings() if m.id == "django_redislock.W004"]
    assert "TASKS (not set) is the Tasks framework's" in warning.msg
    assert "ImmediateBackend" in warning.msg


@pytest.mark.parametrize(
    ("redislock", "tasks"),
    [
        (QUEUES, {"default": {"BACKEND": OURS}}),  # ours
        ({}, {"default": {"BACKEND": IMMEDIATE}}),  # no queues configured
        ({"QUEUES": {}}, {"default": {"BACKEND": IMMEDIATE}}),
        (QUEUES, {"other": {"BACKEND": IMMEDIATE}, "default": {"BACKEND": OURS}}),
        (QUEUES, {"default": {"BACKEND": "myproject.tasks.SubclassOfImmediate"}}),
        # malformed: the framework's own checks say so; this one never crashes
        (QUEUES, []),
        (QUEUES, "django.tasks"),
        (QUEUES, {"default": None}),
        (QUEUES, {"default": {"BACKEND": 42}}),
        (QUEUES, {"default": {"BACKEND": ["a"]}}),
        (QUEUES, {}),
        ({"QUEUES": "default"}, {"default": {"BACKEND": IMMEDIATE}}),  # E003 says it
    ],
)
def test_no_warning_otherwise_and_never_a_crash(settings: Any, redislock: Any, tasks: Any) -> None:
    assert messages(settings, redislock, tasks) == []


def test_tasks_none_never_crashes(settings: Any) -> None:
    # The backport reads None as not set (its Immediate backend); Django 6 refuses it itself.
    found = messages(settings, QUEUES, None)
    assert len(found) == (django.VERSION < (6, 0))


def test_the_warning_does_not_hide_the_deploy_checks(settings: Any) -> None:
    """A warning about the settings is not an error in them: the durability check, which
    stands back while the settings have errors, still runs (W002: the test Redis)."""
    settings.REDISLOCK = {**settings.REDISLOCK, **QUEUES}
    settings.TASKS = {"default": {"BACKEND": IMMEDIATE}}
    assert [m.id for m in check_settings()] == ["django_redislock.W004"]
    settings.REDISLOCK = {**settings.REDISLOCK, "URL": "redis://127.0.0.1:1/0"}
    settings.REDISLOCK.pop("CACHE", None)
    assert [m.id for m in check_redis_durability()] == ["django_redislock.W003"]


def test_e006_names_the_backend_whole(settings: Any) -> None:
    backend = "myproject.caches.backends.very_long_module_name.NotARedisCache"
    settings.CACHES = {**settings.CACHES, "other": {"BACKEND": backend}}
    settings.REDISLOCK = {"CACHE": "other"}
    [error] = [m for m in check_settings() if m.id == "django_redislock.E006"]
    assert f"(BACKEND {backend!r})" in error.msg
    settings.CACHES = {**settings.CACHES, "other": {"BACKEND": ["x"] * 100}}
    [error] = [m for m in check_settings() if m.id == "django_redislock.E006"]
    assert "..." in error.msg  # not a path: shortened as any value
