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

from django.http import HttpRequest, JsonResponse
from django.test import RequestFactory

from django_redislock import Semaphore, redis_locked, redis_rate_limited

REQUESTS = 1000
THREADS = 500


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


def _queue_with_a_job(settings: Any) -> tuple[Any, Any]:
    from django_redislock import get_queue

    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {"LEASE": 30}}}
    queue = get_queue("default")
    return queue, queue.enqueue("tests.tasks.record", [1])


def _joined(queue: Any, job_id: str) -> int:
    from django_redislock.redis.pools import with_connection

    key = queue.keys.job(job_id)
    return int(with_connection(queue.client, lambda: queue.client.hget(key, "jw")) or 0)


def _wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_five_hundred_threads_joining_one_job_are_all_woken_and_read_it(healthy, settings):
    """Each join ends by reading the job back: 500 of them at once share the pool."""
    queue, job = _queue_with_a_job(settings)
    errors: list[BaseException] = []
    ended: collections.Counter[str] = collections.Counter()

    def join() -> None:
        try:
            ended[queue.join(job.id, timeout=120).state] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=join) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    _wait_for(lambda: _joined(queue, job.id) == THREADS, 120, "every thread joined")
    [leased] = queue.pop()
    started = time.perf_counter()
    assert queue.ack(leased, "3")
    for thread in threads:
        thread.join(120)
    print(f"\n{THREADS} threads woken by one job's end: {time.perf_counter() - started:.2f}s")
    assert errors == []
    assert ended == {"done": THREADS}


def test_a_thousand_async_joins_of_one_job_in_one_event_loop(healthy, settings):
    queue, job = _queue_with_a_job(settings)

    async def all_at_once() -> list[Any]:
        joins = [asyncio.ensure_future(queue.ajoin(job.id, timeout=120)) for _ in range(REQUESTS)]
        while await asyncio.to_thread(_joined, queue, job.id) < REQUESTS:
            await asyncio.sleep(0.05)
        [leased] = await asyncio.to_thread(queue.pop)
        assert await asyncio.to_thread(queue.ack, leased, "3")
        return await asyncio.gather(*joins, return_exceptions=True)

    started = time.perf_counter()
    ended = asyncio.run(all_at_once())
    print(f"\n{REQUESTS} async joins of one job: {time.perf_counter() - started:.2f}s")
    assert [e for e in ended if isinstance(e, BaseException)] == []
    assert collections.Counter(job.state for job in ended) == {"done": REQUESTS}


def test_three_hundred_threads_enqueueing_and_reading_jobs_back(healthy, settings):
    """Scripts pass the pool's gate; a job's read and the counts are plain commands beside
    them: under a burst of threads they wait for a connection, never fail."""
    queue, _ = _queue_with_a_job(settings)
    errors: list[BaseException] = []
    read = collections.Counter[str]()

    def work() -> None:
        try:
            for _ in range(10):
                job = queue.enqueue("tests.tasks.record", [1])
                read[queue.get(job.id).state] += 1
                queue.counts()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(300)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    assert errors == []
    assert read == {"ready": 3000}
