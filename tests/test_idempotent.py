"""``@redis_idempotent`` seen through the test client, on fakeredis, a real server and
Cluster: a key runs its view once, repeats replay it, and every refusal is the documented
one. (Real servers with concurrent clients and killed workers: ``test_idempotent_server``.)"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import AsyncClient, Client

from django_redislock import get_redis, redis_idempotent
from django_redislock.views.idempotency_records import REPLAY_LIMIT, record_keys
from tests.idempotent_views import FAIL_ONCE, GATE, runs
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.usefixtures("backend"), pytest.mark.django_db(transaction=True)]

KEY = "order-5f1c2a"


def post(client: Client, url: str, key: str | None = KEY, body: Any = None, **extra: Any) -> Any:
    headers = {} if key is None else {"HTTP_IDEMPOTENCY_KEY": key}
    return client.post(
        url, json.dumps(body or {"points": 50}), content_type="application/json", **headers, **extra
    )


def test_the_first_request_runs_and_a_repeat_replays_it_byte_for_byte(client: Client) -> None:
    first = post(client, "/idem/pay/")
    assert first.status_code == 201
    assert "Idempotent-Replayed" not in first
    again = post(client, "/idem/pay/")
    assert runs("pay") == 1
    assert again.status_code == 201
    assert again.content == first.content
    assert again["Content-Type"] == first["Content-Type"] == "application/json"
    assert again["Location"] == "/orders/1/"
    assert again["Idempotent-Replayed"] == "true"
    assert "X-Not-Replayed" not in again  # content headers and Location only


def test_another_key_runs_the_view_again(client: Client) -> None:
    first, second = post(client, "/idem/pay/", "a-1"), post(client, "/idem/pay/", "a-2")
    assert runs("pay") == 2
    assert first.json()["order"] != second.json()["order"]


def test_no_key_runs_unguarded_unless_required(client: Client) -> None:
    assert post(client, "/idem/pay/", None).status_code == 201
    assert post(client, "/idem/pay/", None).status_code == 201
    assert runs("pay") == 2
    missing = post(client, "/idem/pay-required/", None, HTTP_ACCEPT="application/json")
    assert missing.status_code == 400
    assert missing.json()["error"] == "idempotency-key-missing"
    assert "X-Request-Id" in missing.json()["detail"]
    # (that view reads its key from another header)
    ok = client.post("/idem/pay-required/", HTTP_X_REQUEST_ID="r-1")
    assert ok.status_code == 201
    assert runs("pay_required") == 1


def test_other_methods_are_not_guarded(client: Client) -> None:
    client.get("/idem/pay/", HTTP_IDEMPOTENCY_KEY=KEY)
    client.get("/idem/pay/", HTTP_IDEMPOTENCY_KEY=KEY)
    assert runs("pay") == 2


@pytest.mark.parametrize(
    "key",
    ["", "x" * 256, "x" * 10_000, "tab\there", "new\nline", "nul\x00", "caf\u00e9", "\u2603"],
    ids=["empty", "256", "10kB", "tab", "newline", "nul", "latin1", "unicode"],
)
def test_a_malformed_key_is_400_and_stores_nothing(client: Client, key: str) -> None:
    response = client.post("/idem/pay/", HTTP_IDEMPOTENCY_KEY=key, HTTP_ACCEPT="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "idempotency-key-malformed"
    assert runs("pay") == 0
    assert not get_redis().exists(record_keys("anonymous", key).record)


def test_a_key_of_255_printable_characters_is_fine(client: Client) -> None:
    key = "".join(chr(32 + i % 95) for i in range(255))
    assert post(client, "/idem/pay/", key).status_code == 201
    assert post(client, "/idem/pay/", key)["Idempotent-Replayed"] == "true"


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/idem/pay/", {"points": 51}),  # another body
        ("/idem/pay/?coupon=1", None),  # another query string
        ("/idem/cbv/", None),  # another path
    ],
)
def test_the_same_key_on_another_request_is_422(client: Client, url: str, body: Any) -> None:
    post(client, "/idem/pay/")
    reused = post(client, url, body=body, HTTP_ACCEPT="application/json")
    assert reused.status_code == 422
    assert reused.json()["error"] == "idempotency-key-reused"
    assert "Retry-After" not in reused
    assert runs("pay") + runs("PayView") == 1


def test_another_method_with_the_same_key_is_422(client: Client) -> None:
    post(client, "/idem/pay/")
    assert client.delete("/idem/pay/", HTTP_IDEMPOTENCY_KEY=KEY).status_code == 422


def test_4xx_answers_are_kept_and_replayed(client: Client) -> None:
    first = post(client, "/idem/pay/?status=402")
    again = post(client, "/idem/pay/?status=402")
    assert (first.status_code, again.status_code) == (402, 402)
    assert again.content == first.content
    assert runs("pay") == 1


@pytest.mark.parametrize("query", ["status=500", "status=503", "status=429", "raise=1"])
def test_a_5xx_a_429_or_an_exception_stores_nothing_and_frees_the_key(
    client: Client, query: str
) -> None:
    client.raise_request_exception = False
    first = post(client, f"/idem/pay/?{query}")
    assert first.status_code in (500, 503, 429)
    post(client, f"/idem/pay/?{query}")
    assert runs("pay") == 2  # the repeat ran again
    assert not get_redis().exists(record_keys("anonymous", KEY).record)


def test_an_exception_propagates_to_django(client: Client) -> None:
    with pytest.raises(RuntimeError, match="the view failed"):
        post(client, "/idem/pay/?raise=1")
    assert not get_redis().exists(record_keys("anonymous", KEY).record)


def test_a_busy_answer_from_a_lock_below_is_not_kept(client: Client) -> None:
    from django_redislock import Lock

    with Lock("points:shared"):
        busy = post(client, "/idem/pay-locked/")
        assert busy.status_code == 409
        assert busy.has_header("Retry-After")
    done = post(client, "/idem/pay-locked/")
    assert done.status_code == 201
    assert post(client, "/idem/pay-locked/")["Idempotent-Replayed"] == "true"
    assert runs("pay_locked") == 1


HELD: list[threading.Thread] = []


def held_in_flight(client_factory: Any, url: str) -> threading.Thread:
    """Start a request that blocks in its view (?wait=1) until ``release()``."""
    thread = threading.Thread(target=lambda: post(client_factory(), f"{url}?wait=1"), daemon=True)
    thread.start()
    HELD.append(thread)
    return thread


@pytest.fixture(autouse=True)
def _no_request_left_held() -> Iterator[None]:
    """A test that failed while a request was held lets it go: left blocked, it would take
    the next test's release for its own."""
    yield
    while HELD:
        thread = HELD.pop()
        if thread.is_alive():
            release()
            thread.join(30)


