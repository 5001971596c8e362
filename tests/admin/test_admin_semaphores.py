"""The admin's Semaphores page through the test client, on fakeredis, a real redis-server and
a Cluster: each semaphore in use with its holders, limit, waiters and soonest expiry."""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

import pytest
from django.contrib.admin.models import DELETION, LogEntry
from django.test import Client
from django.utils.html import escape

from django_redislock import Semaphore
from django_redislock.admin.shown import shown_name
from django_redislock.locks.keys import shard_base
from django_redislock.names import validate_name
from django_redislock.semaphores.keys import semaphore_keys
from django_redislock.semaphores.listing import list_semaphores
from tests.support.fixtures import Backend

from .test_admin import confirm_and_post, html, rows, staff_client, url

pytestmark = pytest.mark.django_db


def test_semaphores_page_shows_holders_limit_and_waiters(
    backend: Backend, admin_client: Client
) -> None:
    exports = [Semaphore("exports", limit=2, ttl=90) for _ in range(2)]
    for permit in exports:
        assert permit.acquire(0)
    waiting = threading.Thread(target=Semaphore("exports", limit=2, timeout=3).acquire)
    waiting.start()
    try:
        other = Semaphore("reports", limit=5, ttl=30)
        assert other.acquire(0)
        deadline = threading.Event()
        while exports[0].state().waiters < 1 and not deadline.wait(0.01):
            pass
        page = admin_client.get(url("semaphores"))
        assert page.status_code == 200
        assert "2 semaphores in use" in html(page)
        assert rows(page, "semaphores") == 2
        row = re.search(r"<code>exports</code></th>(.*?)</tr>", html(page), re.S)
        assert row
        cells = re.findall(r'<td class="num">([^<]*)</td>', row.group(1))
        assert cells[:2] == ["2 / 2", "1"]
        assert re.fullmatch(r"1 min 2\d s|1 min 30 s", cells[2]), cells[2]
        other.release()
    finally:
        exports[0].release()  # the waiter gets it, and frees it when its thread ends
        waiting.join()
        exports[1].release()


def test_released_semaphores_leave_the_page(backend: Backend, admin_client: Client) -> None:
    permit = Semaphore("brief", limit=1, ttl=0.2)
    assert permit.acquire(0)
    assert [info.name for info in list_semaphores()[0]] == ["brief"]
    threading.Event().wait(0.3)
    assert list_semaphores() == ([], 0)
    assert "No semaphore is in use." in html(admin_client.get(url("semaphores")))


def test_semaphores_page_paginates(backend: Backend, admin_client: Client) -> None:
    held = [Semaphore(f"pool:{i}", limit=1, ttl=60 + i) for i in range(53)]
    for permit in held:
        assert permit.acquire(0)
    try:
        first = admin_client.get(url("semaphores"))
        assert "53 semaphores in use" in html(first)
        assert rows(first, "semaphores") == 50
        second = admin_client.get(url("semaphores"), {"p": "2"})
        assert rows(second, "semaphores") == 3
        names = [info.name for info in list_semaphores(0, 100)[0]]
        assert names == [f"pool:{i}" for i in range(53)]  # the soonest to be free first
        assert [info.name for info in list_semaphores(50, 50)[0]] == names[50:]
    finally:
        for permit in held:
            permit.release()


def test_force_release_frees_every_permit_and_is_logged(backend: Backend, admin_user: Any) -> None:
    permits = [Semaphore("exports", limit=2, ttl=60) for _ in range(2)]
    for permit in permits:
        assert permit.acquire(0)
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    listed = html(client.get(url("semaphores")))
    assert "Force release" in listed
    confirm = client.get(url("confirm", "release_semaphore"), {"name": "exports"})
    assert "Force-release every permit of semaphore “exports”: 2 of 2 held." in html(confirm)
    crumbs = html(confirm).split('class="breadcrumbs"')[1].split("</div>")[0]
    assert f'<a href="{url("semaphores")}">Semaphores</a>' in crumbs
    assert permits[0].owned()  # the confirmation page changed nothing
    done = confirm_and_post(client, "release_semaphore", name="exports")
    assert "Every permit of semaphore “exports” was force-released." in html(done)
    assert not permits[0].owned()
    assert not permits[1].owned()
    entry = LogEntry.objects.get()
    assert (entry.action_flag, entry.object_repr) == (DELETION, "semaphore exports")


