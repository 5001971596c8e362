"""Tasks for the keyed-concurrency tests: each records in Redis when it ran (where every
process sees it), so that the overlaps of one key's runs can be counted outside the
workers."""

from __future__ import annotations

import json
import os
import time

from django_redislock import get_redis
from django_redislock.tasks import task

SPANS = "test:keyed:spans"  # one JSON object a run: user (or account), start, end, pid


@task(concurrency_key="export:{user}", concurrency_limit=2)
def export(user: int, n: int, seconds: float = 0.05) -> int:
    """Runs ``seconds``; at most two of one user's at once."""
    start = time.time()
    time.sleep(seconds)
    record(user, n, start)
    return n


@task()
def plain(n: int, seconds: float = 0.05) -> int:
    start = time.time()
    time.sleep(seconds)
    record(None, n, start)
    return n


def record(user: int | str | None, n: int, start: float) -> None:
    span = {"user": user, "n": n, "start": start, "end": time.time(), "pid": os.getpid()}
    get_redis().rpush(SPANS, json.dumps(span))


@task(rate_key="stripe:{account}", rate="3/s")
def charge(account: str, n: int) -> int:
    """At most three starts a second per account."""
    record(account, n, time.time())
    return n
