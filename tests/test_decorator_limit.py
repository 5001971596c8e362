"""``@redis_locked(..., limit=N)``: N requests per key in the view at once (a semaphore), on
sync, async and streaming views, on every backend."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.test import AsyncClient, Client, RequestFactory
from django.urls import path

from django_redislock import AsyncSemaphore, Semaphore, redis_locked

pytestmark = [pytest.mark.usefixtures("backend"), pytest.mark.urls(__name__)]


def described(request: HttpRequest) -> JsonResponse:
    guard = request.redis_lock  # type: ignore[attr-defined]
    return JsonResponse(
        {
            "class": type(guard).__name__,
            "name": guard.name,
            "owned": guard.owned(),
            "held": guard.count(),
        }
    )


@redis_locked("export:{user}", limit=2, ttl=30)
def export(request: HttpRequest, user: int) -> JsonResponse:
    return described(request)


@redis_locked("export:{user}", limit=2, ttl=30)
async def aexport(request: HttpRequest, user: int) -> JsonResponse:
    guard = request.redis_lock  # type: ignore[attr-defined]
    return JsonResponse(
        {"class": type(guard).__name__, "owned": await guard.owned(), "held": await guard.count()}
    )


@redis_locked("export:{user}", limit=2, ttl=30)
def streamed(request: HttpRequest, user: int) -> StreamingHttpResponse:
    return StreamingHttpResponse(iter([b"a", b"b"]))


urlpatterns = [
    path("export/<int:user>/", export),
    path("aexport/<int:user>/", aexport),
    path("streamed/<int:user>/", streamed),
]


def test_up_to_the_limit_get_in_then_busy(client: Client) -> None:
    first = Semaphore("export:1", limit=2)
    assert first.acquire(0)
    inside = client.get("/export/1/").json()
    assert inside == {"class": "Semaphore", "name": "export:1", "owned": True, "held": 2}
    assert first.count() == 1  # the view's permit is back
    second = Semaphore("export:1", limit=2)
    assert second.acquire(0)
    busy = client.get("/export/1/", HTTP_ACCEPT="application/json")
    assert (busy.status_code, busy["Retry-After"], busy.json()["error"]) == (409, "1", "busy")
    assert client.get("/export/2/").status_code == 200  # another key has its own permits
    second.release()
    assert client.get("/export/1/").status_code == 200
    first.release()


def test_async_view_takes_an_async_semaphore(async_client: AsyncClient) -> None:
    async def body() -> None:
        held = AsyncSemaphore("export:1", limit=2)
        assert await held.acquire(0)
        inside = (await async_client.get("/aexport/1/")).json()
        assert inside == {"class": "AsyncSemaphore", "owned": True, "held": 2}
        other = AsyncSemaphore("export:1", limit=2)
        assert await other.acquire(0)
        assert (await async_client.get("/aexport/1/")).status_code == 409
        await other.release()
        await held.release()
        assert await AsyncSemaphore("export:1", limit=2).count() == 0

    asyncio.run(body())


def test_a_streamed_response_keeps_its_permit_until_consumed(client: Client) -> None:
    response = client.get("/streamed/1/")
    assert Semaphore("export:1", limit=2).count() == 1
    assert b"".join(response.streaming_content) == b"ab"  # type: ignore[attr-defined]
    response.close()
    assert Semaphore("export:1", limit=2).count() == 0


def test_never_more_than_the_limit_inside_at_once(client: Client) -> None:
    inside, most, lock = [0], [0], threading.Lock()
    gate = threading.Barrier(6)
    answers: list[int] = []

    @redis_locked("busy-view", limit=2, ttl=30, timeout=5)
    def view(request: HttpRequest) -> JsonResponse:
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        threading.Event().wait(0.05)
        with lock:
            inside[0] -= 1
        return JsonResponse({})

    def call() -> None:
        gate.wait()
        answers.append(view(RequestFactory().get("/")).status_code)

    threads = [threading.Thread(target=call) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [200] * 6
    assert most[0] == 2


@pytest.mark.parametrize("limit", [0, -1, 10**6, 2.0, True, "2"])
def test_a_bad_limit_is_refused_when_decorating(limit: Any) -> None:
    with pytest.raises((ValueError, TypeError), match="limit"):
        redis_locked("x", limit=limit)
