"""What the stress tests share: a healthy real Redis."""

from __future__ import annotations

from typing import Any

import pytest

from django_redislock.redis.aio import reset_async_connections
from django_redislock.redis.clients import reset_connections


@pytest.fixture(params=["redis", "cluster"])
def healthy(request: pytest.FixtureRequest, settings: Any) -> Any:
    """A real Redis (standalone or Cluster) behind redis-py's default pool size."""
    if request.param == "redis":
        server = request.getfixturevalue("redis_server")
        settings.REDISLOCK = {"URL": server.url}
        client = server.client()
        client.flushall()
    else:
        cluster = request.getfixturevalue("redis_cluster")
        settings.REDISLOCK = {"URL": cluster.url, "CLUSTER": True}
    reset_connections()
    reset_async_connections()
    yield request.param
    reset_connections()
    reset_async_connections()
