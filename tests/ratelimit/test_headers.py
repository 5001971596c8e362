"""The IETF ``RateLimit`` / ``RateLimit-Policy`` fields (draft-ietf-httpapi-ratelimit-headers)
of ``@redis_rate_limited``: on every 429, and on the requests let through with
``headers=True``; one item per stacked limit, named by the group or the rate."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from django_redislock.views.rate_limited import redis_rate_limited

pytestmark = pytest.mark.usefixtures("backend")
factory = RequestFactory()
ITEM = re.compile(r'"[ !#-\[\]-~]*"(;[a-z]+=[0-9]+)+')  # an sf-string with integer params


def ok(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


async def aok(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


def call(view: Any) -> Any:
    request = factory.get("/")
    request.user = AnonymousUser()
    return view(request)


def fields(response: Any) -> tuple[str | None, str | None]:
    policy, limit = response.get("RateLimit-Policy"), response.get("RateLimit")
    for value in (policy, limit):
        if value is not None:
            assert all(ITEM.fullmatch(item.strip()) for item in value.split(",")), value
    return policy, limit


def test_a_refusal_always_says_the_policy_and_when_to_come_back() -> None:
    view = redis_rate_limited("h-refused", rate="2/m")(ok)
    assert [fields(call(view)) for _ in range(2)] == [(None, None)] * 2  # not asked for
    refused = call(view)
    assert refused.status_code == 429
    assert fields(refused) == ('"2/m";q=2;w=60', f'"2/m";r=0;t={refused["Retry-After"]}')


def test_passes_carry_the_fields_when_asked() -> None:
    view = redis_rate_limited("h-passes", rate="3/m", headers=True)(ok)
    limits = [fields(call(view))[1] for _ in range(3)]
    assert limits == ['"3/m";r=2;t=60', '"3/m";r=1;t=60', '"3/m";r=0;t=60']
    assert fields(call(view))[0] == '"3/m";q=3;w=60'


def test_a_burst_says_what_may_pass_at_once() -> None:
    view = redis_rate_limited("h-burst", rate="10/10s", burst=2, headers=True)(ok)
    first, second = call(view), call(view)
    # t: until every unit is back, the passes out of the window (not only the burst refilled)
    assert fields(first) == ('"10/10s";q=10;w=10', '"10/10s";r=1;t=10')
    assert fields(second)[1] == '"10/10s";r=0;t=10'  # two at once, then one a second
    refused = call(view)
    assert (refused.status_code, fields(refused)[1]) == (429, '"10/10s";r=0;t=1')


def test_the_group_names_the_policy() -> None:
    view = redis_rate_limited("h-group", rate="1/h", group="checkout", headers=True)(ok)
    assert fields(call(view)) == ('"checkout";q=1;w=3600', '"checkout";r=0;t=3600')


def test_stacked_limits_each_add_their_item() -> None:
    view = redis_rate_limited("h-day", rate="100/d", headers=True)(
        redis_rate_limited("h-minute", rate="1/m", headers=True)(ok)
    )
    assert fields(call(view)) == (
        '"1/m";q=1;w=60, "100/d";q=100;w=86400',
        '"1/m";r=0;t=60, "100/d";r=99;t=86400',
    )
    refused = call(view)  # the inner limit refuses; the outer one counted it
    assert refused.status_code == 429
    assert fields(refused)[1] == f'"1/m";r=0;t={refused["Retry-After"]}, "100/d";r=98;t=86400'


def test_a_rate_of_zero_and_a_hooks_response() -> None:
    closed = redis_rate_limited("h-closed", rate="0/m")(ok)
    assert fields(call(closed)) == ('"0/m";q=0;w=60', '"0/m";r=0;t=60')

    def hook(request: HttpRequest, hit: Any) -> HttpResponse:
        return HttpResponse("later", status=503)

    hooked = redis_rate_limited("h-hook", rate="1/m", on_limited=hook)(ok)
    call(hooked)
    refused = call(hooked)
    assert refused.status_code == 503
    assert fields(refused)[0] == '"1/m";q=1;w=60'


def test_no_fields_without_a_limit() -> None:
    view = redis_rate_limited("h-none", rate=None, headers=True)(ok)
    assert fields(call(view)) == (None, None)


def test_async_views() -> None:
    view = redis_rate_limited("h-async", rate="1/m", headers=True)(aok)

    async def body() -> list[Any]:
        return [await call(view) for _ in range(2)]

    passed, refused = asyncio.run(body())
    assert fields(passed) == ('"1/m";q=1;w=60', '"1/m";r=0;t=60')
    assert fields(refused)[1] == f'"1/m";r=0;t={refused["Retry-After"]}'