def test_force_release_needs_the_release_permission(
    backend: Backend, django_user_model: Any
) -> None:
    permit = Semaphore("exports", limit=1, ttl=60)
    assert permit.acquire(0)
    viewer = staff_client(django_user_model, "view_dashboard")
    assert "Force release" not in html(viewer.get(url("semaphores")))
    assert viewer.post(url("action", "release_semaphore"), {"name": "exports"}).status_code == 403
    assert permit.owned()
    operator = staff_client(django_user_model, "view_dashboard", "release_lock")
    gone = operator.post(url("action", "release_semaphore"), {"name": "idle"}, follow=True)
    assert "nothing was done" in html(gone)
    assert not LogEntry.objects.exists()


PLANTED = ["x" * 10_000, "a\x00b", "a{b}c", "invoice\u202etxt.exe", "tab\there"]


def plant(backend: Backend, name: str, held: bool = True) -> None:
    """An index row (and a live permit) for ``name``, written straight into Redis by
    something other than ``Semaphore``."""
    keys = semaphore_keys(shard_base(0), name)
    expiry = int(time.time() * 1000) + 60_000
    backend.client.zadd(keys.listing, {name: expiry})
    if held:
        backend.client.zadd(keys.holders, {f"abc|0|3|{os.getpid()}|planted": expiry})


@pytest.mark.parametrize("name", PLANTED, ids=["10kB", "nul", "brace", "rtl", "tab"])
def test_a_planted_name_is_shown_flagged_and_never_breaks_the_page(
    backend: Backend, admin_client: Client, name: str
) -> None:
    plant(backend, name)
    real = Semaphore("exports", limit=2, ttl=90)
    assert real.acquire(0)
    page, total = list_semaphores()
    assert total == 2
    planted = next(info for info in page if info.name == name)
    assert (planted.held, planted.limit) == (1, 3)
    assert planted.problem.startswith("Semaphore name")
    response = admin_client.get(url("semaphores"))
    assert response.status_code == 200
    body = html(response)
    assert rows(response, "semaphores") == 2
    assert "Not a valid name: Semaphore name" in body  # the admin's shared name display
    assert body.count("Force release") == 1  # only the real one: the other has no Semaphore
    for raw in ("\x00", "\u202e", "\t", "x" * 300):
        assert raw not in body
    assert escape(shown_name(name, validate_name).text) in body
    real.release()


def test_planted_rows_of_another_type_or_without_permits_are_shown(
    backend: Backend, admin_client: Client
) -> None:
    plant(backend, "<script>alert(1)</script>", held=False)
    plant(backend, "a-string", held=False)
    backend.client.set(semaphore_keys(shard_base(0), "a-string").holders, "garbage")
    response = admin_client.get(url("semaphores"))
    assert response.status_code == 200
    body = html(response)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "<script>alert(1)" not in body
    assert "unreadable: WRONGTYPE" in body
    assert rows(response, "semaphores") == 2


@pytest.mark.parametrize("p", [str(10**20), "99", "-5", "x"])
def test_a_page_number_past_the_end_shows_the_last_page(
    backend: Backend, admin_client: Client, p: str
) -> None:
    held = [Semaphore(f"pool:{i}", limit=1, ttl=60 + i) for i in range(53)]
    for permit in held:
        assert permit.acquire(0)
    response = admin_client.get(url("semaphores"), {"p": p})
    assert response.status_code == 200
    assert rows(response, "semaphores") == (3 if p in (str(10**20), "99") else 50)
    assert list_semaphores(10**20) == ([], 53)
    for permit in held:
        permit.release()
