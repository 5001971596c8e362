"""A healthy Redis never produces an error under many concurrent callers (issue 24, point 1):
1,000 async views in one event loop under each view decorator, and 500 threads waiting on one
Semaphore. Counts of errors are asserted; the time they take is only measured (and printed:
``-s`` shows it), never asserted."""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from typing import Any

import pytest
from django.http import HttpRequest, JsonResponse
from django.test import RequestFactory

from django_redislock import Semaphore, redis_locked, redis_rate_limited
from django_redislock.redis.aio import reset_async_connections
from django_redislock.redis.clients import reset_connections

REQUESTS = 1000
THREADS = 500


@pytest.fixture(params=["redis", "cluster"])
def healthy(request: pytest.FixtureRequest, settings: Any) -> Any:
    """A real Redis (standalone or Cluster) behind redis-py's default pool size."""
    if request.param == "redis":
        server = request.getfixturevalue("redis_server")
        settings.REDISLOCK = {"URL": server.url}
        client = server.client()
        client.flushall()
    else:
        cluster = request.getfixturevalue("redis_cluster")
        settings.REDISLOCK = {"URL": cluster.url, "CLUSTER": True}
    reset_connections()
    reset_async_connections()
    yield request.param
    reset_connections()
    reset_async_connections()


def statuses(view: Any, paths: list[str], **kwargs: Any) -> collections.Counter[int]:
    factory = RequestFactory()

    async def all_at_once() -> list[Any]:
        return await asyncio.gather(
            *(view(factory.post(path), **kwargs, n=i) for i, path in enumerate(paths))
        )

    started = time.perf_counter()
    responses = asyncio.run(all_at_once())
    took = time.perf_counter() - started
    counts = collections.Counter(response.status_code for response in responses)
    print(f"\n{view.__name__}: {dict(counts)} in {took:.2f}s")
    return counts


async def _ok(request: HttpRequest, n: int) -> JsonResponse:
    await asyncio.sleep(0)
    return JsonResponse({"n": n})


def no_errors(counts: collections.Counter[int]) -> bool:
    """Every request was served or told the key was busy (409): none failed."""
    return set(counts) <= {200, 409} and counts[200] > 0


def test_a_thousand_async_views_on_one_key_under_redis_locked(healthy):
    # They queue for one lock: those not served within the timeout are told it is busy.
    @redis_locked("stress:one", ttl=30, timeout=3)
    async def one_key(request: HttpRequest, n: int) -> JsonResponse:
        return await _ok(request, n)

    @redis_locked("stress:one", ttl=30, timeout=0)
    async def one_key_at_once(request: HttpRequest, n: int) -> JsonResponse:
        return await _ok(request, n)

    assert no_errors(statuses(one_key, ["/"] * REQUESTS))
    assert no_errors(statuses(one_key_at_once, ["/"] * REQUESTS))


def test_a_thousand_async_views_on_their_own_keys_under_redis_locked(healthy):
    @redis_locked("stress:{n}", ttl=30, timeout=60)
    async def own_keys(request: HttpRequest, n: int) -> JsonResponse:
        return await _ok(request, n)

    assert statuses(own_keys, ["/"] * REQUESTS) == {200: REQUESTS}


def test_a_thousand_async_views_under_a_limit_of_two(healthy):
    @redis_locked("stress:export", limit=2, ttl=30, timeout=3)
    async def export(request: HttpRequest, n: int) -> JsonResponse:
        return await _ok(request, n)

    assert no_errors(statuses(export, ["/"] * REQUESTS))


def test_a_thousand_async_views_under_redis_rate_limited(healthy):
    @redis_rate_limited("stress:{n}", rate="5/m")
    async def limited(request: HttpRequest, n: int) -> JsonResponse:
        return await _ok(request, n)

    @redis_rate_limited("stress:shared", rate="100/m")
    async def shared(request: HttpRequest, n: int) -> JsonResponse:
        return await _ok(request, n)

    assert statuses(limited, ["/"] * REQUESTS) == {200: REQUESTS}
    assert statuses(shared, ["/"] * REQUESTS) == {200: 100, 429: REQUESTS - 100}


def test_five_hundred_threads_waiting_on_one_semaphore(healthy):
    errors: list[BaseException] = []
    acquired = collections.Counter[str]()
    start = threading.Barrier(THREADS + 1)

    def take() -> None:
        try:
            start.wait()
            with Semaphore("stress:sem", limit=4, ttl=30, timeout=120):
                acquired["yes"] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=take) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    started = time.perf_counter()
    start.wait()
    for thread in threads:
        thread.join(180)
    print(f"\n{THREADS} threads through a Semaphore(limit=4): {time.perf_counter() - started:.2f}s")
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert acquired["yes"] == THREADS
