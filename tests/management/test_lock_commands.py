"""The operator's lock commands, through ``call_command``: ``redislock_locks`` and
``redislock_force_release``."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from django_redislock import Lock, ReadWriteLock
from tests.support.fixtures import configure_backend


@pytest.fixture(params=["fakeredis", "redis"])
def locks(request: pytest.FixtureRequest, settings: Any) -> Iterator[list[Lock]]:
    configure_backend(request, settings, request.param)
    held = [Lock("order:1", ttl=60), Lock("order:2", ttl=30, fencing=True), Lock("cart:9", ttl=10)]
    for lock in held:
        assert lock.acquire()
    yield held
    for lock in held:
        if lock.owned():
            lock.release()


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_locks_lists_each_holder_soonest_to_expire_first(locks: list[Lock]) -> None:
    lines = run("redislock_locks").splitlines()
    assert [line.split()[0] for line in lines[1:4]] == ["cart:9", "order:2", "order:1"]
    assert lines[2].split()[:4] == ["order:2", socket.gethostname(), "pid", str(os.getpid())]
    assert str(locks[1].fence) in lines[2]
    assert lines[-1] == "Locks 1-3 of 3."


def test_locks_by_prefix_as_json_and_paged(locks: list[Lock]) -> None:
    found = json.loads(run("redislock_locks", "--prefix", "order", "--json"))
    assert found["total"] == 2
    assert [lock["name"] for lock in found["locks"]] == ["order:1", "order:2"]
    second = found["locks"][1]
    assert second["fence"] == locks[1].fence
    assert 0 < second["ttl"] <= 30
    assert second["waiters"] == 0
    assert second["held_for"] >= 0
    page = run("redislock_locks", "--prefix", "order", "--limit", "1", "--offset", "1")
    assert page.splitlines()[-1] == "Locks 2-2 of 2."
    assert run("redislock_locks", "--prefix", "zzz").strip() == (
        "No locks whose name starts with 'zzz' held."
    )


def test_locks_shows_a_read_write_locks_readers_or_writer(locks: list[Lock]) -> None:
    rw = ReadWriteLock("catalog", ttl=30)
    with rw.read():
        line = next(x for x in run("redislock_locks").splitlines() if x.startswith("catalog"))
        assert line.split()[1:3] == ["1", "reader(s)"]
        found = json.loads(run("redislock_locks", "--prefix", "catalog", "--json"))
        assert found["locks"][0]["readers"] == 1
    with rw.write():
        line = next(x for x in run("redislock_locks").splitlines() if x.startswith("catalog"))
        assert line.split()[1:5] == ["writer", socket.gethostname(), "pid", str(os.getpid())]
    assert json.loads(run("redislock_locks", "--json"))["locks"][0]["readers"] is None


@pytest.mark.parametrize("args", [("--limit", "0"), ("--offset", "-1"), ("--limit", "10001")])
def test_locks_wrong_paging_is_a_command_error(locks: list[Lock], args: tuple[str, str]) -> None:
    with pytest.raises(CommandError, match="--limit must be 1 to 10000"):
        run("redislock_locks", *args)


def test_force_release_shows_the_holder_then_frees_the_lock(locks: list[Lock]) -> None:
    out = run("redislock_force_release", "order:2", "--yes")
    assert f"Lock 'order:2': held by {socket.gethostname()} pid {os.getpid()} for " in out
    assert f"fence {locks[1].fence}, 0 waiter(s)" in out
    assert "Released lock 'order:2'." in out
    assert not locks[1].owned()
    assert Lock("order:2", ttl=5).acquire(timeout=0)  # free for the next one at once
    assert run("redislock_force_release", "cart:7", "--yes").strip() == (
        "Lock 'cart:7' is not held; nothing to release."
    )


def test_force_release_asks_first(locks: list[Lock], monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CommandError, match="No terminal to confirm on"):
        run("redislock_force_release", "order:1")
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda question: "n")
    assert "Cancelled; nothing changed." in run("redislock_force_release", "order:1")
    assert locks[0].owned()
    monkeypatch.setattr("builtins.input", lambda question: "yes")
    run("redislock_force_release", "order:1")
    assert not locks[0].owned()


@pytest.mark.parametrize(("name", "message"), [("bad name", "whitespace"), ("a{b}", "brace")])
def test_force_release_of_a_wrong_name_is_a_command_error(
    locks: list[Lock], name: str, message: str
) -> None:
    with pytest.raises(CommandError, match=message):
        run("redislock_force_release", name, "--yes")


def test_force_release_read_write_frees_its_readers_or_its_writer(locks: list[Lock]) -> None:
    catalog = ReadWriteLock("catalog", ttl=30)
    reader = catalog.read()
    assert reader.acquire(timeout=0)
    # The plain lock of the same name is another lock: nothing is held under it.
    assert run("redislock_force_release", "catalog", "--yes").strip() == (
        "Lock 'catalog' is not held; nothing to release."
    )
    out = run("redislock_force_release", "catalog", "--read-write", "--yes")
    assert "Read-write lock 'catalog': read by 1 reader(s), " in out
    assert "Released read-write lock 'catalog'." in out
    assert catalog.readers() == 0
    writer = catalog.write()
    assert writer.acquire(timeout=0)  # free for a writer at once
    out = run("redislock_force_release", "catalog", "--read-write", "--yes")
    assert f"Read-write lock 'catalog': held by {socket.gethostname()} pid {os.getpid()}" in out
    assert not writer.owned()
    assert run("redislock_force_release", "catalog", "--read-write", "--yes").strip() == (
        "Read-write lock 'catalog' is not held; nothing to release."
    )
