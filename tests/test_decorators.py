"""``@redis_locked`` on sync, async and class-based views, seen through the test client (and
a real WSGI server for streaming), on every backend."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import threading
import time
import urllib.request
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
from django.core.wsgi import get_wsgi_application
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.template import engines
from django.template.response import SimpleTemplateResponse
from django.test import AsyncClient, Client
from django.utils.decorators import method_decorator
from django.views import View

from django_redislock import Lock, redis_locked
from django_redislock.redis import fastpath
from tests.support.fixtures import Backend
from tests.support.servers import free_port

from . import views

pytestmark = pytest.mark.usefixtures("backend")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def held(name: str) -> bool:
    return Lock(name).locked()


def test_sync_view_holds_the_lock_while_it_runs_and_frees_it_after(client: Client) -> None:
    response = client.post("/buy/7/")
    assert response.status_code == 200
    assert response.json() == {"lock": "sale:7", "fence": None, "owned": True}
    assert not held("sale:7")


def test_busy_answers_409_with_retry_after_in_text(client: Client) -> None:
    with Lock("sale:7"):
        response = client.post("/buy/7/", HTTP_ACCEPT="text/html")
        assert response.status_code == 409
        assert response["Retry-After"] == "1"
        assert response["Content-Type"].startswith("text/plain")
        assert "busy" in response.content.decode()
        assert client.post("/buy/8/").status_code == 200  # another key is not blocked
    assert client.post("/buy/7/").status_code == 200


def test_busy_answers_json_to_a_json_client(client: Client) -> None:
    with Lock("sale:7"):
        response = client.post("/buy/7/", HTTP_ACCEPT="application/json")
    assert response.status_code == 409
    assert response["Retry-After"] == "1"
    assert response.json()["error"] == "busy"


def test_busy_status_from_the_decorator_and_from_settings(client: Client, settings: Any) -> None:
    with Lock("sale:7"):
        assert client.post("/buy-429/7/").status_code == 429
        settings.REDISLOCK = {**settings.REDISLOCK, "BUSY_STATUS": 423}
        assert client.post("/buy/7/").status_code == 423
        assert client.post("/buy-429/7/").status_code == 429


def test_on_busy_may_answer_or_fall_back(client: Client) -> None:
    with Lock("sale:7"):
        custom = client.post("/buy-custom/7/?custom=1")
        assert (custom.status_code, custom.content) == (200, b"sold out for now: sale:7")
        assert client.post("/buy-custom/7/").status_code == 409


def test_timeout_waits_for_the_holder(client: Client) -> None:
    @redis_locked("wait:{n}", timeout=5)
    def slow(request: HttpRequest, n: int) -> HttpResponse:
        return HttpResponse("ok")

    taken = threading.Event()

    def hold_briefly() -> None:
        with Lock("wait:1"):
            taken.set()
            threading.Event().wait(0.2)

    holder = threading.Thread(target=hold_briefly)
    holder.start()
    taken.wait(5)
    response = slow(HttpRequest(), n=1)
    holder.join()
    assert response.status_code == 200
    assert not held("wait:1")


@pytest.mark.django_db
def test_user_template_and_fences_increase(client: Client) -> None:
    user = User.objects.create_user("ann")
    client.force_login(user)
    first = client.post("/redeem/").json()
    second = client.post("/redeem/").json()
    assert first["lock"] == second["lock"] == f"points:{user.pk}"
    assert 0 < first["fence"] < second["fence"]
    with Lock(f"points:{user.pk}"):
        assert client.post("/redeem/").status_code == 409


def test_callable_key(client: Client) -> None:
    assert client.post("/callable/3/").json()["lock"] == "callable:3:POST"


def test_url_values_are_encoded_into_a_legal_bounded_name() -> None:
    seen = []

    @redis_locked("item:{slug}")
    def view(request: HttpRequest, slug: str) -> HttpResponse:
        seen.append(request.redis_lock.name)  # type: ignore[attr-defined]
        return HttpResponse()

    view(HttpRequest(), slug="a b{c}")
    view(HttpRequest(), slug="x" * 500)
    view(HttpRequest(), slug="x" * 499 + "y")
    assert seen[0] == "item:a%20b%7Bc%7D"
    assert len(seen[1]) <= 200
    assert len(seen[2]) <= 200
    assert seen[1] != seen[2]


def test_view_exception_releases_and_propagates(client: Client) -> None:
    with pytest.raises(RuntimeError, match="the view failed"):
        client.post("/boom/1/")
    assert not held("boom:1")


def test_class_based_view(client: Client) -> None:
    assert client.post("/cbv/2/").json() == {"lock": "cbv:2", "fence": None, "view": "sync"}
    with Lock("cbv:2"):
        assert client.post("/cbv/2/").status_code == 409
    assert not held("cbv:2")


def test_streaming_response_holds_the_lock_until_consumed(client: Client) -> None:
    views.stream_gate.set()
    response = client.get("/stream/4/")
    assert response.streaming
    assert held("stream:4")
    assert client.get("/stream/4/").status_code == 409
    assert b"".join(response.streaming_content) == b"first last"  # type: ignore[arg-type]
    assert not held("stream:4")


def test_streaming_through_a_real_wsgi_server_releases_when_the_response_ends(
    backend: Backend,
) -> None:
    views.stream_gate.clear()
    server = ThreadedWSGIServer(("127.0.0.1", free_port()), WSGIRequestHandler)
    server.set_app(get_wsgi_application())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/stream/5/"
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.read(6) == b"first "
            assert held("stream:5")  # half sent: still held
            views.stream_gate.set()
            assert response.read() == b"last"
        for _ in range(100):  # the server closes the response just after the last byte
            if not held("stream:5"):
                break
            threading.Event().wait(0.01)
        assert not held("stream:5")
    finally:
        views.stream_gate.set()
        server.shutdown()
        server.server_close()


def test_lock_lost_during_the_view_still_answers(client: Client, caplog: Any) -> None:
    @redis_locked("short:{n}", ttl=0.05)
    def slow(request: HttpRequest, n: int) -> HttpResponse:
        threading.Event().wait(0.15)
        return HttpResponse("done")

    with caplog.at_level(logging.WARNING, "django_redislock"):
        assert slow(HttpRequest(), n=1).content == b"done"
    assert "Could not release lock 'short:1'" in caplog.text


# --- asyncio views -------------------------------------------------------------------------


def test_async_view(async_client: AsyncClient) -> None:
    async def body() -> None:
        response = await async_client.post("/abuy/7/")
        assert response.json() == {"lock": "sale:7", "fence": None, "owned": True}
        assert not held("sale:7")

    run(body())


def test_async_view_busy_and_on_busy(async_client: AsyncClient) -> None:
    async def body() -> None:
        lock = Lock("sale:7")
        lock.acquire()
        try:
            busy = await async_client.post("/abuy/7/", headers={"Accept": "application/json"})
            assert (busy.status_code, busy["Retry-After"]) == (409, "1")
            assert busy.json()["error"] == "busy"
            custom = await async_client.post("/abuy-custom/7/")
            assert (custom.status_code, custom.content) == (503, b"async busy page")
        finally:
            lock.release()

    run(body())


@pytest.mark.django_db(transaction=True)
def test_async_view_fences(async_client: AsyncClient) -> None:
    async def body() -> None:
        user = await User.objects.acreate(username="bob")
        await async_client.aforce_login(user)
        first = (await async_client.post("/aredeem/")).json()
        second = (await async_client.post("/aredeem/")).json()
        assert first["lock"] == f"points:{user.pk}"
        assert 0 < first["fence"] < second["fence"]

    run(body())


def test_async_view_exception_releases(async_client: AsyncClient) -> None:
    async def body() -> None:
        with pytest.raises(RuntimeError, match="the async view failed"):
            await async_client.post("/aboom/1/")
        assert not held("boom:1")

    run(body())


def test_async_class_based_view(async_client: AsyncClient) -> None:
    async def body() -> None:
        response = await async_client.post("/acbv/2/")
        assert response.json() == {"lock": "cbv:2", "fence": None, "view": "async"}
        assert not held("cbv:2")

    run(body())


def test_async_streaming_holds_the_lock_until_consumed(async_client: AsyncClient) -> None:
    async def body() -> None:
        response = await async_client.get("/astream/4/")
        assert held("stream:4")
        assert b"".join([chunk async for chunk in response.streaming_content]) == b"first last"  # type: ignore[union-attr]
        assert not held("stream:4")

    run(body())


# --- Redis unreachable ---------------------------------------------------------------------


@pytest.fixture
def redis_down(backend: Backend, settings: Any) -> None:
    settings.REDISLOCK = {"URL": f"redis://127.0.0.1:{free_port()}/0"}


@pytest.mark.usefixtures("redis_down")
def test_redis_down_fails_closed_with_503(client: Client, caplog: Any) -> None:
    with caplog.at_level(logging.ERROR, "django_redislock"):
        response = client.post("/buy/7/", HTTP_ACCEPT="application/json")
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert response.json()["error"] == "redis-unavailable"
    assert "Redis is unreachable" in caplog.text
    assert "Redis is unreachable (Redis is unreachable" not in caplog.text  # said once
    assert "sale:7" in caplog.text


@pytest.mark.usefixtures("redis_down")
def test_redis_down_fails_open_when_asked(client: Client, settings: Any, caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, "django_redislock"):
        assert client.post("/fail-open/7/").json() == {"lock": None, "fence": None}
    assert "WITHOUT lock 'fail-open:7'" in caplog.text
    assert "Redis is unreachable (Redis is unreachable" not in caplog.text  # said once
    assert "Redis is unreachable (" in caplog.text
    settings.REDISLOCK = {**settings.REDISLOCK, "ON_REDIS_ERROR": "fail-open"}
    assert client.post("/buy-429/7/").json()["lock"] is None


@pytest.mark.django_db
@pytest.mark.usefixtures("redis_down")
def test_redis_down_fencing_views_fail_closed_even_when_open(client: Client, settings: Any) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "ON_REDIS_ERROR": "fail-open"}
    client.force_login(User.objects.create_user("cy"))
    assert client.post("/redeem/").status_code == 503


@pytest.mark.usefixtures("redis_down")
def test_redis_down_async(async_client: AsyncClient) -> None:
    async def body() -> None:
        assert (await async_client.post("/abuy/7/")).status_code == 503
        assert (await async_client.post("/afail-open/7/")).json() == {"lock": None, "fence": None}

    run(body())


# --- configuration mistakes ----------------------------------------------------------------


def test_template_naming_a_missing_argument_fails_at_decoration() -> None:
    def buy(request: HttpRequest, product_id: int) -> HttpResponse:
        return HttpResponse()

    with pytest.raises(
        ImproperlyConfigured, match=r"buy: the key 'sale:\{prodct_id\}' names 'prodct_id'"
    ):
        redis_locked("sale:{prodct_id}")(buy)
    for bad in ("sale:{", "sale:{}", "sale:{0"):
        with pytest.raises(ImproperlyConfigured, match="buy"):
            redis_locked(bad)(buy)


def test_template_naming_something_the_request_lacks(client: Client) -> None:
    with pytest.raises(
        ImproperlyConfigured, match=r"by_kwargs: .* names 'slug'.*URL kwargs: other"
    ):
        client.post("/kw-missing/1/")
    with pytest.raises(
        ImproperlyConfigured, match=r"bad_attribute: .* 'request.no_such_attribute'"
    ):
        client.post("/attr/")
    assert client.post("/kw/shoes/").json()["lock"] == "kw:shoes"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"key": 5}, TypeError, "key must be"),
        ({"key": "k", "ttl": 0}, ValueError, "ttl must be > 0"),
        ({"key": "k", "ttl": "5"}, TypeError, "ttl must be a number"),
        ({"key": "k", "timeout": -1}, ValueError, "timeout must be >= 0"),
        ({"key": "k", "busy_status": 200}, ValueError, "busy_status"),
        ({"key": "k", "busy_status": True}, ValueError, "busy_status"),
        ({"key": "k", "on_busy": "page"}, TypeError, "on_busy"),
        ({"key": "k", "on_redis_error": "ignore"}, ValueError, "on_redis_error"),
        ({"key": "k", "fencing": True, "on_redis_error": "fail-open"}, ValueError, "fencing"),
        ({"key": "k", "using": 3}, TypeError, "using"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    kwargs = dict(kwargs)
    key = kwargs.pop("key")
    with pytest.raises(error, match=match):
        redis_locked(key, **kwargs)


def test_async_on_busy_on_a_sync_view_is_refused() -> None:
    async def on_busy(request: HttpRequest, lock: Any) -> None:
        return None

    @redis_locked("k", on_busy=on_busy)
    def view(request: HttpRequest) -> HttpResponse:
        return HttpResponse()

    with Lock("k"), pytest.raises(TypeError, match=r"on_busy of the sync view .*view must not"):
        view(HttpRequest())


def test_async_on_busy_on_an_async_class_based_view() -> None:
    async def on_busy(request: HttpRequest, lock: Any) -> HttpResponse:
        return HttpResponse("later", status=503)

    @method_decorator(redis_locked("acbv-busy", timeout=0, on_busy=on_busy), name="post")
    class Later(View):
        async def post(self, request: HttpRequest) -> HttpResponse:
            return HttpResponse("now")

    request = HttpRequest()
    request.method = "POST"
    view = Later.as_view()
    assert run(view(request)).content == b"now"
    with Lock("acbv-busy"):
        assert run(view(request)).status_code == 503


def test_values_never_collide_across_fields() -> None:
    seen = []

    @redis_locked("sale:{shop}:{item}")
    def view(request: HttpRequest, shop: str, item: str) -> HttpResponse:
        seen.append(request.redis_lock.name)  # type: ignore[attr-defined]
        return HttpResponse()

    view(HttpRequest(), shop="a:b", item="c")
    view(HttpRequest(), shop="a", item="b:c")
    view(HttpRequest(), shop="a/b", item="c")
    assert len(set(seen)) == 3


def test_a_template_that_cannot_make_a_name_fails_at_decoration() -> None:
    def view(request: HttpRequest, pk: int) -> HttpResponse:
        return HttpResponse()

    with pytest.raises(ImproperlyConfigured, match=r"cannot make a lock name: .*whitespace"):
        redis_locked("flash sale:{pk}")(view)


def test_a_template_response_renders_under_the_lock() -> None:
    seen = []

    class Probe:
        def __str__(self) -> str:
            seen.append(held("tpl:1"))
            return "probe"

    @redis_locked("tpl:{n}")
    def view(request: HttpRequest, n: int) -> SimpleTemplateResponse:
        return SimpleTemplateResponse(
            engines["django"].from_string("{{ probe }}"), {"probe": Probe()}
        )

    response = view(HttpRequest(), n=1)
    assert held("tpl:1")
    response.render()
    assert seen == [True]
    assert response.content == b"probe"
    assert not held("tpl:1")


def test_a_discarded_streaming_response_releases_the_lock() -> None:
    @redis_locked("gone:{n}")
    def view(request: HttpRequest, n: int) -> StreamingHttpResponse:
        return StreamingHttpResponse(iter([b"x"]))

    response = view(HttpRequest(), n=1)
    assert held("gone:1")
    del response  # e.g. a middleware answered 304 instead, or the client left
    with fastpath._kept_lock:  # a collection where a finalizer must not send a command
        gc.collect()
    # The finalizer hands the release to the finalizers' thread.
    deadline = time.monotonic() + 10
    while held("gone:1") and time.monotonic() < deadline:
        time.sleep(0.005)
    assert not held("gone:1")


def test_json_body_is_valid_json(client: Client) -> None:
    with Lock("sale:9"):
        body = client.post("/buy/9/", HTTP_ACCEPT="application/json").content
    assert json.loads(body)["detail"]


@pytest.mark.parametrize("backend", ["redis"], indirect=True)
def test_async_views_under_wsgi_leave_no_connections_behind(
    backend: Backend, client: Client
) -> None:
    # Under WSGI each async view runs in an event loop of its own; their clients must go
    # with them.
    before = backend.client.info("clients")["connected_clients"]
    for _ in range(50):
        assert client.post("/abuy/1/").status_code == 200
    gc.collect()
    assert backend.client.info("clients")["connected_clients"] - before <= 2


# --- anonymous users (issue 14): never silently under one key -------------------------------


def test_an_anonymous_user_is_refused_unless_the_decorator_says_otherwise() -> None:
    from django.contrib.auth.models import AnonymousUser

    names = []

    async def view(request: HttpRequest) -> HttpResponse:
        names.append(request.redis_lock.name)  # type: ignore[attr-defined]
        return HttpResponse()

    def anonymous() -> HttpRequest:
        request = HttpRequest()
        request.user = AnonymousUser()
        request.META["REMOTE_ADDR"] = "192.0.2.7"
        return request

    refused = run(redis_locked("points:{request.user.pk}")(view)(anonymous()))
    assert (refused.status_code, refused.content) == (403, b"Log in to use this.")
    for choice in ("ip", "shared"):
        assert run(redis_locked("points:{request.user}", anonymous=choice)(view)(anonymous()))
    assert names == ["points:!ip:192.0.2.7", "points:!anonymous"]
    # A template that does not read the user is not concerned.
    assert redis_locked("open")(lambda request: HttpResponse("ok"))(anonymous()).content == b"ok"
