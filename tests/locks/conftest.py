"""Fixtures shared by the lock tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.servers import RedisServer, independent_servers


@pytest.fixture(scope="module")
def masters() -> Iterator[list[RedisServer]]:
    """Three independent redis-servers (Redlock's nodes), for the tests of one module."""
    yield from independent_servers(3)
