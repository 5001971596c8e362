"""The fast path's own reply reading (socket -> redis-py's hiredis reader), and work done while
a command is on its way: on a real redis-server, against what redis-py itself would do."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis
from redis.exceptions import NoScriptError, ResponseError

from django_redislock import get_redis
from django_redislock.exceptions import RedisUnavailable
from django_redislock.redis import fastpath
from django_redislock.redis.clients import call, run_script
from django_redislock.redis.scripts import lua_script


@pytest.fixture
def client(settings: Any, redis_server: Any) -> Any:
    settings.REDISLOCK = {"URL": redis_server.url}
    client = get_redis()
    call(client, "FLUSHALL")
    return client


def held(client: Any) -> fastpath.Dedicated:
    dedicated = fastpath.dedicated(client)
    assert dedicated is not None
    return dedicated


def test_replies_of_every_shape_read_as_redis_py_reads_them(client: Any, redis_server: Any) -> None:
    assert held(client).direct  # hiredis installed: the fast path reads replies itself
    plain = redis_server.client(protocol=held(client).conn.protocol)
    big = "x" * 300_000  # several reads of the socket for one reply
    plain.set("big", big)
    plain.rpush("list", *range(1000))
    plain.hset("hash", mapping={"a": 1, "b": 2})
    conn = plain.connection_pool.get_connection()  # redis-py's own read, raw (no callbacks)
    for command in [("GET", "big"), ("LRANGE", "list", 0, -1), ("HGETALL", "hash"),
                    ("GET", "missing"), ("EXISTS", "list"), ("PING",), ("TIME",)]:  # fmt: skip
        mine = call(client, *command)
        conn.send_command(*command)
        theirs = conn.read_response()
        if command[0] != "TIME":
            assert mine == theirs, command
        assert type(mine) is type(theirs), command


def test_an_error_reply_raises_redis_py_s_error_and_the_connection_stays_in_step(
    client: Any,
) -> None:
    call(client, "SET", "text", "not a number")
    with pytest.raises(ResponseError, match="not an integer"):
        call(client, "INCR", "text")
    connection = held(client).conn._sock
    assert call(client, "GET", "text") == b"not a number"  # the next reply is its own
    assert held(client).conn._sock is connection  # an error reply is not a broken connection
    with pytest.raises(NoScriptError):  # the exact redis-py class, as run_script needs it
        call(client, "EVALSHA", "0" * 40, 0)
    script = lua_script("test_loaded", "return ARGV[1] .. '!'")
    assert run_script(client, script, [], ["loaded"]) == b"loaded!"  # NOSCRIPT: sent as EVAL


def test_a_push_message_before_a_reply_goes_to_redis_py_and_the_reply_is_read(
    client: Any, redis_server: Any
) -> None:
    if str(held(client).conn.protocol) != "3":
        pytest.fail("The clients are expected to speak RESP3 (redis-py's default here).")
    seen: list[Any] = []
    parser = held(client).conn._parser
    parser.set_invalidation_push_handler(seen.append)
    assert call(client, "CLIENT", "TRACKING", "ON") == b"OK"
    call(client, "SET", "tracked", "1")
    assert call(client, "GET", "tracked") == b"1"  # now tracked for this connection
    redis_server.client().set("tracked", "2")  # another client: Redis pushes "invalidate"
    assert call(client, "PING") == b"PONG"  # the push came first; the reply is PING's
    assert call(client, "GET", "tracked") == b"2"
    assert seen
    assert seen[0][0] in (b"invalidate", "invalidate")


def test_what_runs_meanwhile_overlaps_the_command_and_its_error_comes_after_the_reply(
    client: Any,
) -> None:
    script = lua_script("test_incr", "return redis.call('INCR', KEYS[1])")
    order: list[str] = []
    assert run_script(client, script, ["n"], []) == 1  # loaded: EVALSHA from now on
    assert run_script(client, script, ["n"], [], lambda: order.append("meanwhile")) == 2
    assert order == ["meanwhile"]

    def fails() -> None:
        raise KeyError("meanwhile failed")

    with pytest.raises(KeyError, match="meanwhile failed"):
        run_script(client, script, ["n"], [], fails)
    assert call(client, "GET", "n") == b"3"  # the script ran, and its reply was read
    assert run_script(client, script, ["n"], []) == 4  # the connection is in step


def test_meanwhile_runs_once_more_when_the_command_is_sent_again(
    client: Any, redis_server: Any
) -> None:
    calls: list[int] = []
    script = lua_script("test_ok", "return 'ok'")
    assert run_script(client, script, [], []) == b"ok"  # loaded: EVALSHA from now on
    redis_server.client().client_kill_filter(_type="normal", skipme=True)  # ours is closed
    assert run_script(client, script, [], [], lambda: calls.append(1)) == b"ok"
    assert len(calls) in (1, 2)  # sent once more on a new connection: run again


def test_redis_gone_mid_read_is_redis_unavailable(settings: Any) -> None:
    from tests.servers import RedisServer

    with RedisServer() as server:
        settings.REDISLOCK = {"URL": server.url}
        client = get_redis()
        assert call(client, "PING") == b"PONG"
        stopper = threading.Timer(0.2, server.stop)
        stopper.start()
        with pytest.raises(RedisUnavailable):
            call(client, "BLPOP", "never", 5)  # the server goes away while we wait
        stopper.join()


def test_without_hiredis_parsing_replies_go_through_redis_py(redis_server: Any) -> None:
    from redis._parsers import _RESP2Parser

    pool = redis.ConnectionPool.from_url(redis_server.url, parser_class=_RESP2Parser,
                                         max_connections=8)  # fmt: skip
    client = redis.Redis(connection_pool=pool)
    dedicated = held(client)
    assert not dedicated.direct
    assert call(client, "SET", "k", "v") == b"OK"
    assert call(client, "GET", "k") == b"v"
    with pytest.raises(ResponseError):
        call(client, "INCR", "k")
    assert call(client, "ECHO", "in step") == b"in step"
