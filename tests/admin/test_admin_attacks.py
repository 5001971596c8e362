"""Attacks on the admin pages: hostile URLs and forms, corrupt Redis data, actions raced by
the queue, double submissions and markup in every value shown. The promise: a clear 4xx or
the page with a message, never a 500, never an action without permission, CSRF token and
confirmation, never an action on another item than the one confirmed."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client

from django_redislock import Lock, get_queue
from django_redislock.conf import conf
from django_redislock.queue.queue import Queue
from django_redislock.queue.worker.registry import live_workers
from django_redislock.templatetags.redislock_admin import duration
from tests.support.counts import job_counts
from tests.support.fixtures import Backend, configure_backend

from .test_admin import QUEUES, cell, dead_job, html, staff_client, url

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"
HOSTILE = [
    "a%2Fb",
    "a/b",
    "..",
    "../..",
    "{x}",
    "}{",
    "'\"",
    XSS,
    "a\nb",
    "a\rb",
    "a\x00b",
    "ünï€😀",
    "x" * 10_000,
    "*",
    "[a",
    "\\",
    " ",
]
PAGES_ARGS = [
    "-1",
    "0",
    "99999999999999999999",
    "1" * 5000,
    "abc",
    "1e3",
    "1.5",
    "",
    "NaN",
    "inf",
    "%00",
]


@pytest.fixture(params=["fakeredis", "redis", "cluster"])
def store(request: pytest.FixtureRequest, settings: Any) -> Backend:
    backend = configure_backend(request, settings, request.param)
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    return backend


@pytest.fixture
def standalone(redis_backend: Backend, settings: Any) -> Backend:
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    return redis_backend


@pytest.fixture
def queue(store: Backend) -> Queue:
    return get_queue("default")


@pytest.fixture
def held(store: Backend) -> Iterator[Lock]:
    lock = Lock("flash-sale:42", ttl=60)
    assert lock.acquire()
    yield lock
    if lock.owned():
        lock.release()


def no_5xx(response: Any) -> Any:
    assert response.status_code < 500, html(response)[:2000]
    return response


# --- hostile URL values -------------------------------------------------------------------


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_queue_or_state_in_the_jobs_url_is_404(
    standalone: Backend, admin_client: Client, value: str
) -> None:
    for path in [
        f"/admin/django_redislock/dashboard/queues/{quote(value, safe='')}/dead/",
        f"/admin/django_redislock/dashboard/queues/default/{quote(value, safe='')}/",
    ]:
        assert admin_client.get(path).status_code == 404


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize("action", ["release", "run", "retry", "delete", "purge"])
def test_hostile_targets_get_a_4xx_or_a_message_and_change_nothing(
    standalone: Backend, admin_client: Client, action: str, value: str
) -> None:
    queue = get_queue("default")
    dead_job(queue, "victim")
    lock = Lock("victim", ttl=60)
    assert lock.acquire()
    fields = {"name": value} if action == "release" else {"queue": "default", "job": value}
    if action == "purge":
        fields = {"queue": value}
    for response in [
        admin_client.get(url("confirm", action), fields),
        admin_client.post(url("action", action), fields),
    ]:
        no_5xx(response)
        if response.status_code == 302:
            page = html(admin_client.get(response["Location"]))
            assert XSS not in page
    assert lock.owned()
    assert queue.counts()["dead"] == 1
    assert not LogEntry.objects.exists()


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_job_ids_on_the_job_page_and_the_new_actions_change_nothing(
    standalone: Backend, admin_client: Client, value: str
) -> None:
    queue = get_queue("default")
    dead_job(queue, "victim")
    page = no_5xx(admin_client.get(url("job", "default"), {"id": value}))
    assert XSS not in html(page)
    fields = {"queue": "default", "job": value}
    no_5xx(admin_client.get(url("confirm", "requeue_running"), fields))
    no_5xx(admin_client.post(url("action", "requeue_running"), fields))
    for action in ["retry_dead", "delete_dead"]:
        for extra in [{}, {"confirmed": "1"}]:
            response = no_5xx(admin_client.post(url("bulk", action), {**fields, **extra}))
            assert XSS not in html(response)
    assert queue.counts()["dead"] == 1
    assert not LogEntry.objects.exists()


@pytest.mark.parametrize("p", PAGES_ARGS)
@pytest.mark.parametrize(
    "q", ["", "*", "[", "\\", "(", "-", "+", "\xff", "\x00", "a\nb", XSS, "x" * 10_000]
)
def test_page_numbers_and_searches_never_fail(
    standalone: Backend, admin_client: Client, p: str, q: str
) -> None:
    Lock("held:1", ttl=60).acquire()
    response = no_5xx(admin_client.get(url("locks"), {"p": p, "q": q}))
    assert response.status_code == 200
    assert XSS not in html(response)


@pytest.mark.parametrize("p", PAGES_ARGS)
def test_job_page_numbers_never_fail(queue: Queue, admin_client: Client, p: str) -> None:
    dead_job(queue, "only")
    for state in ["ready", "scheduled", "running", "dead", "done"]:
        response = admin_client.get(url("jobs", "default", state), {"p": p})
        assert response.status_code == 200, html(response)[:2000]
    assert "only" in html(admin_client.get(url("jobs", "default", "dead"), {"p": p}))


# --- forms: missing, duplicated, empty, oversized fields; GET on POST; CSRF; permission ----


@pytest.mark.parametrize(
    ("action", "fields"),
    [
        ("release", {}),
        ("release", {"name": ""}),
        ("run", {"queue": "default"}),
        ("run", {"job": "later"}),
        ("run", {"queue": "", "job": "later"}),
        ("delete", {"queue": "default", "job": ""}),
        ("purge", {}),
        ("purge", {"queue": "x" * 100_000}),
    ],
)
def test_missing_or_empty_fields_are_a_4xx(
    standalone: Backend, admin_client: Client, action: str, fields: dict[str, str]
) -> None:
    get_queue("default").enqueue("tests.tasks.record", job_id="later", delay=600)
    for response in [
        admin_client.get(url("confirm", action), fields),
        admin_client.post(url("action", action), fields),
    ]:
        assert 400 <= response.status_code < 500
    assert get_queue("default").counts()["scheduled"] == 1
    assert not LogEntry.objects.exists()


@pytest.mark.parametrize(
    "data",
    [
        {"queue": "default", "job": "later", "pad": "x" * 3_000_000},
        {"queue": "default", "job": "later", **{f"f{i}": "1" for i in range(1500)}},
    ],
)
def test_an_oversized_post_is_a_400(
    standalone: Backend, admin_client: Client, data: dict[str, str]
) -> None:
    get_queue("default").enqueue("tests.tasks.record", job_id="later", delay=600)
    assert admin_client.post(url("action", "run"), data).status_code == 400
    assert get_queue("default").counts()["scheduled"] == 1


@pytest.mark.parametrize("action", ["run", "delete"])
def test_a_duplicated_field_is_refused_not_guessed(
    queue: Queue, admin_client: Client, action: str
) -> None:
    for job_id in ["one", "two"]:
        queue.enqueue("tests.tasks.record", job_id=job_id, delay=600)
    fields = {"queue": "default", "job": ["one", "two"]}
    assert admin_client.get(url("confirm", action), fields).status_code == 400
    assert admin_client.post(url("action", action), fields).status_code == 400
    twice = {"queue": ["default", "emails"], "job": "one"}
    assert admin_client.post(url("action", action), twice).status_code == 400
    assert queue.counts()["scheduled"] == 2
    assert not LogEntry.objects.exists()


@pytest.mark.parametrize("action", ["release", "run", "retry", "delete", "purge"])
@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_action_urls_take_post_only(
    standalone: Backend, admin_client: Client, action: str, method: str
) -> None:
    dead_job(get_queue("default"), "dead")
    fields = {"queue": "default", "job": "dead", "name": "x"}
    response = getattr(admin_client, method)(url("action", action), fields)
    assert response.status_code == 405
    assert get_queue("default").counts()["dead"] == 1


@pytest.mark.parametrize("action", ["run", "retry", "delete", "purge"])
def test_a_post_without_csrf_token_does_nothing(queue: Queue, admin_user: Any, action: str) -> None:
    dead_job(queue, "dead")
    queue.enqueue("tests.tasks.record", job_id="later", delay=600)
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    job = "later" if action == "run" else "dead"
    for token in [None, "", "forged" * 11]:
        data = {"queue": "default", "job": job}
        if token is not None:
            data["csrfmiddlewaretoken"] = token
        assert client.post(url("action", action), data).status_code == 403
    assert queue.counts() == job_counts(scheduled=1, dead=1)
    assert not LogEntry.objects.exists()


@pytest.mark.parametrize(
    ("codenames", "action"),
    [
        ((), "purge"),
        (("view_dashboard",), "purge"),
        (("view_dashboard", "release_lock"), "purge"),
        (("view_dashboard", "release_lock"), "retry"),
        (("view_dashboard", "manage_queues"), "release"),
    ],
)
def test_without_the_actions_permission_nothing_is_done(
    queue: Queue, held: Lock, django_user_model: Any, codenames: tuple[str, ...], action: str
) -> None:
    dead_job(queue, "dead")
    client = staff_client(django_user_model, *codenames)
    fields = {"queue": "default", "job": "dead", "name": held.name}
    assert client.get(url("confirm", action), fields).status_code == 403
    assert client.post(url("action", action), fields).status_code == 403
    assert held.owned()
    assert queue.counts()["dead"] == 1
    assert not LogEntry.objects.exists()


@pytest.mark.parametrize(
    "next_url",
    [
        "https://evil.example/",
        "//evil.example/",
        "///evil.example/",
        "\\\\evil.example/",
        "/\\evil.example/",
        " //evil.example/",
        "\x00//evil.example/",
        "\t//evil.example/",
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "http:evil.example",
        "https:/evil.example",
        "/ok\r\nSet-Cookie: evil=1",
    ],
)
def test_next_never_leaves_the_site(queue: Queue, admin_client: Client, next_url: str) -> None:
    dead_job(queue, "dead")
    confirm = admin_client.get(
        url("confirm", "retry"), {"queue": "default", "job": "dead", "next": next_url}
    )
    assert confirm.status_code == 200
    assert "evil" not in html(confirm)
    assert "javascript:" not in html(confirm).lower()
    done = admin_client.post(
        url("action", "retry"), {"queue": "default", "job": "dead", "next": next_url}
    )
    assert done.status_code == 302
    location = done["Location"]
    assert location.startswith("/")
    assert not location.startswith(("//", "/\\"))
    assert "evil" not in location.split("?")[0]
    assert "\n" not in location
    assert "\r" not in location
    assert queue.counts()["ready"] == 1  # the action itself was done


# --- changed meanwhile, clicked twice -----------------------------------------------------


@pytest.mark.parametrize("action", ["run", "retry", "delete", "purge", "release"])
def test_a_double_submission_acts_once_and_says_so(
    queue: Queue, held: Lock, admin_client: Client, action: str
) -> None:
    dead_job(queue, "dead")
    queue.enqueue("tests.tasks.record", job_id="later", delay=600)
    fields = {
        "release": {"name": held.name},
        "run": {"queue": "default", "job": "later"},
        "purge": {"queue": "default"},
    }.get(action, {"queue": "default", "job": "dead"})
    first = admin_client.post(url("action", action), fields, follow=True)
    second = admin_client.post(url("action", action), fields, follow=True)
    assert first.status_code == second.status_code == 200
    assert "nothing was" in html(second).lower() or " now" in html(second)
    assert LogEntry.objects.count() == 1


@pytest.mark.parametrize("action", ["run", "retry", "delete"])
def test_an_action_on_a_job_now_running_or_gone_says_so(
    queue: Queue, admin_client: Client, action: str
) -> None:
    dead_job(queue, "dead")
    queue.enqueue("tests.tasks.record", job_id="later", delay=600)
    job = "later" if action == "run" else "dead"
    confirm = admin_client.get(url("confirm", action), {"queue": "default", "job": job})
    assert confirm.status_code == 200
    queue.requeue(job)  # meanwhile: made ready, then taken by a worker
    [running] = queue.pop()
    assert running.id == job
    done = admin_client.post(url("action", action), {"queue": "default", "job": job}, follow=True)
    assert done.status_code == 200
    assert "running" in html(done) or "nothing was" in html(done)
    assert queue.get(job).state == "running"
    queue.ack(running)
    gone = admin_client.post(url("action", action), {"queue": "default", "job": job}, follow=True)
    assert gone.status_code == 200
    assert "nothing was" in html(gone) or "any more" in html(gone) or "done now" in html(gone)
    assert not LogEntry.objects.exists()


def test_a_delete_confirmed_for_a_ready_job_spares_it_once_it_died(
    queue: Queue, admin_client: Client
) -> None:
    queue.enqueue("tests.tasks.boom", job_id="j", priority=100)
    confirm = admin_client.get(url("confirm", "delete"), {"queue": "default", "job": "j"})
    form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', html(confirm)))
    assert form["state"] == "ready"
    [popped] = queue.pop()  # meanwhile: it ran and failed for good
    queue.bury(popped, ValueError("card declined"), "")
    done = admin_client.post(url("action", "delete"), form, follow=True)
    assert done.status_code == 200
    assert "is dead now" in html(done)
    assert queue.get("j").state == "dead"  # its error is kept for whoever looks at it
    assert not LogEntry.objects.exists()
    again = admin_client.post(url("action", "delete"), {**form, "state": "dead"}, follow=True)
    assert "was deleted" in html(again)
    bad = admin_client.post(url("action", "delete"), {**form, "state": "done"})
    assert bad.status_code == 404


def test_a_job_of_another_queue_is_never_touched(queue: Queue, admin_client: Client) -> None:
    emails = get_queue("emails")
    dead_job(emails, "same-id")
    response = admin_client.post(
        url("action", "delete"), {"queue": "default", "job": "same-id"}, follow=True
    )
    assert response.status_code == 200
    assert emails.counts()["dead"] == 1


# --- corrupt data in Redis ----------------------------------------------------------------

CORRUPT_FIELDS = [
    {"a": "lots", "pr": "high", "sc": "soon", "e": "x", "st": "y", "f": "z"},
    {"sc": "1e30", "st": "-1e30", "f": "nan", "e": "inf"},
    {"sc": "-99999999999999999", "st": "99999999999999999"},
    {"ar": "{not json", "kw": "[1]", "t": "\xff"},
    {"ar": '{"a": 1}', "kw": '"s"', "m": "{bad", "eh": "x\n[1]\n{}"},
    {"v": "\x00{", "s": "?", "ws": ",,,"},
]


def corrupt_job(queue: Queue, job_id: str, state: str, fields: dict[str, str]) -> None:
    """A job in ``state`` whose hash then gets ``fields`` written over it."""
    dead_job(queue, job_id)
    if state != "dead":
        queue.requeue(job_id)
        if state == "running":
            queue.pop()
    queue.client.hset(queue.base + "j:" + job_id, mapping=fields)


@pytest.mark.parametrize("fields", CORRUPT_FIELDS)
@pytest.mark.parametrize("state", ["ready", "running", "dead"])
def test_a_job_hash_with_garbage_fields_is_shown(
    queue: Queue, admin_client: Client, fields: dict[str, str], state: str
) -> None:
    dead_job(queue, "good-job")
    corrupt_job(queue, "bad-job", state, fields)
    page = admin_client.get(url("jobs", "default", state))
    assert page.status_code == 200, html(page)[:3000]
    assert "bad-job" in html(page)
    assert admin_client.get(url("dashboard_changelist")).status_code == 200
    for action in ["run", "retry", "delete"]:
        no_5xx(admin_client.get(url("confirm", action), {"queue": "default", "job": "bad-job"}))


@pytest.mark.parametrize("fields", CORRUPT_FIELDS)
def test_a_scheduled_job_with_garbage_fields_is_shown(
    queue: Queue, admin_client: Client, fields: dict[str, str]
) -> None:
    queue.enqueue("tests.tasks.record", job_id="bad-job", delay=600)
    queue.client.hset(queue.base + "j:bad-job", mapping=fields)
    page = admin_client.get(url("jobs", "default", "scheduled"))
    assert page.status_code == 200, html(page)[:3000]
    assert "bad-job" in html(page)
    confirm = admin_client.get(url("confirm", "run"), {"queue": "default", "job": "bad-job"})
    no_5xx(confirm)


@pytest.mark.parametrize("state", ["ready", "scheduled", "running", "dead"])
def test_an_id_without_a_hash_or_with_another_type_is_shown(
    queue: Queue, admin_client: Client, state: str
) -> None:
    key = {"ready": "ready", "scheduled": "sched", "running": "run", "dead": "dead"}[state]
    queue.client.zadd(queue.base + key, {"no-hash": 1, "a-string": 2, "a-list": 3})
    queue.client.set(queue.base + "j:a-string", "garbage")
    queue.client.rpush(queue.base + "j:a-list", "garbage")
    page = admin_client.get(url("jobs", "default", state))
    assert page.status_code == 200, html(page)[:3000]
    for job_id in ["no-hash", "a-string", "a-list"]:
        assert f'data-job="{job_id}"' in html(page)
        for action in ["run", "retry", "delete"]:
            fields = {"queue": "default", "job": job_id}
            no_5xx(admin_client.get(url("confirm", action), fields, follow=True))
            no_5xx(admin_client.post(url("action", action), fields, follow=True))
    assert no_5xx(admin_client.get(url("dashboard_changelist"))).status_code == 200


@pytest.mark.parametrize("kind", ["list", "garbage"])
def test_a_lock_key_of_another_type_or_garbage_is_survived(
    held: Lock, admin_client: Client, kind: str
) -> None:
    client = get_queue("default").client
    client.delete(held.keys[0])
    if kind == "list":
        client.rpush(held.keys[0], "garbage")
    else:
        client.set(held.keys[0], "\xff<script>alert(1)</script>", px=60_000)
    page = admin_client.get(url("locks"))
    assert page.status_code == 200, html(page)[:3000]
    assert "<script>alert" not in html(page)
    fields = {"name": held.name}
    no_5xx(admin_client.get(url("confirm", "release"), fields, follow=True))
    no_5xx(admin_client.post(url("action", "release"), fields, follow=True))


def worker_entry(client: Any, worker_id: str, value: str | bytes) -> None:
    prefix = conf.KEY_PREFIX
    client.set(f"{prefix}:{{W}}:w:{worker_id}", value, ex=60)
    client.zadd(f"{prefix}:{{W}}:workers", {worker_id: time.time() * 1000 + 60_000})


GOOD_WORKER = {
    "id": "good",
    "host": "h",
    "pid": 1,
    "queues": ["default"],
    "started": 0,
    "beat": 0,
    "jobs": ["default:j1"],
    "processed": 1,
    "failed": 0,
    "concurrency": 1,
}
UNREADABLE_WORKERS = [b"\xff\xfe not even text", "{not json", ""]
GARBAGE_WORKERS = [
    "null",
    "[1, 2]",
    '"a string"',
    "42",
    json.dumps({**GOOD_WORKER, "id": "w2", "beat": "yesterday", "started": None}),
    json.dumps({**GOOD_WORKER, "id": "w3", "jobs": "default:j1"}),
    json.dumps({**GOOD_WORKER, "id": "w4", "jobs": [1, None, {"a": 1}, "no-colon"]}),
    json.dumps({**GOOD_WORKER, "id": "w5", "queues": 5, "beat": 1e308 * 10}),
    json.dumps({"id": {"nested": XSS}}),
]


def beside_a_good_worker(worker_id: str, value: str | bytes) -> None:
    """The registry holds ``GOOD_WORKER`` and, as ``worker_id``, ``value``."""
    client = get_queue("default").client
    worker_entry(client, "good", json.dumps(GOOD_WORKER))
    worker_entry(client, worker_id, value)


@pytest.mark.parametrize("value", GARBAGE_WORKERS)
def test_the_workers_page_shows_a_garbage_registry_entry(
    store: Backend, admin_client: Client, value: str
) -> None:
    beside_a_good_worker("bad", value)
    page = admin_client.get(url("workers"))
    assert page.status_code == 200, html(page)[:3000]
    assert 'data-worker="good"' in html(page)
    assert html(page).count("<tr data-worker=") == 2  # the bad one too
    assert "<script>alert" not in html(page)


@pytest.mark.parametrize("value", UNREADABLE_WORKERS)
def test_the_workers_page_says_a_registry_entry_is_unreadable(
    store: Backend, admin_client: Client, value: str | bytes
) -> None:
    beside_a_good_worker("bad", value)
    page = admin_client.get(url("workers"))
    assert page.status_code == 200, html(page)[:3000]
    assert "registry entry in Redis is unreadable" in html(page)


@pytest.mark.parametrize("value", UNREADABLE_WORKERS)
def test_live_workers_flags_an_unreadable_entry(store: Backend, value: str | bytes) -> None:
    beside_a_good_worker("bad", value)
    workers = {w["id"]: w for w in live_workers()}
    assert set(workers) == {"good", "bad"}
    assert "unreadable" in workers["bad"]
    assert "unreadable" not in workers["good"]


# --- every value from Redis is escaped ----------------------------------------------------


def test_every_value_from_redis_is_escaped(queue: Queue, admin_client: Client) -> None:
    job_id = "x<script>alert(1)</script>"
    queue.enqueue(
        "tests.tasks.boom",
        args=[XSS],
        kwargs={XSS: XSS},
        job_id=job_id,
        priority=100,
        meta={"m": XSS},
    )
    [popped] = queue.pop()
    queue.bury(popped, ValueError(XSS), f"Traceback {XSS}")
    client = queue.client
    worker_entry(
        client,
        "w<script>alert(1)</script>",
        json.dumps(
            {
                **GOOD_WORKER,
                "id": f"w{XSS}",
                "host": XSS,
                "queues": [XSS],
                "jobs": [f"default:{XSS}"],
                "pid": XSS,
                "processed": XSS,
            }
        ),
    )
    lock = Lock("lock<b>", ttl=60)
    assert lock.acquire()
    pages = [
        admin_client.get(url("jobs", "default", "dead")),
        admin_client.get(url("confirm", "retry"), {"queue": "default", "job": job_id}),
        admin_client.get(url("confirm", "delete"), {"queue": "default", "job": job_id}),
        admin_client.get(url("workers")),
        admin_client.get(url("locks"), {"q": XSS}),
        admin_client.get(url("locks")),
        admin_client.post(url("action", "retry"), {"queue": "default", "job": job_id}, follow=True),
        admin_client.post(url("action", "retry"), {"queue": "default", "job": job_id}, follow=True),
    ]
    for page in pages:
        assert page.status_code == 200, html(page)[:3000]
        assert "<script>alert" not in html(page)
        assert "lock<b>" not in html(page)
    assert "&lt;script&gt;" in html(pages[0])
    assert "&lt;script&gt;" in html(pages[3])


@pytest.mark.parametrize("state", ["ready", "scheduled", "running", "dead"])
def test_a_state_set_of_another_type_is_shown_on_the_page(
    queue: Queue, admin_client: Client, state: str
) -> None:
    key = {"ready": "ready", "scheduled": "sched", "running": "run", "dead": "dead"}[state]
    queue.client.set(queue.base + key, "garbage")
    dead_job(get_queue("emails"), "fine")
    queues = admin_client.get(url("dashboard_changelist"))
    assert queues.status_code == 200
    assert "WRONGTYPE" in html(queues)
    assert cell(queues, "emails", "dead") == "1"  # the other queues still show
    jobs = admin_client.get(url("jobs", "default", state))
    assert jobs.status_code == 200
    assert "WRONGTYPE" in html(jobs)
    confirm = admin_client.get(url("confirm", "purge"), {"queue": "default"})
    assert confirm.status_code == 200
    assert "WRONGTYPE" in html(confirm)
    assert "Yes, purge" not in html(confirm)


@pytest.mark.parametrize("kind", ["string", "missing"])
def test_a_dead_id_whose_key_is_no_hash_can_be_deleted(
    queue: Queue, admin_client: Client, kind: str
) -> None:
    queue.client.zadd(queue.base + "dead", {"broken": 1})
    if kind == "string":
        queue.client.set(queue.base + "j:broken", "garbage")
    done = admin_client.post(url("action", "delete"), {"queue": "default", "job": "broken"})
    assert done.status_code == 302
    assert queue.counts()["dead"] == 0


@pytest.mark.parametrize("value", [None, "", "abc", float("nan"), float("inf"), [], "1e999"])
def test_a_duration_of_no_number_is_a_dash(value: Any) -> None:
    assert duration(value) == "—"
