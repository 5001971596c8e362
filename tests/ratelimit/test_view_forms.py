"""``@redis_rate_limited``'s rate and key in the forms django-ratelimit users know (a unitless
period, ``"0/m"``, ``None``, callables and dotted paths), ``group``, the IPv4/IPv6 network
masks for anonymous clients, and errors that name a rate limit key (never a lock name)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, JsonResponse
from django.test import RequestFactory

from django_redislock.ratelimit.limiter import RateLimit
from django_redislock.views.rate_limited import redis_rate_limited
from tests.support.servers import free_port

from . import rate_functions
from .rate_functions import plan_key, plan_rate, slug_key

pytestmark = pytest.mark.usefixtures("backend")
factory = RequestFactory()


def report(request: HttpRequest, slug: str = "") -> JsonResponse:
    hit = request.rate_limit  # type: ignore[attr-defined]
    return JsonResponse({"allowed": None if hit is None else hit.allowed})


def post(view: Any, path: str = "/", slug: str = "s", **meta: Any) -> Any:
    request = factory.post(path, **meta)
    request.user = AnonymousUser()
    return view(request, slug=slug)


def statuses(view: Any, times: int, path: str = "/", slug: str = "s", **meta: Any) -> list[int]:
    return [post(view, path, slug, **meta).status_code for _ in range(times)]


def test_a_unitless_period_counts_seconds() -> None:
    view = redis_rate_limited("unitless:{slug}", rate="2/10")(report)
    assert statuses(view, 3) == [200, 200, 429]
    assert 1 <= int(post(view)["Retry-After"]) <= 10
    assert RateLimit("unitless:s", rate="2/10s").key == RateLimit("unitless:s", rate="2/10").key


def test_a_rate_of_zero_always_refuses_without_asking_redis(settings: Any) -> None:
    view = redis_rate_limited("closed:{slug}", rate="0/m")(report)
    settings.REDISLOCK = {"URL": f"redis://127.0.0.1:{free_port()}/0"}  # unreachable
    response = post(view)
    assert (response.status_code, response["Retry-After"]) == (429, "60")


def test_no_rate_is_no_limit() -> None:
    view = redis_rate_limited("free:{slug}", rate=None)(report)
    responses = [post(view) for _ in range(5)]
    assert [r.status_code for r in responses] == [200] * 5
    assert json.loads(responses[0].content) == {"allowed": None}
    assert "RateLimit" not in responses[0]


@pytest.mark.parametrize("rate", [plan_rate, "tests.ratelimit.rate_functions.plan_rate"])
def test_a_rate_callable_decides_per_request(rate: Any) -> None:
    rate_functions.SEEN_GROUPS.clear()
    view = redis_rate_limited("plan:{slug}", rate=rate)(report)
    assert statuses(view, 2, "/?plan=free", "a") == [200, 429]
    assert statuses(view, 3, "/?plan=pro", "b") == [200, 200, 200]  # another limit
    assert statuses(view, 1, "/?plan=pro", "b") == [429]
    assert statuses(view, 3, "/?plan=pair", "c") == [200, 200, 429]
    assert statuses(view, 1, "/?plan=banned", "d") == [429]
    assert statuses(view, 4, "/", "a") == [200] * 4  # None: no limit
    assert set(rate_functions.SEEN_GROUPS) == {f"{__name__}.report"}  # the view's name


def test_the_group_is_what_callables_receive_and_prefixes_the_key() -> None:
    rate_functions.SEEN_GROUPS.clear()
    view = redis_rate_limited("g:{slug}", rate=plan_rate, group="checkout")(report)
    assert statuses(view, 2, "/?plan=free") == [200, 429]
    assert rate_functions.SEEN_GROUPS == ["checkout", "checkout"]
    assert not RateLimit("checkout:g:s", rate="1/m").hit()  # the name the view used


def test_a_dotted_path_to_a_function_below_the_view_resolves_at_the_first_request() -> None:
    assert statuses(rate_functions.late, 2) == [200, 429]


def test_a_rate_callable_answering_nonsense_names_itself() -> None:
    view = redis_rate_limited("nonsense", rate=rate_functions.not_a_rate)(report)
    with pytest.raises(ImproperlyConfigured, match=r"on .*report: the rate callable .*not_a_rate"):
        post(view)


def test_burst_is_capped_at_a_callables_rate() -> None:
    view = redis_rate_limited("capped:{slug}", rate=plan_rate, burst=2)(report)
    assert statuses(view, 2, "/?plan=free") == [200, 429]
    assert statuses(view, 3, "/?plan=pro", "p") == [200, 200, 429]  # 2 at once, then spaced


@pytest.mark.parametrize("key", [plan_key, "tests.ratelimit.rate_functions.plan_key"])
def test_a_group_request_key_callable(key: Any) -> None:
    view = redis_rate_limited(key, rate="1/m")(report)
    assert statuses(view, 2, "/?user=ann") == [200, 429]
    assert statuses(view, 1, "/?user=bob") == [200]
    assert not RateLimit("plan-user:bob", rate="1/m").hit()


def test_a_request_key_callable_by_dotted_path() -> None:
    view = redis_rate_limited("tests.ratelimit.rate_functions.slug_key", rate="1/m")(report)
    assert statuses(view, 2, slug="x") == [200, 429]
    assert slug_key(HttpRequest(), "x") == "slug:x"
    assert not RateLimit("slug:x", rate="1/m").hit()


def test_one_key_template_on_two_views_shares_one_budget_unless_grouped() -> None:
    def other(request: HttpRequest, slug: str) -> JsonResponse:
        return report(request, slug)

    first = redis_rate_limited("shared:{slug}", rate="2/m")(report)
    second = redis_rate_limited("shared:{slug}", rate="2/m")(other)
    assert [post(first).status_code, post(second).status_code] == [200, 200]
    assert post(first).status_code == post(second).status_code == 429
    apart = redis_rate_limited("shared:{slug}", rate="2/m", group="search")(other)
    assert statuses(apart, 3) == [200, 200, 429]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"rate": "tests.ratelimit.rate_functions.missing"}, ValueError, "rate 'tests.ratelimit"),
        ({"rate": "nowhere.at_all"}, ValueError, "rate 'nowhere.at_all' looks like a dotted"),
        ({"rate": "tests.ratelimit.rate_functions.NOT_CALLABLE"}, TypeError, "not a callable"),
        ({"rate": 1.5}, TypeError, "rate must be"),
        ({"rate": "5/m", "key": "shop.checkout"}, ValueError, "key 'shop.checkout' .* with ':'"),
        ({"rate": "5/m", "key": 7}, TypeError, "key must be"),
        ({"rate": "5/m", "key": "ip"}, ValueError, "'ip' is a django-ratelimit key name"),
        ({"rate": "5/m", "key": "user"}, ValueError, r"Write 'user:\{request.user.pk\}'"),
        ({"rate": "5/m", "key": "user_or_ip"}, ValueError, "anonymous='ip'"),
        ({"rate": "5/m", "group": "a b"}, ValueError, "group 'a b' contains whitespace"),
        ({"rate": "5/m", "group": 5}, TypeError, "group must be a str"),
        ({"rate": "5/m", "headers": "yes"}, TypeError, "headers must be True or False"),
        ({"rate": "5/m", "ipv4_mask": 33}, ValueError, "ipv4_mask must be from 0 to 32"),
        ({"rate": "5/m", "ipv4_mask": "24"}, TypeError, "ipv4_mask must be a prefix length"),
        ({"rate": "5/m", "ipv6_mask": 129}, ValueError, "ipv6_mask must be from 0 to 128"),
        ({"rate": "5/m", "ipv6_mask": True}, TypeError, "ipv6_mask"),
        ({"rate": plan_rate, "burst": 0}, ValueError, "burst"),
        ({"rate": "0/m", "burst": 1}, ValueError, "burst"),
    ],
)
def test_wrong_values_are_refused_at_decoration(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    kwargs = dict(kwargs)
    key = kwargs.pop("key", "k")
    with pytest.raises(error, match=match):
        redis_rate_limited(key, **kwargs)


def test_anonymous_clients_grouped_by_ipv4_network_when_asked() -> None:
    view = redis_rate_limited(
        "net:{request.user.pk}", rate="2/m", anonymous="ip", ipv4_mask=24, ipv6_mask=48
    )(report)
    assert statuses(view, 1, REMOTE_ADDR="10.0.0.1") == [200]
    assert statuses(view, 2, REMOTE_ADDR="10.0.0.200") == [200, 429]  # the same /24
    assert statuses(view, 1, REMOTE_ADDR="10.0.1.1") == [200]
    assert statuses(view, 1, REMOTE_ADDR="::ffff:10.0.1.2") == [200]  # IPv4 through IPv6
    assert statuses(view, 1, REMOTE_ADDR="10.0.1.3") == [429]
    assert statuses(view, 2, REMOTE_ADDR="2001:db8:0:1::1") == [200, 200]
    assert statuses(view, 1, REMOTE_ADDR="2001:db8:0:2::1") == [429]  # the same /48
    assert not RateLimit("net:!ip:10.0.0.0%2F24", rate="2/m").hit()


def test_the_default_keys_each_ipv4_address_alone() -> None:
    view = redis_rate_limited("net32:{request.user.pk}", rate="1/m", anonymous="ip")(report)
    assert statuses(view, 1, REMOTE_ADDR="10.0.0.1") == [200]
    assert statuses(view, 1, REMOTE_ADDR="10.0.0.2") == [200]
    assert statuses(view, 1, REMOTE_ADDR="10.0.0.1") == [429]


def test_key_errors_name_a_rate_limit_key_not_a_lock(caplog: Any) -> None:
    with pytest.raises(ImproperlyConfigured) as template:
        redis_rate_limited("flash sale:{slug}", rate="5/m")(report)
    assert "Rate limit key 'flash sale:x' contains whitespace" in str(template.value)
    view = redis_rate_limited(lambda request, slug: f"raw:{slug}", rate="5/m")(report)
    with caplog.at_level(logging.ERROR, "django_redislock"):
        assert post(view, slug="a b").status_code == 400
    assert "Rate limit key 'raw:a b' contains whitespace" in caplog.text
    for bad in ("", "a{b}", 5):
        with pytest.raises((TypeError, ValueError)) as direct:
            RateLimit(bad, rate="5/m")  # type: ignore[arg-type]
        assert "Rate limit key" in str(direct.value)
    assert "Lock" not in str(template.value) + caplog.text


def test_async_views_take_the_same_forms() -> None:
    async def areport(request: HttpRequest, slug: str) -> JsonResponse:
        return report(request, slug)

    view = redis_rate_limited(plan_key, rate=plan_rate)(areport)

    async def body() -> list[int]:
        codes = []
        for _ in range(2):
            request = factory.post("/?plan=free&user=async")
            request.user = AnonymousUser()
            codes.append((await view(request, slug="s")).status_code)
        return codes

    assert asyncio.run(body()) == [200, 429]
