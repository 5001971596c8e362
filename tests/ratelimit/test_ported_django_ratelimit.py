"""The tests of django-ratelimit (``django_ratelimit/tests.py``) that apply here, rewritten
for ``@redis_rate_limited``: a refused request is a 429 here where django-ratelimit sets
``request.limited`` (``block=False``) or raises ``Ratelimited``.

What does not apply, and why:
- ``key='ip'``, ``'user_or_ip'``, ``'get:foo'``, ``'post:foo'``, ``'header:x'`` strings: a key
  here is a template (``"{request.user.pk}"`` with ``anonymous="ip"`` is ``user_or_ip``;
  ``{request.GET.foo}`` is not a field a template reads), or a callable; the tests keep
  their intent with those.
- ``method=``/``ratelimit.UNSAFE``, ``test_stacked_methods``, ``test_sorted_methods``,
  ``test_methods_counted_separately``: there is no method filter; every request that
  reaches the view counts (``@require_POST`` goes outside the limiter, as the README says).
- ``RATELIMIT_EXCEPTION_CLASS``, ``test_block``: a refusal is a 429 response (or
  ``on_limited``'s), not an exception.
- ``test_no_key``: ``key`` is a required argument (a TypeError when calling the decorator).
- ``CacheFailTests``, ``test_cache_timeout``: no Django cache is used; Redis unreachable is
  covered by ``test_views`` (fail-closed 503, fail-open).
- ``IpMetaTests`` (``RATELIMIT_IP_META``): the address is ``REMOTE_ADDR``, which a proxy
  setup rewrites (README); no setting picks another header.
- ``test_views_counted_separately``: the opposite holds here, on purpose: names are global,
  so the same key on two views is one budget; ``group`` keeps them apart (tested below).
- ``get_usage``'s ``count`` past the limit (2 of 1): a refused hit counts nothing here, so
  the usage never passes the limit; ``peek()`` says what is left instead.
- A key callable ``lambda x, y: ...``: a ``(group, request)`` callable is told apart from a
  ``(request, *args, **kwargs)`` one by its first parameter's name, so it must be ``group``.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory
from django.utils.decorators import method_decorator
from django.views import View

from django_redislock.ratelimit.limiter import RateLimit
from django_redislock.ratelimit.rate import parse_rate
from django_redislock.views.rate_limited import redis_rate_limited

pytestmark = pytest.mark.usefixtures("backend")
rf = RequestFactory()
IP = "{request.user.pk}"  # with anonymous="ip": django-ratelimit's 'user_or_ip'


class StubUser:
    pk = 1
    is_anonymous = False
    is_authenticated = True


def request(user: Any = None, address: str = "127.0.0.1", path: str = "/") -> HttpRequest:
    made = rf.post(path, REMOTE_ADDR=address)
    made.user = user or AnonymousUser()
    return made


def limited(view: Any, *args: Any, **kwargs: Any) -> bool:
    status = view(request(*args, **kwargs)).status_code
    assert status in (200, 429), status
    return bool(status == 429)


def ok(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


def callable_rate(group: str, request: HttpRequest) -> Any:
    return None if request.user.is_authenticated else (0, 1)


def mykey(group: str, request: HttpRequest) -> str:
    return request.META["REMOTE_ADDR"][::-1]


@pytest.mark.parametrize(
    ("text", "count", "seconds"),
    [
        ("100/s", 100, 1),
        ("100/10s", 100, 10),
        ("100/10", 100, 10),
        ("100/m", 100, 60),
        ("400/10m", 400, 600),
        ("1000/h", 1000, 3600),
        ("800/d", 800, 86400),
    ],
)
def test_rate_parsing(text: str, count: int, seconds: int) -> None:
    rate = parse_rate(text)
    assert (rate.count, rate.period) == (count, seconds)


def test_ip() -> None:
    view = redis_rate_limited(IP, rate="1/m", anonymous="ip")(ok)
    assert [limited(view), limited(view)] == [False, True]


def test_rate() -> None:
    view = redis_rate_limited(IP, rate="2/m", anonymous="ip")(ok)
    assert [limited(view) for _ in range(3)] == [False, False, True]


def test_zero_rate() -> None:
    assert limited(redis_rate_limited(IP, rate="0/m", anonymous="ip")(ok))


def test_none_rate() -> None:
    view = redis_rate_limited(IP, rate=None, anonymous="ip")(ok)
    assert not any(limited(view) for _ in range(7))


def test_callable_rate() -> None:
    def get_rate(group: str, request: HttpRequest) -> Any:
        return (2, 60) if request.user.is_authenticated else (1, 60)

    view = redis_rate_limited(IP, rate=get_rate, anonymous="ip")(ok)
    assert [limited(view), limited(view)] == [False, True]
    user = StubUser()
    assert [limited(view, user) for _ in range(3)] == [False, False, True]


def test_callable_rate_none() -> None:
    view = redis_rate_limited(
        IP, rate=lambda group, request: None if "never" in request.path else "1/m",
        anonymous="ip",
    )(ok)  # fmt: skip
    assert [limited(view), limited(view)] == [False, True]
    assert [limited(view, path="/never/"), limited(view, path="/never/")] == [False, False]


def test_callable_rate_zero() -> None:
    def get_rate(group: str, request: HttpRequest) -> str:
        return "1/m" if request.user.is_authenticated else "0/m"

    view = redis_rate_limited(IP, rate=get_rate, anonymous="ip")(ok)
    assert limited(view)
    assert [limited(view, StubUser()), limited(view, StubUser())] == [False, True]


def test_callable_rate_import() -> None:
    path = f"{__name__}.callable_rate"
    view = redis_rate_limited(IP, rate=path, anonymous="ip")(ok)
    assert limited(view)
    assert not limited(view, StubUser())


def test_user_or_ip() -> None:
    view = redis_rate_limited(IP, rate="1/m", anonymous="ip")(ok)
    assert [limited(view), limited(view)] == [False, True]
    assert [limited(view, StubUser()), limited(view, StubUser())] == [False, True]


@pytest.mark.parametrize("key", [mykey, f"{__name__}.mykey"])
def test_callable_key(key: Any) -> None:
    view = redis_rate_limited(key, rate="1/m")(ok)
    assert [limited(view), limited(view)] == [False, True]
    assert not RateLimit("1.0.0.721", rate="1/m").hit()  # the name mykey made


def test_stacked_decorator() -> None:
    # The shorter limit outside: the inner one must not undo its refusal, nor it the other's.
    view = redis_rate_limited(lambda group, request: "min", rate="1/m")(
        redis_rate_limited(lambda group, request: "day", rate="10/d")(ok)
    )
    assert [limited(view), limited(view)] == [False, True]
    assert RateLimit("day", rate="10/d").peek().remaining == 9  # refused outside: not counted


@pytest.mark.parametrize(
    ("ipv4_mask", "first", "same", "other"),
    [
        (32, "10.1.1.1", None, "10.1.1.2"),
        (16, "10.1.1.1", "10.1.0.1", "192.168.1.1"),
    ],
)
def test_ipv4_masks(ipv4_mask: int, first: str, same: str | None, other: str) -> None:
    view = redis_rate_limited(IP, rate="1/m", anonymous="ip", ipv4_mask=ipv4_mask)(ok)
    assert [limited(view, address=first), limited(view, address=first)] == [False, True]
    if same is not None:
        assert limited(view, address=same)
    assert not limited(view, address=other)


@pytest.mark.parametrize(
    ("ipv6_mask", "same", "other"),
    [(128, None, "2001:db8::1001"), (64, "2001:db8::1001", "2001:db9::1000")],
)
def test_ipv6_masks(ipv6_mask: int, same: str | None, other: str) -> None:
    view = redis_rate_limited(IP, rate="1/m", anonymous="ip", ipv6_mask=ipv6_mask)(ok)
    first = "2001:db8::1000"
    assert [limited(view, address=first), limited(view, address=first)] == [False, True]
    if same is not None:
        assert limited(view, address=same)
    assert not limited(view, address=other)


def test_is_ratelimited_without_increment() -> None:
    # is_ratelimited(increment=False) / get_usage(): peek() reads without counting.
    limit = RateLimit("usage:a", rate="1/m")
    for _ in range(2):
        state = limit.peek()
        assert (state.limit, state.remaining, state.retry_after) == (1, 1, 0)
        assert state.reset_after <= 60


def test_get_usage_after_increments() -> None:
    limit = RateLimit("usage:b", rate="1/m")
    assert [bool(limit.hit()), bool(limit.hit())] == [True, False]
    state = limit.peek()
    assert (state.limit, state.remaining) == (1, 0)
    assert 0 < state.retry_after <= 60  # django-ratelimit's time_left, should_limit


def test_method_decorator_class_decorator_and_wrapped_view() -> None:
    class Post(View):
        @method_decorator(redis_rate_limited(IP, rate="1/m", anonymous="ip", group="post"))
        def post(self, request: HttpRequest) -> HttpResponse:
            return HttpResponse("ok")

    @method_decorator(redis_rate_limited(IP, rate="1/m", anonymous="ip", group="get"), "post")
    class Named(View):
        def post(self, request: HttpRequest) -> HttpResponse:
            return HttpResponse("ok")

    class Plain(View):
        def post(self, request: HttpRequest) -> HttpResponse:
            return HttpResponse("ok")

    wrapped = redis_rate_limited(IP, rate="1/m", anonymous="ip", group="wrapped")(Plain.as_view())
    for view in (Post.as_view(), Named.as_view(), wrapped):
        assert [limited(view), limited(view)] == [False, True]


def test_views_share_a_key_unless_grouped() -> None:
    first = redis_rate_limited(IP, rate="1/m", anonymous="ip")(ok)
    second = redis_rate_limited(IP, rate="1/m", anonymous="ip")(lambda request: ok(request))
    assert [limited(first), limited(second)] == [False, True]  # one budget
    grouped = redis_rate_limited(IP, rate="1/m", anonymous="ip", group="another")(ok)
    assert not limited(grouped)
