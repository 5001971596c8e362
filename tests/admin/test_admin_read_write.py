"""Read-write locks on the admin's Locks page and in the lock listing, through the test
client, on fakeredis, a real redis-server and a Cluster: each shown as such, with its
readers' count, or its writer (owner, fence), and its waiters; plain locks as before."""

from __future__ import annotations

import os
import re
import threading
from typing import Any

import pytest
from django.contrib.admin.models import DELETION, LogEntry
from django.test import Client

from django_redislock import Lock
from django_redislock.exceptions import LockNotOwned
from django_redislock.locks.listing import describe_lock, list_locks
from django_redislock.locks.read_write import ReadWriteLock
from tests.support.fixtures import Backend
from tests.support.waiting import wait_for

from .test_admin import confirm_and_post, html, rows, url

pytestmark = pytest.mark.django_db


def row_of(page: str, name: str) -> str:
    found = re.search(rf"<code>{re.escape(name)}</code>(.*?)</tr>", page, re.S)
    assert found, f"no row for {name}"
    return found.group(1)


class Reader(threading.Thread):
    """A thread that reads ``name`` until told to stop."""

    def __init__(self, name: str, forced: bool = False) -> None:
        super().__init__(daemon=True)
        self.forced = forced  # it will be force-released: its release finds nothing
        self.found_released = False
        self.side = ReadWriteLock(name, ttl=60).read()
        self.ready, self.stop = threading.Event(), threading.Event()
        self.start()
        assert self.ready.wait(10)

    def run(self) -> None:
        assert self.side.acquire(0)
        self.ready.set()
        self.stop.wait(30)
        try:
            self.side.release()
        except LockNotOwned:
            if not self.forced:
                raise
            self.found_released = True

    def leave(self) -> None:
        self.stop.set()
        self.join(10)


def test_locks_page_shows_readers_and_the_writer(backend: Backend, admin_client: Client) -> None:
    readers = [Reader("catalog") for _ in range(3)]
    writer = ReadWriteLock("prices", ttl=60, fencing=True)
    plain = Lock("catalog", ttl=60)  # a plain lock of the same name keeps apart
    try:
        assert writer.write().acquire(0)
        assert plain.acquire(0)
        waiting = threading.Thread(
            target=ReadWriteLock("catalog", ttl=60).write().acquire, args=(5,), daemon=True
        )
        waiting.start()
        wait_for(lambda: ReadWriteLock("catalog").state().waiters == 1, 10)
        response = admin_client.get(url("locks"))
        page = html(response)
        assert "3 locks held" in page
        assert rows(response, "locks") == 3
        assert page.count("(read-write)") == 2
        catalog = re.search(r"<code>catalog</code> <span class=\"kind\">.*?</tr>", page, re.S)
        assert catalog
        assert "3 readers" in catalog.group(0)
        assert re.findall(r'<td class="num">([^<]*)</td>', catalog.group(0))[-1] == "1"  # waiters
        release = url("confirm", "release_read_write") + "?name=catalog"
        assert release.replace("?", "?").split("?")[0] in catalog.group(0)  # its own action
        prices = row_of(page, "prices")
        assert "writer: " in prices
        assert f"(pid {os.getpid()})" in prices
        assert str(writer.write().fence) in prices
        shown = {(i.name, i.read_write): i for i in list_locks().locks}
        assert shown[("catalog", True)].readers == 3
        assert not shown[("catalog", True)].writer
        assert shown[("prices", True)].writer
        assert shown[("prices", True)].fence == writer.write().fence
        assert shown[("catalog", False)].readers is None  # the plain lock, as before
        assert describe_lock("catalog").pid == os.getpid()
        searched = admin_client.get(url("locks"), {"q": "cat"})
        assert rows(searched, "locks") == 2
        assert "2 locks held" in html(searched)
    finally:
        for reader in readers:
            reader.leave()
        writer.write().release()
        plain.release()
    waiting.join(10)
    ReadWriteLock.force_release("catalog")
    assert list_locks().total == 0
    assert "No lock is held." in html(admin_client.get(url("locks")))


def test_a_read_write_lock_leaves_the_listing_when_its_last_holder_does(
    backend: Backend,
) -> None:
    rw = ReadWriteLock("brief", ttl=30)
    with rw.read():
        [info] = list_locks("brief").locks
        assert info.readers == 1
    assert list_locks("brief").total == 0
    with rw.write():
        [info] = list_locks().locks
        assert info.writer
        assert info.readers == 0
    assert list_locks().total == 0


def test_a_dead_read_write_lock_is_not_listed(backend: Backend) -> None:
    short = ReadWriteLock("lapsing", ttl=0.1).read()
    thread = threading.Thread(target=short.acquire, args=(0,), daemon=True)
    thread.start()
    thread.join(5)
    wait_for(lambda: ReadWriteLock("lapsing").readers() == 0, 5)
    assert [i.name for i in list_locks().locks] == []
    assert [i.name for i in list_locks("laps").locks] == []


def test_a_corrupt_writer_value_is_shown_not_fatal(backend: Backend, admin_client: Any) -> None:
    rw = ReadWriteLock("odd", ttl=30)
    with rw.read():
        backend.client.set(rw.read().layout.writer, "garbage", px=30_000)
        page = html(admin_client.get(url("locks")))
        assert "unreadable" in row_of(page, "odd")


def test_force_release_frees_a_read_write_lock_and_is_logged(
    backend: Backend, admin_user: Any
) -> None:
    readers = [Reader("catalog", forced=True) for _ in range(2)]
    plain = Lock("catalog", ttl=60)  # the plain lock of the same name is left alone
    try:
        assert plain.acquire(0)
        client = Client(enforce_csrf_checks=True)
        client.force_login(admin_user)
        confirm = html(client.get(url("confirm", "release_read_write"), {"name": "catalog"}))
        assert "Force-release read-write lock “catalog”, read by 2 readers." in confirm
        crumbs = confirm.split('class="breadcrumbs"')[1].split("</div>")[0]
        assert f'<a href="{url("locks")}">Locks</a>' in crumbs
        assert ReadWriteLock("catalog").readers() == 2  # the confirmation changed nothing
        done = confirm_and_post(client, "release_read_write", name="catalog")
        assert "Read-write lock “catalog” was force-released." in html(done)
        assert ReadWriteLock("catalog").readers() == 0
        assert plain.owned()
        entry = LogEntry.objects.get()
        assert (entry.action_flag, entry.object_repr) == (DELETION, "read-write lock catalog")
        again = client.get(url("confirm", "release_read_write"), {"name": "catalog"}, follow=True)
        assert "is not held any more" in html(again)
    finally:
        for reader in readers:
            reader.leave()
        plain.release()
    assert all(reader.found_released for reader in readers)  # their holds had been ended
