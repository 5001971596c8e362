"""Django's ``close_old_connections`` around each job (``queue.worker.connections``): what
Django would close is closed; a thread with no open connection does not call it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections

from django_redislock.queue.worker import connections as worker_connections
from django_redislock.queue.worker.connections import close_stale_connections


def in_a_thread(work: Callable[[], Any]) -> Any:
    """``work()`` in a new thread (its own connections, as a job thread has)."""
    found: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            found.append(work())
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return found[0]


@pytest.fixture
def djangos_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = worker_connections.close_old_connections

    def counted() -> None:
        calls.append(1)
        real()

    monkeypatch.setattr(worker_connections, "close_old_connections", counted)
    return calls


@pytest.mark.django_db(transaction=True)
def test_an_open_connection_past_its_age_is_closed() -> None:
    def work() -> tuple[bool, bool]:
        conn = connections["default"]
        conn.ensure_connection()
        conn.close_at = time.monotonic() + 60  # CONN_MAX_AGE 60
        close_stale_connections()  # within its age: kept
        kept = conn.connection is not None
        conn.close_at = time.monotonic() - 1  # CONN_MAX_AGE ran out
        close_stale_connections()
        return kept, conn.connection is None

    assert in_a_thread(work) == (True, True)


@pytest.mark.django_db(transaction=True)
def test_django_is_called_only_while_a_connection_is_open(djangos_calls: list[int]) -> None:
    def work() -> list[int]:
        seen = []
        close_stale_connections()  # no connection set up in this thread
        seen.append(len(djangos_calls))
        conn = connections["default"]  # set up, never opened
        close_stale_connections()
        seen.append(len(djangos_calls))
        conn.ensure_connection()
        close_stale_connections()
        seen.append(len(djangos_calls))
        conn.close()
        close_stale_connections()
        seen.append(len(djangos_calls))
        return seen

    assert in_a_thread(work) == [0, 0, 1, 1]


@pytest.mark.django_db(transaction=True)
def test_a_backend_with_its_own_check_is_always_called(
    djangos_calls: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[str] = []
    backend = type(connections["default"])
    monkeypatch.setattr(
        backend, "close_if_unusable_or_obsolete", lambda self: checked.append(self.alias)
    )

    def work() -> None:
        connections["default"]  # set up, never opened
        close_stale_connections()

    in_a_thread(work)
    assert (len(djangos_calls), checked) == (1, ["default"])
