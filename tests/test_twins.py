"""One API per twin (issue 25): each sync class and its asyncio twin expose the same public
names, and each shared method takes the same parameters with the same defaults (the asyncio
one is awaited)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from django_redislock import (
    AsyncLock,
    AsyncMultiLock,
    AsyncRateLimit,
    AsyncReadWriteLock,
    AsyncSemaphore,
    AsyncStock,
    Lock,
    MultiLock,
    RateLimit,
    ReadWriteLock,
    Semaphore,
    Stock,
)
from django_redislock.locks.async_read_write import AsyncReadWriteSide
from django_redislock.locks.read_write import ReadWriteSide

TWINS = [
    (Lock, AsyncLock),
    (MultiLock, AsyncMultiLock),
    (ReadWriteLock, AsyncReadWriteLock),
    (ReadWriteSide, AsyncReadWriteSide),
    (Semaphore, AsyncSemaphore),
    (Stock, AsyncStock),
    (RateLimit, AsyncRateLimit),
]


def public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def parameters(member: Any) -> list[tuple[str, Any, Any]]:
    signature = inspect.signature(member)
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


@pytest.mark.parametrize(("sync", "asyncio"), TWINS, ids=lambda cls: cls.__name__)
def test_twins_expose_the_same_names(sync: type, asyncio: type) -> None:
    assert public(sync) == public(asyncio)


@pytest.mark.parametrize(("sync", "asyncio"), TWINS, ids=lambda cls: cls.__name__)
def test_twins_take_the_same_parameters(sync: type, asyncio: type) -> None:
    assert parameters(sync.__init__) == parameters(asyncio.__init__)
    for name in sorted(public(sync)):
        mine, theirs = inspect.getattr_static(sync, name), inspect.getattr_static(asyncio, name)
        if isinstance(mine, property) or isinstance(theirs, property):
            assert isinstance(mine, property) and isinstance(theirs, property), name  # noqa: PT018
            continue
        if callable(getattr(sync, name)):
            assert parameters(getattr(sync, name)) == parameters(getattr(asyncio, name)), name
            if inspect.iscoroutinefunction(getattr(asyncio, name)):
                assert not inspect.iscoroutinefunction(getattr(sync, name)), name