def release() -> None:
    get_redis().rpush(GATE, 1)


def test_a_repeat_while_the_first_runs_is_409_with_retry_after(client: Client) -> None:
    first = held_in_flight(Client, "/idem/pay/")
    wait_for(lambda: runs("pay") == 1, what="the first request in its view")
    busy = post(client, "/idem/pay/?wait=1", HTTP_ACCEPT="application/json")
    assert busy.status_code == 409
    assert busy.json()["error"] == "idempotency-key-in-flight"
    assert busy["Retry-After"] == "1"
    release()
    first.join(30)
    assert post(client, "/idem/pay/?wait=1")["Idempotent-Replayed"] == "true"
    assert runs("pay") == 1


def test_with_a_timeout_a_repeat_waits_for_the_first_and_replays_it(client: Client) -> None:
    answers: list[Any] = []
    first = threading.Thread(
        target=lambda: answers.append(post(Client(), "/idem/pay-waiting/?wait=1")), daemon=True
    )
    first.start()
    wait_for(lambda: runs("pay_waiting") == 1, what="the first request in its view")
    repeats = [
        threading.Thread(
            target=lambda: answers.append(post(Client(), "/idem/pay-waiting/?wait=1")),
            daemon=True,
        )
        for _ in range(3)
    ]
    for thread in repeats:
        thread.start()
    wait_for(lambda: get_redis().exists(record_keys("anonymous", KEY).waiting), what="a waiter")
    release()
    for thread in [first, *repeats]:
        thread.join(30)
    assert runs("pay_waiting") == 1
    assert len(answers) == 4
    assert {a.content for a in answers} == {answers[0].content}
    assert sorted(a.get("Idempotent-Replayed", "") for a in answers) == ["", "true", "true", "true"]


