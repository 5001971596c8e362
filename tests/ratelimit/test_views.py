"""``@redis_rate_limited`` on sync, async and class-based views through the test client, on
every backend: 429 with an exact Retry-After in JSON or text, the hook, Redis gone, the
anonymous rule (shared with ``@redis_locked``) and hostile URL values."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.test import AsyncClient, Client

from django_redislock.ratelimit.limiter import RateLimit
from django_redislock.views.keys import client_network
from django_redislock.views.rate_limited import redis_rate_limited
from tests.support.fixtures import Backend
from tests.support.servers import free_port

pytestmark = [pytest.mark.usefixtures("backend"), pytest.mark.urls("tests.ratelimit.urls")]
JSON = {"HTTP_ACCEPT": "application/json"}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_within_the_limit_the_view_runs_and_sees_the_hit(client: Client) -> None:
    for _ in range(3):
        assert client.post("/limited/1/").json() == {"allowed": True}
    assert client.post("/limited/2/").status_code == 200  # another key


def test_over_the_limit_429_json_with_the_exact_wait(client: Client) -> None:
    for _ in range(3):
        client.post("/limited/1/")
    first = client.post("/limited/1/", **JSON)
    second = client.post("/limited/1/", **JSON)
    assert first.status_code == second.status_code == 429
    body = first.json()
    assert body["error"] == "rate-limited"
    assert 0 < second.json()["retry_after"] < body["retry_after"] <= 60
    assert first["Retry-After"] == str(math.ceil(body["retry_after"]))
    assert "3/m" in body["detail"]


def test_over_the_limit_429_plain_text_otherwise(client: Client) -> None:
    for _ in range(3):
        client.post("/limited/1/")
    response = client.post("/limited/1/", HTTP_ACCEPT="text/html")
    assert response.status_code == 429
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    assert text.startswith("Too many requests (3/m allowed); retry in ")
    exact = float(text.split("retry in ")[1].split(" s")[0])
    assert response["Retry-After"] == str(math.ceil(exact))


def test_on_limited_may_answer_or_fall_back(client: Client) -> None:
    for _ in range(3):
        client.post("/custom/1/")
    custom = client.post("/custom/1/?custom=1")
    assert (custom.status_code, custom.content) == (200, b"slow down: points:1 True")
    assert client.post("/custom/1/").status_code == 429


def test_async_views(async_client: AsyncClient) -> None:
    async def body() -> None:
        for _ in range(3):
            assert (await async_client.post("/alimited/1/")).json() == {"allowed": True}
        refused = await async_client.post("/alimited/1/", headers={"Accept": "application/json"})
        assert refused.status_code == 429
        assert refused.json()["retry_after"] > 0
        custom = await async_client.post("/acustom/1/")  # the same key: limited already
        assert (custom.status_code, custom.content) == (503, b"async slow down")

    run(body())


def test_class_based_views(client: Client, async_client: AsyncClient) -> None:
    assert client.post("/cbv/1/").json() == {"allowed": True, "view": "sync"}
    assert client.post("/acbv/1/").json() == {"allowed": True, "view": "async"}
    assert client.post("/cbv/1/").status_code == 429
    assert run(async_client.post("/acbv/1/")).status_code == 429


def test_the_view_and_rate_limit_share_the_count(client: Client) -> None:
    assert RateLimit("points:5", rate="3/m").hit()
    assert RateLimit("points:5", rate="3/m").hit()
    assert client.post("/limited/5/").status_code == 200
    assert client.post("/limited/5/").status_code == 429


# --- Redis unreachable ---------------------------------------------------------------------


@pytest.fixture
def redis_down(backend: Backend, settings: Any) -> None:
    settings.REDISLOCK = {"URL": f"redis://127.0.0.1:{free_port()}/0"}


@pytest.mark.usefixtures("redis_down")
def test_redis_down_fails_closed_with_503(client: Client, caplog: Any) -> None:
    with caplog.at_level(logging.ERROR, "django_redislock"):
        response = client.post("/limited/7/", **JSON)
        assert run(AsyncClient().post("/alimited/7/")).status_code == 503
    assert (response.status_code, response["Retry-After"]) == (503, "1")
    assert response.json()["error"] == "redis-unavailable"
    assert "instead of checking rate limit 'points:7' (3/m)" in caplog.text


@pytest.mark.usefixtures("redis_down")
def test_redis_down_fails_open_when_asked(client: Client, settings: Any, caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, "django_redislock"):
        assert client.post("/fail-open/7/").json() == {"allowed": None}
        assert run(AsyncClient().post("/afail-open/7/")).json() == {"allowed": None}
    assert "WITHOUT rate limit 'open:7' (3/m)" in caplog.text
    settings.REDISLOCK = {**settings.REDISLOCK, "ON_REDIS_ERROR": "fail-open"}
    assert client.post("/limited/7/").json() == {"allowed": None}


# --- anonymous users -----------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["default", "deny"])
def test_anonymous_users_are_refused_by_default(client: Client, policy: str) -> None:
    for kind in ("rate", "arate", "lock"):
        response = client.post(f"/{policy}/{kind}/", **JSON)
        assert response.status_code == 403, kind
        assert response.json()["error"] == "login-required"
        assert "Retry-After" not in response
    assert client.post(f"/{policy}/rate/").content == b"Log in to use this."


def test_anonymous_users_by_address_when_chosen(client: Client) -> None:
    for _ in range(2):
        assert client.post("/ip/rate/", REMOTE_ADDR="10.0.0.1").status_code == 200
    assert client.post("/ip/rate/", REMOTE_ADDR="10.0.0.1").status_code == 429
    assert client.post("/ip/rate/", REMOTE_ADDR="10.0.0.2").status_code == 200
    # One IPv6 client owns its whole /64: it is one key.
    assert client.post("/ip/rate/", REMOTE_ADDR="2001:db8::1").status_code == 200
    assert client.post("/ip/rate/", REMOTE_ADDR="2001:db8::2").status_code == 200
    assert client.post("/ip/rate/", REMOTE_ADDR="2001:db8::3").status_code == 429
    assert client.post("/ip/rate/", REMOTE_ADDR="2001:db8:0:1::1").status_code == 200
    assert client.post("/ip/lock/", REMOTE_ADDR="10.0.0.1").json() == {"lock": "user:!ip:10.0.0.1"}
    assert RateLimit("user:!ip:10.0.0.2", rate="2/m").hit()  # the same key as the view's
    assert not RateLimit("user:!ip:10.0.0.2", rate="2/m").hit()


def test_anonymous_without_an_address_is_refused(client: Client, caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, "django_redislock"):
        assert client.post("/ip/rate/", REMOTE_ADDR="").status_code == 403
    assert "no valid REMOTE_ADDR" in caplog.text


def test_anonymous_users_share_one_key_when_chosen(client: Client) -> None:
    assert client.post("/shared/rate/", REMOTE_ADDR="10.0.0.1").status_code == 200
    assert client.post("/shared/rate/", REMOTE_ADDR="10.0.0.2").status_code == 200
    assert client.post("/shared/rate/", REMOTE_ADDR="10.0.0.3").status_code == 429
    assert run(AsyncClient().post("/shared/arate/")).status_code == 429
    assert client.post("/shared/lock/").json() == {"lock": "user:!anonymous"}


@pytest.mark.django_db(transaction=True)  # the async client logs in from another thread
@pytest.mark.parametrize("policy", ["default", "ip", "shared"])
def test_a_logged_in_user_is_keyed_by_the_user_whatever_the_choice(
    client: Client, policy: str
) -> None:
    user = User.objects.create_user("ann")
    client.force_login(user)
    assert client.post(f"/{policy}/lock/").json() == {"lock": f"user:{user.pk}"}
    assert client.post(f"/{policy}/rate/").status_code == 200
    assert client.post(f"/{policy}/rate/").status_code == 200
    assert client.post(f"/{policy}/rate/").status_code == 429
    assert run(_alogged_in(user, f"/{policy}/arate/")).status_code == 429


async def _alogged_in(user: User, url: str) -> Any:
    client = AsyncClient()
    await client.aforce_login(user)
    return await client.post(url)


# --- hostile URL values and configuration mistakes -----------------------------------------


@pytest.mark.parametrize(
    "slug",
    ["a%7Bb%7D", "%7B%7D%7B", "x" * 3000, "a%01b%00c", "a%09b%7Fc", "%E2%80%AE%F0%9F%92%A5", "a b"],
)
def test_hostile_url_values_get_a_clear_answer_never_a_500(client: Client, slug: str) -> None:
    assert client.post(f"/item/{slug}/").status_code == 200
    assert client.post(f"/item/{slug}/").status_code == 200
    assert client.post(f"/item/{slug}/").status_code == 429
    raw = client.post(f"/raw/{slug}/", **JSON)  # a callable key that does not encode them
    assert raw.status_code in (200, 400)
    if raw.status_code == 400:
        assert raw.json()["error"] == "bad-key"


def test_values_no_url_can_carry_are_encoded_too() -> None:
    from . import views

    for value in ("a\nb", "\r\n", "}" * 500):
        assert views.item(HttpRequest(), slug=value).status_code == 200


def test_a_callable_key_made_illegal_by_the_request_is_a_400(client: Client, caplog: Any) -> None:
    with caplog.at_level(logging.ERROR, "django_redislock"):
        response = client.post("/raw/a%7Bb%7D/")
    assert response.status_code == 400
    assert "the key callable made an illegal rate limit key" in caplog.text
    assert client.post("/raw/fine/").status_code == 200


def test_template_mistakes_fail_at_decoration() -> None:
    def buy(request: HttpRequest, product_id: int) -> HttpResponse:
        return HttpResponse()

    with pytest.raises(
        ImproperlyConfigured, match=r"@redis_rate_limited on .*buy: the key .* names 'prodct_id'"
    ):
        redis_rate_limited("sale:{prodct_id}", rate="5/m")(buy)
    with pytest.raises(ImproperlyConfigured, match=r"cannot make a rate limit key: .*whitespace"):
        redis_rate_limited("flash sale:{product_id}", rate="5/m")(buy)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"key": 5, "rate": "5/m"}, TypeError, "key must be"),
        ({"key": "k", "rate": "5/minute"}, ValueError, "is not a rate"),
        ({"key": "k", "rate": 5}, TypeError, "rate must be a str"),
        ({"key": "k", "rate": "5/m", "burst": 6}, ValueError, "burst"),
        ({"key": "k", "rate": "5/m", "on_limited": "page"}, TypeError, "on_limited"),
        ({"key": "k", "rate": "5/m", "on_redis_error": "ignore"}, ValueError, "on_redis_error"),
        ({"key": "k", "rate": "5/m", "anonymous": "everyone"}, ValueError, "anonymous"),
        ({"key": len, "rate": "5/m", "anonymous": "ip"}, ValueError, "anonymous applies"),
        ({"key": "k", "rate": "5/m", "using": 3}, TypeError, "using"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    kwargs = dict(kwargs)
    key = kwargs.pop("key")
    with pytest.raises(error, match=match):
        redis_rate_limited(key, **kwargs)


def test_async_on_limited_on_a_sync_view_is_refused() -> None:
    async def hook(request: HttpRequest, hit: Any) -> None:
        return None

    @redis_rate_limited("hooked", rate="1/m", on_limited=hook)
    def view(request: HttpRequest) -> HttpResponse:
        return HttpResponse()

    assert view(HttpRequest()).status_code == 200
    with pytest.raises(TypeError, match=r"on_limited of the sync view .*view must not be async"):
        view(HttpRequest())


@pytest.mark.parametrize(
    ("address", "network"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("2001:db8::1", "2001:db8::/64"),
        ("2001:db8:0:0:ffff::1", "2001:db8::/64"),
        ("::ffff:192.0.2.7", "192.0.2.7"),  # IPv4 through an IPv6 socket
        ("fe80::1%eth0", "fe80::/64"),
        ("", None),
        (None, None),
        ("unix:/run/app.sock", None),
        ("192.0.2.7, 10.0.0.1", None),  # a forwarded list is not an address
    ],
)
def test_anonymous_clients_are_keyed_by_address_or_ipv6_network(
    address: Any, network: str | None
) -> None:
    assert client_network(address) == network


@pytest.mark.parametrize(("wait", "header"), [(2.0, "2"), (2.000001, "3"), (0.0001, "1")])
def test_retry_after_is_the_exact_wait_rounded_up(wait: float, header: str) -> None:
    from django_redislock.ratelimit.limiter import Hit
    from django_redislock.ratelimit.rate import parse_rate
    from django_redislock.views.rate_limited import limited

    request = HttpRequest()
    request.META["HTTP_ACCEPT"] = "application/json"
    response = limited(request, Hit(False, wait, "k", parse_rate("1/m")))
    assert response["Retry-After"] == header
    assert json.loads(response.content)["retry_after"] == wait
