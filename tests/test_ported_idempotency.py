"""The idempotency packages' tests that apply to ``@redis_idempotent``, ported in our own
words: django-idempotency-key (yoyowallet), drf-idempotency (mahmoudgshaker) and
drf-idempotencykey (mounirmesselmeni), on fakeredis, a real server and Cluster.

What does not apply, and why:

- django-idempotency-key answers a repeat 409 with the first response attached (or forces
  its status by a setting); we replay the first response as it was, with
  ``Idempotent-Replayed: true``. It folds the body into the key, so another body is a new
  key; we answer 422. Its exempt/manual decorators, storage classes, encoders, lock
  settings, ``STORE_ON_STATUSES`` and debug-toolbar tests have no counterpart (we store
  every answer below 500, in Redis, and the claim cannot be switched off). Its 423 on a lock
  wait is our 409 with ``Retry-After`` (or a wait, with ``timeout``). It scopes by the raw
  Authorization header; we scope by user, so a rotated token of the same user replays.
- drf-idempotency refuses keys with a space or "/" and sends ``Idempotent-Replayed: false``
  and the key back on first answers; we accept any printable ASCII key (hashed before it
  reaches Redis) and mark replays only, as Stripe does. Its database backend, cleanup
  command, status API and settings cache are not ours (Redis TTLs expire records). It frees
  the key after a streaming answer; we never run a streaming view twice for one key.
- drf-idempotencykey wants UUID keys, skips anonymous users and DELETE, answers a
  mismatch 409, replays cookies and ETags, and redacts stored request bodies; we take any
  key, follow ``anonymous``, guard DELETE, answer 422, replay ``Content-*`` headers and
  ``Location`` only (cookies belong to the first answer), and store no request body at all
  (only its SHA-256). Its expiry and cleanup-task tests are Redis TTLs here; its test
  helpers and admin have no counterpart.
- A concurrent first request: the peers test 20 threads on one claim; ours runs 16 HTTP
  clients against 4 gunicorn processes (``test_idempotent_server``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from django_redislock import get_redis
from django_redislock.views.idempotency_claims import Claim
from django_redislock.views.idempotency_records import record_keys
from tests.idempotent_views import runs
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.usefixtures("backend"), pytest.mark.django_db(transaction=True)]


def send(client: Client, method: str, url: str, key: str | None = "k-1", **extra: Any) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    body = extra.pop("body", {"amount": 10})
    return client.generic(
        method, url, json.dumps(body), content_type="application/json", **headers, **extra
    )


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_each_unsafe_method_replays(client: Client, method: str) -> None:
    first = send(client, method, "/idem/every-method/")
    again = send(client, method, "/idem/every-method/")
    assert first.content.startswith(method.encode())
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true"
    assert runs("every_method") == 1


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS"])
def test_safe_methods_pass_through_with_a_key(client: Client, method: str) -> None:
    send(client, method, "/idem/every-method/")
    response = send(client, method, "/idem/every-method/")
    assert "Idempotent-Replayed" not in response
    assert runs("every_method") == 2


def test_two_replays_are_byte_identical_and_the_first_answer_is_unmarked(client: Client) -> None:
    first = send(client, "POST", "/idem/pay/")
    replays = [send(client, "POST", "/idem/pay/") for _ in range(2)]
    assert "Idempotent-Replayed" not in first
    assert [r.content for r in replays] == [first.content] * 2


@pytest.mark.parametrize("kind", ["binary", "empty", "bare"])
def test_odd_bodies_round_trip(client: Client, kind: str) -> None:
    first = send(client, "POST", f"/idem/odd-bodies/?kind={kind}")
    again = send(client, "POST", f"/idem/odd-bodies/?kind={kind}")
    assert (again.status_code, again.content) == (first.status_code, first.content)
    assert runs("odd_bodies") == 1
    if kind == "binary":
        assert first.content.startswith(b"\x00\xff\xfe")
        for header in ("Content-Type", "Content-Disposition", "Content-Language"):
            assert again[header] == first[header], header
    if kind == "empty":
        assert (again.status_code, again.content) == (204, b"")


@pytest.mark.parametrize(
    "key", ["a", "abc-123_XYZ.~:", "has a space", "key/with/slashes", "{tag}", "*", '"quoted"']
)
def test_any_printable_key_works_and_stays_its_own(client: Client, key: str) -> None:
    first = send(client, "POST", "/idem/pay/", key)
    assert first.status_code == 201
    assert send(client, "POST", "/idem/pay/", key).content == first.content
    other = send(client, "POST", "/idem/pay/", key + "x")
    assert other.content != first.content  # another key
    assert runs("pay") == 2


def test_stacked_on_itself_the_decorator_does_not_refuse_its_own_request(client: Client) -> None:
    first = send(client, "POST", "/idem/twice/")
    again = send(client, "POST", "/idem/twice/")
    assert first.status_code == 201
    assert again.content == first.content
    assert runs("twice") == 1


def test_a_key_is_new_again_once_its_record_expired(client: Client) -> None:
    first = send(client, "POST", "/idem/short-lived/")
    record = record_keys("anonymous", "k-1").record
    wait_for(lambda: not get_redis().exists(record), what="the record expiring (ttl 0.5 s)")
    other = send(client, "POST", "/idem/short-lived/", body={"amount": 11})  # not a 422 now
    assert other.status_code == 201
    assert other.content != first.content
    assert runs("short_lived") == 2


def test_an_http404_raised_by_a_view_frees_the_key(client: Client) -> None:
    assert send(client, "POST", "/idem/missing/").status_code == 404
    assert send(client, "POST", "/idem/missing/").status_code == 404
    assert runs("missing") == 2  # raised: nothing kept


def test_a_drf_view_is_scoped_by_its_authenticated_user(client: Client) -> None:
    User.objects.create_user("ann")
    User.objects.create_user("ben")
    ann = send(client, "POST", "/idem/drf-redeem/", HTTP_X_USER="ann")
    assert ann.status_code == 201
    assert send(client, "POST", "/idem/drf-redeem/", HTTP_X_USER="ann").content == ann.content
    ben = send(client, "POST", "/idem/drf-redeem/", HTTP_X_USER="ben")
    assert json.loads(ben.content)["user"] == "ben"
    assert runs("RedeemAPIView") == 2
    # DRF refuses the anonymous request itself (403) before the method runs.
    assert send(client, "POST", "/idem/drf-redeem/").status_code == 403


def test_a_drf_view_whose_permission_read_the_body_first(client: Client) -> None:
    """A permission read ``request.data`` before the decorated method ran."""
    first = send(client, "POST", "/idem/drf-spent/")
    again = send(client, "POST", "/idem/drf-spent/")
    assert first.status_code == 201
    assert again.content == first.content
    assert send(client, "POST", "/idem/drf-spent/", body={"amount": 11}).status_code == 422
    assert runs("SpentStreamAPIView") == 1


def test_a_drf_404_answer_is_kept(client: Client) -> None:
    User.objects.create_user("ann")
    first = send(client, "DELETE", "/idem/drf-redeem/", HTTP_X_USER="ann")
    again = send(client, "DELETE", "/idem/drf-redeem/", HTTP_X_USER="ann")
    assert (first.status_code, again.status_code) == (404, 404)
    assert again["Idempotent-Replayed"] == "true"
    assert runs("RedeemAPIView") == 1


def test_refusals_leave_the_key_usable_by_the_right_request(client: Client) -> None:
    send(client, "POST", "/idem/pay/")
    assert send(client, "POST", "/idem/pay/", body={"amount": 99}).status_code == 422
    assert send(client, "POST", "/idem/pay/")["Idempotent-Replayed"] == "true"
    assert runs("pay") == 1


def test_only_the_claims_owner_ends_it(backend: Any) -> None:
    """A claim that lapsed and was taken by another request is not overwritten or freed by
    its first owner's late end."""
    keys = record_keys("anonymous", "k-owner")
    late = Claim(keys, "f" * 64, None, get_redis())
    assert late.take(get_redis(), 0) is None
    get_redis().delete(keys.record)  # its claim lapsed...
    now = Claim(keys, "f" * 64, None, get_redis())
    assert now.take(get_redis(), 0) is None  # ...and another request took the key
    late.end(b"", 60_000)
    assert get_redis().get(keys.record) == f"R|{now.token}|{'f' * 64}".encode()
    late2 = Claim(keys, "f" * 64, None, get_redis())
    late2.end(b"D|" + b"f" * 64 + b'|{"s":200,"h":[]}\nx', 60_000)
    assert get_redis().get(keys.record).startswith(b"R|")


def test_a_loser_of_the_race_with_another_body_is_told_422_not_run(client: Client) -> None:
    keys = record_keys("anonymous", "k-1")
    winner = Claim(keys, "0" * 64, None, get_redis())
    assert winner.take(get_redis(), 0) is None
    response = send(client, "POST", "/idem/pay/", HTTP_ACCEPT="application/json")
    assert response.status_code == 422
    assert runs("pay") == 0


def test_a_body_read_as_a_stream_before_the_decorator_never_fails_the_request(
    caplog: Any,
) -> None:
    from django.test import RequestFactory

    from django_redislock.views.idempotency_requests import fingerprint

    request = RequestFactory().post("/pay/", b'{"a": 1}', content_type="application/json")
    request.read()  # a middleware that read the stream itself
    with caplog.at_level("WARNING", logger="django_redislock.idempotent"):
        assert len(fingerprint(request)) == 64
    assert "leaves the body out" in caplog.text