def test_a_waiting_repeat_runs_the_view_itself_when_the_first_failed() -> None:
    get_redis().set(FAIL_ONCE, 1)
    answers: dict[str, Any] = {}

    def send(who: str) -> None:
        answers[who] = post(Client(), "/idem/pay-waiting/?wait=1")

    first = threading.Thread(target=send, args=("first",), daemon=True)
    first.start()
    wait_for(lambda: runs("pay_waiting") == 1, what="the first request in its view")
    repeat = threading.Thread(target=send, args=("repeat",), daemon=True)
    repeat.start()
    wait_for(lambda: get_redis().exists(record_keys("anonymous", KEY).waiting), what="a waiter")
    release()  # the first answers 500 and frees the key: the repeat claims it and runs
    wait_for(lambda: runs("pay_waiting") == 2, what="the repeat in the view")
    release()
    first.join(30)
    repeat.join(30)
    assert answers["first"].status_code == 500
    assert answers["repeat"].status_code == 201
    assert "Idempotent-Replayed" not in answers["repeat"]


def test_a_running_claim_under_another_request_is_422(client: Client) -> None:
    get_redis().set(record_keys("anonymous", KEY).record, "R|someone|" + "0" * 64, px=60_000)
    assert post(client, "/idem/pay-waiting/").status_code == 422
    assert runs("pay_waiting") == 0


def test_a_streaming_response_runs_once_and_a_repeat_is_told_so(client: Client) -> None:
    first = post(client, "/idem/pay-streaming/")
    assert b"".join(first.streaming_content) == b"one,two"
    again = post(client, "/idem/pay-streaming/", HTTP_ACCEPT="application/json")
    assert again.status_code == 409
    assert again.json()["error"] == "idempotency-key-used"
    assert again.json()["status"] == 200
    assert "Retry-After" not in again
    assert runs("pay_streaming") == 1


def test_a_response_over_the_replay_limit_is_kept_by_its_fingerprint_only(client: Client) -> None:
    first = post(client, f"/idem/pay-big/?size={REPLAY_LIMIT + 1}")
    assert len(first.content) == REPLAY_LIMIT + 1
    again = post(client, f"/idem/pay-big/?size={REPLAY_LIMIT + 1}", HTTP_ACCEPT="application/json")
    assert again.status_code == 409
    assert "too large" in again.json()["detail"]
    assert get_redis().strlen(record_keys("anonymous", KEY).record) < 200
    assert runs("pay_big") == 1
    size = REPLAY_LIMIT  # just within: replayed
    whole = post(client, f"/idem/pay-big/?size={size}", key="k-fits")
    assert post(client, f"/idem/pay-big/?size={size}", key="k-fits").content == whole.content


def test_a_template_response_is_stored_as_rendered(client: Client) -> None:
    first = post(client, "/idem/pay-template/")
    again = post(client, "/idem/pay-template/")
    assert first.content.startswith(b"order ")
    assert (again.status_code, again.content) == (201, first.content)
    assert runs("pay_template") == 1


def test_class_based_and_drf_views(client: Client) -> None:
    for url, name in (("/idem/cbv/", "PayView"), ("/idem/drf/", "PayAPIView")):
        first = post(client, url, key=f"k-{name}")
        again = post(client, url, key=f"k-{name}")
        assert first.status_code == 201
        assert again.content == first.content
        assert again["Idempotent-Replayed"] == "true"
        assert runs(name) == 1
    assert json.loads(first.content)["got"] == {"points": 50}


