"""The waiters' queue of a lock or semaphore, planted by tests in states hard to reach on time."""

from __future__ import annotations


def planting_a_lapsing_waiter(waiters: int, registrations: int) -> str:
    """Lua to put before a release script: it queues waiter "planted|" (waiters zset and
    registrations hash at those KEYS positions) with a registration that ends this very
    millisecond on the server clock, so that the release runs in that ms."""
    return f"""
local t = redis.call('TIME')
local planted_at = math.floor((tonumber(t[1]) * 1000000 + tonumber(t[2])) / 1000)
redis.call('ZADD', KEYS[{waiters}], 1, 'planted|')
redis.call('HSET', KEYS[{registrations}], 'planted|', planted_at .. '|30000|0|1|elsewhere')
"""
