"""A healthy Redis never produces an error under many concurrent callers, for issue 29's
guards: 1,000 async views under ``@redis_idempotent`` in one event loop (their own keys, one
key at once, one key waited for), 1,000 ``AsyncMultiLock`` s over overlapping names and
1,000 ``AsyncReadWriteLock`` readers with writers among them. Counts are asserted; times
are only printed (``-s``)."""

from __future__ import annotations

import asyncio
import collections
import threading
import time
import uuid
from typing import Any

import pytest
from django.http import HttpRequest, JsonResponse
from django.test import RequestFactory

from django_redislock import AsyncMultiLock, AsyncReadWriteLock, redis_idempotent

REQUESTS = 1000
runs: collections.Counter[str] = collections.Counter()  # how often each view's body ran


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    runs.clear()


def posted(view: Any, keys: list[str]) -> list[Any]:
    factory = RequestFactory()

    async def all_at_once() -> list[Any]:
        return await asyncio.gather(
            *(view(factory.post("/pay/", HTTP_IDEMPOTENCY_KEY=key)) for key in keys)
        )

    started = time.perf_counter()
    responses = asyncio.run(all_at_once())
    counts = collections.Counter(response.status_code for response in responses)
    print(f"\n{view.__name__}: {dict(counts)} in {time.perf_counter() - started:.2f}s")
    return responses


def test_a_thousand_async_views_each_with_its_own_key(healthy):
    @redis_idempotent(anonymous="shared")
    async def own(request: HttpRequest) -> JsonResponse:
        runs["own"] += 1
        await asyncio.sleep(0)
        return JsonResponse({"ok": True}, status=201)

    run = uuid.uuid4().hex
    responses = posted(own, [f"{run}-{n}" for n in range(REQUESTS)])
    assert collections.Counter(r.status_code for r in responses) == {201: REQUESTS}
    assert runs["own"] == REQUESTS
    again = posted(own, [f"{run}-{n}" for n in range(REQUESTS)])
    assert all(r["Idempotent-Replayed"] == "true" for r in again)
    assert runs["own"] == REQUESTS


@pytest.mark.parametrize("timeout", [0, 30])
def test_a_thousand_async_views_sending_one_key(healthy, timeout):
    name = f"one-{timeout}"

    @redis_idempotent(anonymous="shared", timeout=timeout)
    async def one(request: HttpRequest) -> JsonResponse:
        runs[name] += 1
        await asyncio.sleep(0.05)  # still running while the others arrive
        return JsonResponse({"order": uuid.uuid4().hex}, status=201)

    responses = posted(one, [f"{uuid.uuid4().hex}-one"] * REQUESTS)
    assert runs[name] == 1
    served = [r for r in responses if r.status_code == 201]
    assert {r.content for r in served} == {served[0].content}
    if timeout:  # every repeat waited for the first, and got its answer
        assert len(served) == REQUESTS
    else:  # the repeats were told it is in flight, or (once it ended) got its answer
        assert {r.status_code for r in responses} <= {201, 409}


def test_a_thousand_async_multi_locks_over_overlapping_names(healthy):
    names = [f"stress-multi:{uuid.uuid4().hex[:6]}:{n}" for n in range(10)]
    held: collections.Counter[str] = collections.Counter()
    overlaps: list[str] = []

    async def one(n: int) -> bool:
        mine = [names[n % 10], names[(n * 7 + 3) % 10]]
        if mine[0] == mine[1]:
            mine = mine[:1]
        lock = AsyncMultiLock(mine, ttl=30, timeout=60)
        if not await lock.acquire():
            return False
        try:
            for name in mine:
                held[name] += 1
                if held[name] > 1:
                    overlaps.append(name)
            await asyncio.sleep(0)
        finally:
            for name in mine:
                held[name] -= 1
            await lock.release()
        return True

    async def all_at_once() -> list[bool]:
        return await asyncio.gather(*(one(n) for n in range(REQUESTS)))

    started = time.perf_counter()
    got = asyncio.run(all_at_once())
    print(f"\n{REQUESTS} AsyncMultiLocks: {time.perf_counter() - started:.2f}s")
    assert overlaps == []
    assert got == [True] * REQUESTS


def test_a_thousand_async_readers_with_writers_among_them(healthy):
    name = f"stress-rw:{uuid.uuid4().hex[:8]}"
    inside = {"readers": 0, "writers": 0}
    broken: list[str] = []

    async def one(n: int) -> None:
        rw = AsyncReadWriteLock(name, ttl=30, timeout=120)
        writing = n % 100 == 0
        async with rw.write() if writing else rw.read():
            inside["writers" if writing else "readers"] += 1
            if inside["writers"] > 1 or (inside["writers"] and inside["readers"]):
                broken.append(f"{inside}")
            await asyncio.sleep(0)
            inside["writers" if writing else "readers"] -= 1

    async def all_at_once() -> None:
        await asyncio.gather(*(one(n) for n in range(REQUESTS)))

    started = time.perf_counter()
    asyncio.run(all_at_once())
    print(f"\n{REQUESTS} AsyncReadWriteLock holders: {time.perf_counter() - started:.2f}s")
    assert broken == []


def test_three_hundred_threads_resending_one_key_wait_for_its_answer(healthy):
    @redis_idempotent(anonymous="shared", timeout=60)
    def pay(request: HttpRequest) -> JsonResponse:
        runs["threads"] += 1
        time.sleep(0.05)  # still running while the others arrive
        return JsonResponse({"order": uuid.uuid4().hex}, status=201)

    key, factory = f"{uuid.uuid4().hex}-threads", RequestFactory()
    answers: list[Any] = []
    start = threading.Barrier(300)

    def send() -> None:
        start.wait(30)
        answers.append(pay(factory.post("/pay/", HTTP_IDEMPOTENCY_KEY=key)))

    threads = [threading.Thread(target=send) for _ in range(300)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert runs["threads"] == 1
    assert [a.status_code for a in answers] == [201] * 300
    assert len({a.content for a in answers}) == 1
