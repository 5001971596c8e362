"""Every key a queue script touches is passed in its KEYS, seen by Redis's MONITOR (which
shows the commands a script runs), on a real server and a real Cluster."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from django_redislock.queue.admin_scripts import CANCEL, PURGE, READY_HEADS, REQUEUE
from django_redislock.queue.core import Queue, get_queue
from django_redislock.queue.lease_scripts import RELEASE, RENEW, SETTLE
from django_redislock.queue.lua import script
from django_redislock.queue.scripts import ENQUEUE, PEEK, POP, START

from .conftest import Backend

LINE = re.compile(r"^\+?[\d.]+ \[\d+ ([^\]]+)\] (.*)$")
ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')
END = "queue-keys-test-end"


def _args(rest: str) -> list[str]:
    return [re.sub(r"\\(.)", r"\1", a) for a in ARG.findall(rest)]


class Monitor:
    """MONITOR on the node that holds the queue's slot."""

    def __init__(self, client: Any, key: str) -> None:
        self.node = (
            client.get_node_from_key(key).redis_connection
            if isinstance(client, RedisCluster)
            else client
        )
        kwargs = self.node.connection_pool.connection_kwargs
        self.conn = redis.Connection(host=kwargs["host"], port=kwargs["port"])
        self.raw = redis.Connection(host=kwargs["host"], port=kwargs["port"])
        self.conn.send_command("MONITOR")
        assert self.conn.read_response() in (b"OK", "OK")

    def lines(self) -> Iterator[tuple[str, list[str]]]:
        """(who sent it: "lua" or an address, the command's words) until the end marker."""
        self.node.execute_command("ECHO", END)
        while True:
            raw = self.conn.read_response()
            line = raw.decode() if isinstance(raw, bytes) else str(raw)
            found = LINE.match(line)
            assert found, line
            who, args = found[1], _args(found[2])
            if args == ["ECHO", END]:
                self.conn.disconnect()
                return
            yield who, args


def _keys_of(conn: redis.Connection, args: list[str]) -> list[str]:
    """The keys of a command, as the server finds them."""
    conn.send_command("COMMAND", "GETKEYS", *args)
    try:
        return [k.decode() for k in conn.read_response()]
    except redis.ResponseError:  # a command without keys (TIME)
        return []


def _outside(monitor: Monitor) -> tuple[set[str], list[tuple[str, str, list[str]]]]:
    """The SHA1 of every script run, and each command a script ran on a key missing from its
    KEYS: (script, key, command)."""
    seen: list[tuple[list[str], list[str]]] = []  # (the script call, the commands it ran)
    for who, args in monitor.lines():
        if who != "lua":
            if args[0].upper() in ("EVALSHA", "EVAL"):
                seen.append((args, []))
            continue
        seen[-1][1].append(args)
    bad = []
    for call, commands in seen:
        given = set(call[3 : 3 + int(call[2])])
        for command in commands:
            for key in _keys_of(monitor.raw, command):
                if key not in given:
                    bad.append((call[1][:8], key, command))
    return {call[1] for call, _ in seen}, bad


@pytest.fixture
def queue(real_backend: Backend, settings: Any) -> Queue:
    settings.REDISLOCK = {
        **settings.REDISLOCK,
        "QUEUES": {"default": {"LEASE": 5, "MAX_ATTEMPTS": 2, "RETRY_BACKOFF": 0.001}},
    }
    return get_queue("default")


def _every_operation(queue: Queue) -> None:
    """Runs every queue operation once, corrupt keys and expired leases included."""
    queue.client.set(queue.keys.job("was-a-string"), "garbage")
    queue.enqueue("t", job_id="was-a-string")  # set aside, replaced
    queue.enqueue_many([{"task": "t", "args": [i]} for i in range(3)])
    queue.enqueue("t", job_id="named", priority=5, kwargs={"k": 1}, meta={"m": 1})
    queue.enqueue("t", job_id="named", replace=True)
    queue.enqueue("t", job_id="later", delay=3600)
    queue.enqueue_tick("tick", 1000, {"task": "t"})
    queue.enqueue("t", job_id="soon", delay=0.001)
    time.sleep(0.01)
    first, second, third = queue.pop(3, worker="w")
    queue.ack(first)
    queue.ack(second, '{"r": 1}')
    queue.fail(third, ValueError("boom"), "Traceback ...")
    ahead = queue.fetch(2, worker="w", charge=False)[0]
    queue.run(START, *queue.start_args("w", [], ahead[:1]))
    queue.renew(ahead)
    queue.retry(ahead[0], delay=0)
    queue.release(ahead[1:])
    [doomed] = queue.pop(worker="w")
    queue.bury(doomed, "never")
    queue.requeue(doomed.id)
    queue.pop(lease=0.001, worker="w")
    time.sleep(0.01)
    queue.pop(0)  # takes the expired lease back
    queue.client.zadd(queue.keys.ready, {"no-hash": 0})
    queue.client.zadd(queue.keys.ready, {"a-string": 0})
    queue.client.set(queue.keys.job("a-string"), "garbage")
    queue.pop(2)  # both buried, one set aside
    queue.delete("a-string")
    queue.cancel("later")
    queue.requeue("named")
    queue.oldest_ready_age()
    queue.jobs("dead")
    queue.get("named")
    queue.counts()
    queue.purge("ready")
    queue.purge("dead")


def test_no_script_touches_a_key_it_was_not_given(queue: Queue) -> None:
    every = {ENQUEUE, PEEK, POP, START, RELEASE, SETTLE, RENEW, CANCEL, REQUEUE, PURGE, READY_HEADS}
    for loaded in every:  # so that each runs as EVALSHA, and its SHA1 says which it is
        queue.client.script_load(loaded.source)
    monitor = Monitor(queue.client, queue.keys.ready)
    _every_operation(queue)
    ran, outside = _outside(monitor)
    assert outside == []
    assert {s.name for s in every if s.sha in ran} == {s.name for s in every}


def test_the_check_sees_a_key_outside_keys(queue: Queue) -> None:
    """The check itself can fail: a script that builds a key it was not given is caught."""
    rogue = script("rogue", "return redis.call('GET', KEYS[1] .. ':other')")
    monitor = Monitor(queue.client, queue.keys.ready)
    queue.run(rogue, (), ())
    [(_, key, command)] = _outside(monitor)[1]
    assert (key, command[0]) == (queue.keys.ready + ":other", "GET")
