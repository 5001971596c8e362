"""Planted rows and hostile page numbers on every admin page (issue 24, point 4): a name or
id written into Redis by something else than this app (10 kB long, NUL, braces, a
right-to-left override, tabs, newlines, bytes that are no UTF-8, markup) is shown visible,
bounded and flagged, or set aside with a note; the rest of the page is intact, and no page
answers 5xx. A page number that is no page shows the first page, one past the end the last.
On fakeredis and a real redis-server (``test_admin_attacks`` has the Cluster cases)."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from django.test import Client

from django_redislock import Lock, Semaphore, Stock, get_queue, get_redis
from django_redislock.locks.keys import index_keys, lock_keys, shard_base
from django_redislock.queue.queue import Queue
from django_redislock.stock.keys import names_keys
from tests.support.fixtures import Backend, configure_backend

from .test_admin import QUEUES, dead_job, html, rows, url
from .test_admin_attacks import GOOD_WORKER, beside_a_good_worker

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"
PLANTED: list[str | bytes] = [
    "x" * 10_000,
    "nul\x00name",
    "{brace}",
    "rtl\u202eevil",
    "tab\tname",
    "new\nline",
    b"\xff\xfe-not-utf8",
    XSS,
    "zero\u200bwidth",
]
# Planted, yet a valid name (of a lock, stock or job): shown escaped, not flagged
VALID = {XSS}
# What no page may hold raw: the planted characters that hide or disguise text
RAW = ["\x00", "\u202e", "\u200b", "x" * 1000, "<script>alert"]
STATES = ["ready", "scheduled", "running", "dead", "done"]


@pytest.fixture(params=["fakeredis", "redis"])
def store(request: pytest.FixtureRequest, settings: Any) -> Backend:
    backend = configure_backend(request, settings, request.param)
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": QUEUES}
    return backend


def clean(response: Any) -> str:
    """The page, checked: no raw planted character, but in what echoes its URL (the search
    box, as typed; links to this page with another option, URL-encoded)."""
    page = html(response)
    assert response.status_code == 200, page[:3000]
    page = re.sub(r'<input type="text" size="40" name="q" value="[^"]*" id="searchbar">', "", page)
    page = re.sub(r'href="\?[^"]*"', "", page)
    for raw in RAW:
        assert raw not in page, f"{raw[:20]!r} reached the page"
    return page


def raw_bytes(name: str | bytes) -> bytes:
    return name if isinstance(name, bytes) else name.encode()


def plant_lock(name: str | bytes) -> None:
    """A held lock named ``name`` as the lock scripts would index it, bypassing validation."""
    client, base = get_redis(), shard_base(0)
    now = int(time.time() * 1000)
    keys = index_keys(base)
    client.zadd(keys.expiries, {name: now + 60_000})
    client.zadd(keys.names, {name: 0})
    client.set(lock_keys(base, "").lock.encode() + raw_bytes(name), f"t|{now}|1|7|h", px=60_000)


def jobs_in_every_state(queue: Queue) -> dict[str, str]:
    """One genuine job per state, by state: the models planted jobs copy."""
    dead_job(queue, "good-dead")
    queue.enqueue("tests.tasks.record", job_id="good-running", priority=100)
    [running] = queue.pop()
    queue.enqueue("tests.tasks.record", job_id="good-done", priority=100)
    [done] = queue.pop()
    queue.ack(done, "42")
    queue.enqueue("tests.tasks.record", job_id="good-ready")
    queue.enqueue("tests.tasks.record", job_id="good-scheduled", delay=600)
    assert running.id == "good-running"
    return {state: f"good-{state}" for state in STATES}


def plant_job(queue: Queue, model: str, state: str, job_id: str | bytes) -> None:
    """A job ``job_id`` in ``state``, a copy of job ``model`` (in that state)."""
    client = queue.client
    if state == "done":
        state_set, hashed = queue.keys.done, queue.keys.result
    else:
        state_set, hashed = queue.keys.of_state(state), queue.keys.job
    fields = client.hgetall(hashed(model))
    assert fields
    client.hset(hashed("").encode() + raw_bytes(job_id), mapping=fields)
    client.zadd(state_set, {job_id: client.zscore(state_set, model)})


# --- planted names and ids ----------------------------------------------------------------


@pytest.mark.parametrize("name", PLANTED)
def test_a_planted_lock_name_is_flagged_and_the_others_show(
    store: Backend, admin_client: Client, name: str | bytes
) -> None:
    good = Lock("good-lock", ttl=60)
    assert good.acquire()
    plant_lock(name)
    for query in [{}, {"q": "g"}, {"q": raw_bytes(name)[:3].decode(errors="replace")}]:
        clean(admin_client.get(url("locks"), query))
    page = clean(admin_client.get(url("locks")))
    assert "<code>good-lock</code>" in page
    if isinstance(name, bytes):  # read back by a name it was not written under: ended
        return
    assert rows(admin_client.get(url("locks")), "locks") == 2
    if name in VALID:
        assert "&lt;script&gt;" in page
        assert page.count("Force release") == 2
    else:
        assert "Not a valid name" in page
        assert page.count("Force release") == 1  # not offered for what cannot be released


@pytest.mark.parametrize("name", PLANTED)
def test_a_planted_stock_name_is_set_aside_and_the_others_show(
    store: Backend, admin_client: Client, name: str | bytes
) -> None:
    for good in ["a-good", "z-good"]:
        Stock(good).set(7)
    get_redis().zadd(names_keys()[0], {name: 0})
    page = clean(admin_client.get(url("stocks")))
    assert rows(admin_client.get(url("stocks")), "stocks") == 3
    assert ("Not a valid name" in page) is (name not in VALID)
    for good in ["a-good", "z-good"]:
        row = re.search(rf"<code>{good}</code></th>(.*?)</tr>", page, re.S)
        assert row
        assert re.findall(r'<td class="num">([^<]*)</td>', row.group(1))[0] == "7"
    for query in ["a", "\xff", "\x00", "{", XSS, "\u202e", "y" * 10_000]:  # echoed in links
        clean(admin_client.get(url("stocks"), {"q": query}))
        clean(admin_client.get(url("locks"), {"q": query}))


@pytest.mark.parametrize("job_id", PLANTED)
@pytest.mark.parametrize("state", STATES)
def test_a_planted_job_id_is_flagged_and_the_others_show(
    store: Backend, admin_client: Client, state: str, job_id: str | bytes
) -> None:
    queue = get_queue("default")
    models = jobs_in_every_state(queue)
    plant_job(queue, models[state], state, job_id)
    page = clean(admin_client.get(url("jobs", "default", state)))
    assert f'data-job="{models[state]}"' in page
    if isinstance(job_id, bytes):  # no id to read it by: said, not shown
        assert "1 job counted on this page is not shown" in page
    else:
        assert rows(admin_client.get(url("jobs", "default", state)), "jobs") == 2
        assert ("Not a valid job id" in page) is (job_id not in VALID)
    clean(admin_client.get(url("dashboard_changelist")))
    shown = raw_bytes(job_id).decode(errors="replace")
    clean(admin_client.get(url("job", "default"), {"id": shown}))


@pytest.mark.parametrize("job_id", [n for n in PLANTED if isinstance(n, str)])
def test_the_job_page_shows_a_planted_job_flagged(
    store: Backend, admin_client: Client, job_id: str
) -> None:
    queue = get_queue("default")
    plant_job(queue, jobs_in_every_state(queue)["dead"], "dead", job_id)
    page = clean(admin_client.get(url("job", "default"), {"id": job_id}))
    assert "No job" not in page
    assert ("Not a valid name" in page) is (job_id not in VALID)
    assert "card declined" in page


@pytest.mark.parametrize(
    "job_id", [*[n for n in PLANTED if isinstance(n, str)], "\u202e" * 50, "\x00", " "]
)
def test_a_hostile_job_id_in_the_url_is_said_missing_visibly(
    store: Backend, admin_client: Client, job_id: str
) -> None:
    page = clean(admin_client.get(url("job", "default"), {"id": job_id}))
    assert "No job" in page


@pytest.mark.parametrize("worker_id", [n for n in PLANTED if isinstance(n, str)])
def test_a_planted_worker_id_and_job_id_show_visibly(
    store: Backend, admin_client: Client, worker_id: str
) -> None:
    planted = {**GOOD_WORKER, "id": worker_id, "jobs": [f"default:{worker_id}"]}
    beside_a_good_worker("planted", json.dumps(planted))
    page = clean(admin_client.get(url("workers")))
    assert 'data-worker="good"' in page
    assert page.count("<tr data-worker=") == 2


# --- page numbers ---------------------------------------------------------------------------

# (value of ?p=, page shown of 2)
PAGE_NUMBERS = [
    (str(10**20), 2),
    ("99999999999999999999999", 2),
    ("9" * 5000, 2),
    ("100000000", 2),
    ("2", 2),
    (" 2 ", 2),
    ("-1", 1),
    ("0", 1),
    ("abc", 1),
    ("1e9", 1),
    ("1.5", 1),
    ("", 1),
    ("\x00", 1),
    ("\u0663", 1),  # an Arabic-Indic 3: a digit to Python, no page number in a URL
]


def fifty_one_of_everything(queue: Queue) -> None:
    for i in range(51):
        assert Lock(f"lock:{i:02}", ttl=60).acquire()
        Stock(f"stock:{i:02}").set(1)
        assert Semaphore(f"sem:{i:02}", limit=1, ttl=60).acquire(0)
    queue.enqueue_many(
        [
            {
                "task": "tests.tasks.record",
                "job_id": f"{state}:{i:02}",
                **({"delay": 600} if state == "scheduled" else {}),
            }
            for state in ["ready", "scheduled"]
            for i in range(51)
        ]
    )


@pytest.mark.parametrize(("p", "shown"), PAGE_NUMBERS)
def test_every_paged_page_shows_a_page_that_exists(
    store: Backend, admin_client: Client, p: str, shown: int
) -> None:
    fifty_one_of_everything(get_queue("default"))
    pages = [
        (url("locks"), {}, "locks"),
        (url("locks"), {"q": "lock:"}, "locks"),
        (url("stocks"), {}, "stocks"),
        (url("stocks"), {"q": "stock:"}, "stocks"),
        (url("semaphores"), {}, "semaphores"),
        (url("jobs", "default", "ready"), {}, "jobs"),
        (url("jobs", "default", "scheduled"), {}, "jobs"),
    ]
    for path, query, table in pages:
        response = admin_client.get(path, {**query, "p": p})
        assert response.status_code == 200, (path, html(response)[:2000])
        assert f"page {shown} of 2" in html(response), path
        assert rows(response, table) == (50 if shown == 1 else 1), path
    for state in ["running", "dead", "done"]:  # one page: always it
        response = admin_client.get(url("jobs", "default", state), {"p": p})
        assert response.status_code == 200
        assert "No " in html(response)