def test_async_views_run_once_and_replay() -> None:
    async def scenario() -> list[Any]:
        client = AsyncClient()
        headers = {"Idempotency-Key": KEY}
        first = await client.post("/idem/apay/", {"a": 1}, "application/json", headers=headers)
        again = await client.post("/idem/apay/", {"a": 1}, "application/json", headers=headers)
        other = await client.post("/idem/apay/", {"a": 2}, "application/json", headers=headers)
        return [first, again, other]

    first, again, other = asyncio.run(scenario())
    assert first.status_code == 201
    assert (again.content, again["Idempotent-Replayed"]) == (first.content, "true")
    assert other.status_code == 422
    assert runs("apay") == 1


def test_async_failures_free_the_key_and_async_waiters_replay() -> None:
    async def scenario() -> list[Any]:
        client = AsyncClient(raise_request_exception=False)
        headers = {"Idempotency-Key": KEY}
        failed = await client.post("/idem/apay/?status=500", headers=headers)
        raised = await client.post("/idem/apay/?raise=1", headers=headers)
        first = asyncio.ensure_future(
            client.post("/idem/apay-waiting/?wait=1", headers={"Idempotency-Key": "w"})
        )
        await asyncio.to_thread(wait_for, lambda: runs("apay_waiting") == 1)
        waiting = [
            asyncio.ensure_future(
                client.post("/idem/apay-waiting/?wait=1", headers={"Idempotency-Key": "w"})
            )
            for _ in range(5)
        ]
        await asyncio.sleep(0.05)
        release()
        return [failed, raised, await first, *await asyncio.gather(*waiting)]

    failed, raised, first, *waiting = asyncio.run(scenario())
    assert (failed.status_code, raised.status_code) == (500, 500)
    assert runs("apay") == 2
    assert runs("apay_waiting") == 1
    assert all(w.content == first.content for w in waiting)
    assert all(w["Idempotent-Replayed"] == "true" for w in waiting)


def test_keys_are_per_user_and_anonymous_visitors_are_refused(client: Client) -> None:
    assert post(client, "/idem/pay-per-user/", HTTP_ACCEPT="application/json").status_code == 403
    alice = User.objects.create_user("alice")
    bob = User.objects.create_user("bob")
    client.force_login(alice)
    first = post(client, "/idem/pay-per-user/")
    assert post(client, "/idem/pay-per-user/").content == first.content
    other = Client()
    other.force_login(bob)
    assert post(other, "/idem/pay-per-user/").content != first.content  # bob's own key
    assert runs("pay_per_user") == 2


def test_a_scope_callable_decides_whose_key_it_is(client: Client) -> None:
    one = post(client, "/idem/pay-by-tenant/", HTTP_X_TENANT="one")
    assert post(client, "/idem/pay-by-tenant/", HTTP_X_TENANT="one").content == one.content
    assert post(client, "/idem/pay-by-tenant/", HTTP_X_TENANT="two").content != one.content
    assert runs("pay_by_tenant") == 2


def test_a_claim_left_by_a_dead_process_lapses_within_its_ttl(
    client: Client, settings: Any
) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_TTL": 1.5}
    key = record_keys("anonymous", KEY)
    client.raise_request_exception = False
    fp_holder: list[str] = []

    # A claim taken by a process that died at once: the record's token is nobody's.
    post(client, "/idem/pay/")  # our fingerprint, stored...
    stored = get_redis().get(key.record)
    fp_holder.append(stored.split(b"|")[1].decode())
    # (long enough for the next request to find it on a stalled machine)
    get_redis().set(key.record, f"R|dead|{fp_holder[0]}", px=1000)
    assert post(client, "/idem/pay/").status_code == 409
    wait_for(lambda: not get_redis().exists(key.record), what="the dead claim lapsing")
    assert post(client, "/idem/pay/").status_code == 201
    assert runs("pay") == 2


def test_the_claim_is_renewed_while_a_slow_view_runs(settings: Any) -> None:
    # (a TTL a stalled machine does not outlast: a stall longer than the TTL rightly loses
    # the claim, and no renewal comes)
    settings.REDISLOCK = {**settings.REDISLOCK, "LOCK_TTL": 1.5}
    key = record_keys("anonymous", KEY)
    first = held_in_flight(Client, "/idem/pay/")
    wait_for(lambda: runs("pay") == 1, what="the first request in its view")
    started = get_redis().pttl(key.record)
    # Past the moment its TTL was set, the claim is still there, renewed.
    wait_for(lambda: get_redis().pttl(key.record) > started, what="a renewal", timeout=10)
    assert get_redis().get(key.record).startswith(b"R|")
    release()
    first.join(30)
    assert get_redis().get(key.record).startswith(b"D|")


