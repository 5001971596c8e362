"""Fixtures shared by the lock tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers import RedisServer


@pytest.fixture(scope="module")
def masters() -> Iterator[list[RedisServer]]:
    """Three independent redis-servers (Redlock's nodes), for the tests of one module."""
    group = [RedisServer() for _ in range(3)]
    try:
        for server in group:
            server.start()
        yield group
    finally:
        for server in group:
            server.cleanup()
