"""``benchmarks/admin.py`` runs, at tiny sizes against the real test server, so that the
script cannot rot."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import admin as benchmark
from tests.support.servers import RedisServer

pytestmark = pytest.mark.django_db


def test_the_admin_benchmark_times_every_page(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("REDIS_URL", redis_server.url)
    rows = benchmark.main(["--jobs", "300", "--locks", "300", "--runs", "2", "--finished", "1500"])
    assert [row.status for row in rows] == [200] * len(rows)
    pages = " | ".join(row.page for row in rows)
    for state, count in [
        ("ready", 3),
        ("scheduled", 300),
        ("running", 205),
        ("dead", 1000),
        ("done", 1500),
    ]:
        assert f"jobs {state} ({count:,}) p1" in pages
    assert "locks (300) p1" in pages
    assert "locks q=lock:1 (100) p1" in pages  # a prefix search really matches
    for page in [
        "workers",
        "confirm force release",
        "confirm run now",
        "admin index",
        "confirm requeue now",
        "confirm retry all dead",
        "job dead",
        "job running",
        "job finished",
        "schedule",
    ]:
        assert page in pages
    out = capsys.readouterr().out
    assert "Redis used_memory_human" in out
    assert all(f"  {row.page}" in out for row in rows)
    assert f"of {len(rows)} pages pass" in out
    assert redis_server.client().dbsize() == 0  # flushed after the run