@pytest.mark.parametrize(
    "value",
    [
        b"garbage",
        b"D|nothex|{}",
        b"D|" + b"a" * 64 + b"|{not json\nbody",
        b"N|" + b"a" * 64 + b"|[]",
    ],
    ids=["garbage", "bad-fingerprint", "bad-json", "bad-meta"],
)
def test_a_corrupt_record_is_replaced_and_the_request_runs_as_new(
    client: Client, value: bytes, caplog: Any
) -> None:
    key = record_keys("anonymous", KEY)
    get_redis().set(key.record, value)
    with caplog.at_level(logging.WARNING, logger="django_redislock.idempotent"):
        first = post(client, "/idem/pay/")
    assert first.status_code == 201
    assert "corrupt" in caplog.text or "unreadable" in caplog.text
    assert post(client, "/idem/pay/")["Idempotent-Replayed"] == "true"
    assert runs("pay") == 1


def test_a_record_of_another_type_is_replaced(client: Client) -> None:
    key = record_keys("anonymous", KEY)
    get_redis().hset(key.record, "a", "b")
    assert post(client, "/idem/pay/").status_code == 201
    assert post(client, "/idem/pay/")["Idempotent-Replayed"] == "true"


def test_a_record_whose_fingerprint_matches_but_whose_headers_do_not_parse(client: Client) -> None:
    post(client, "/idem/pay/")
    key = record_keys("anonymous", KEY)
    stored = get_redis().get(key.record)
    fp = stored.split(b"|")[1]
    get_redis().set(key.record, b"D|" + fp + b'|{"s":201,"h":[["only-one"]]}\nbody')
    assert post(client, "/idem/pay/").status_code == 201  # treated as new
    assert runs("pay") == 2


@pytest.mark.parametrize(
    ("argument", "value", "error"),
    [
        ("header", "", TypeError),
        ("required", "yes", TypeError),
        ("ttl", 0, ValueError),
        ("ttl", "1d", TypeError),
        ("timeout", -1, ValueError),
        ("methods", "POST", TypeError),
        ("scope", "user", TypeError),
        ("anonymous", "everyone", ValueError),
        ("on_redis_error", "ignore", ValueError),
        ("using", 3, TypeError),
    ],
)
def test_bad_arguments_name_themselves(argument: str, value: Any, error: type) -> None:
    with pytest.raises(error, match=argument):
        redis_idempotent(**{argument: value})


def test_stacked_under_a_lock_a_busy_lock_never_reaches_the_record(client: Client) -> None:
    from django_redislock import Lock

    with Lock("points:outer"):
        assert post(client, "/idem/locked-pay/").status_code == 409
    first = post(client, "/idem/locked-pay/")
    assert post(client, "/idem/locked-pay/").content == first.content
    assert runs("locked_pay") == 1


@pytest.fixture
def redis_down(backend: Any, settings: Any) -> None:
    from tests.support.servers import free_port

    settings.REDISLOCK = {"URL": f"redis://127.0.0.1:{free_port()}/0"}


@pytest.mark.usefixtures("redis_down")
def test_redis_down_answers_503_or_runs_unguarded_when_told_to(client: Client) -> None:
    answers = [post(client, "/idem/pay/", HTTP_ACCEPT="application/json") for _ in (1, 2)]
    assert [a.status_code for a in answers] == [503, 503]
    assert answers[0].json()["error"] == "redis-unavailable"
    assert post(client, "/idem/pay-fail-open/").status_code == 201

    async def scenario() -> list[int]:
        client = AsyncClient()
        headers = {"Idempotency-Key": KEY}
        closed = await client.post("/idem/apay/", headers=headers)
        opened = await client.post("/idem/apay-fail-open/", headers=headers)
        return [closed.status_code, opened.status_code]

    assert asyncio.run(scenario()) == [503, 201]
