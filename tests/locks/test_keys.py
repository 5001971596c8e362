"""Bad lock names and arguments fail with a clear error before Redis is touched."""

from __future__ import annotations

import math

import pytest

from django_redislock import Lock


@pytest.fixture(autouse=True)
def _unreachable_redis(settings):
    # If anything reached Redis, the error would be RedisUnavailable, not the one expected.
    settings.REDISLOCK = {"URL": "redis://127.0.0.1:1/0"}


@pytest.mark.parametrize(
    ("name", "error", "words"),
    [
        ("", ValueError, "empty"),
        (None, TypeError, "str"),
        (42, TypeError, "str"),
        (b"bytes", TypeError, "str"),
        ("x" * 201, ValueError, "limit is 200"),
        ("a{b}", ValueError, "brace"),
        ("{tag}", ValueError, "brace"),
        ("a}", ValueError, "brace"),
        ("with space", ValueError, "whitespace"),
        ("tab\there", ValueError, "whitespace"),
        ("nl\n", ValueError, "whitespace"),
        ("bell\x07", ValueError, "control"),
    ],
)
def test_bad_names(name, error, words):
    with pytest.raises(error, match=words):
        Lock(name)


def test_good_names():
    for name in ("a", "flash-sale:42", "points:user:7", "x" * 200, "ünïcode:ok", "a/b.c_d"):
        assert Lock(name).name == name


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"ttl": 0}, ValueError, "ttl must be > 0"),
        ({"ttl": -1}, ValueError, "ttl must be > 0"),
        ({"ttl": math.inf}, ValueError, "ttl must be finite"),
        ({"ttl": math.nan}, ValueError, "ttl"),
        ({"ttl": "10"}, TypeError, "ttl must be a number"),
        ({"ttl": True}, TypeError, "ttl must be a number"),
        ({"timeout": -0.1}, ValueError, "timeout must be >= 0"),
        ({"timeout": "1"}, TypeError, "timeout must be a number"),
        ({"wait_replicas": -1}, ValueError, "wait_replicas"),
        ({"wait_replicas": 1.5}, TypeError, "wait_replicas"),
    ],
)
def test_bad_arguments(kwargs, error, words):
    with pytest.raises(error, match=words):
        Lock("name", **kwargs)


def test_bad_acquire_and_extend_arguments():
    lock = Lock("name")
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        lock.acquire(timeout=-1)
    with pytest.raises(TypeError, match="timeout must be a number"):
        lock.acquire(timeout="soon")
    with pytest.raises(ValueError, match="ttl must be > 0"):
        lock.extend(0)


def test_zero_timeout_and_infinite_timeout_are_accepted():
    assert Lock("name", timeout=0).timeout == 0
    assert Lock("name", timeout=math.inf).timeout == math.inf
