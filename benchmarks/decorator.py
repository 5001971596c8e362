"""View guards' overhead per request: the same tiny view unguarded, guarded by
``@redis_locked``, by hand with redis-py's ``Lock``, and by ``@redis_idempotent`` (each
request a new Idempotency-Key: claimed, run and stored; and one key resent: replayed), on
one Redis in one run. Every request is a POST.

    bash scripts/bench.sh decorator      # or: python -m benchmarks.decorator [--quick]

Uses ``REDIS_URL`` when set, else starts a ``redis-server`` of its own on a free port.
Each request is timed on its own; the variants run in alternating rounds so that drift hits
them alike. Two paths:

* Django's test client (the whole middleware and handler stack, no network);
* a real HTTP server (Django's threaded WSGI server in another process) over loopback, one
  keep-alive connection per round.

The overhead of a variant is its median minus the unguarded median.
"""

from __future__ import annotations

import http.client
import itertools
import os
import signal
import socket
import statistics
import sys
from collections.abc import Callable
from typing import Any

from benchmarks import benchmark_redis, command_line, machine
from benchmarks.timing import alternating_samples, percentile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import django
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import path

VARIANTS = {
    "unguarded": "/plain/1/",
    "@redis_locked": "/guarded/1/",
    "redis-py Lock": "/rp/1/",
    "@redis_idempotent": "/idem/1/",
    "  its replay": "/replay/1/",
}
# Targets (DESIGN.md): overhead p50 per request, ms.
TARGETS = {"@redis_locked": 1.0, "@redis_idempotent": 0.5, "  its replay": 1.0}
_keys = itertools.count()
_replayed = ["bench-replayed"]  # one per path (test client, HTTP): they send other bodies


def headers_for(target: str) -> dict[str, str]:
    """A fresh Idempotency-Key for every request to /idem/, the same one to /replay/."""
    if target.startswith("/idem/"):
        return {"Idempotency-Key": f"bench-{os.getpid()}-{next(_keys)}"}
    if target.startswith("/replay/"):
        return {"Idempotency-Key": _replayed[0]}
    return {}


def plain(request: HttpRequest, product_id: int) -> HttpResponse:
    return HttpResponse("ok")


def build_urls(url: str) -> list[Any]:
    import redis

    from django_redislock import redis_idempotent, redis_locked

    raw = redis.Redis.from_url(url)

    def by_hand(request: HttpRequest, product_id: int) -> HttpResponse:
        lock = raw.lock(f"rp:{product_id}", timeout=5, blocking=False)
        if not lock.acquire():
            return HttpResponse("busy", status=409)
        try:
            return plain(request, product_id)
        finally:
            lock.release()

    return [
        path("plain/<int:product_id>/", plain),
        path("guarded/<int:product_id>/", redis_locked("bench:{product_id}", ttl=5)(plain)),
        path("rp/<int:product_id>/", by_hand),
        path("idem/<int:product_id>/", redis_idempotent(anonymous="shared")(plain)),
        path("replay/<int:product_id>/", redis_idempotent(anonymous="shared")(plain)),
    ]


urlpatterns: list[Any] = []


def setup(url: str) -> None:
    settings.configure(
        INSTALLED_APPS=["django_redislock"],
        REDISLOCK={"URL": url},
        DATABASES={},
        ROOT_URLCONF=__name__,
        ALLOWED_HOSTS=["*"],
        MIDDLEWARE=["django.middleware.common.CommonMiddleware"],
    )
    django.setup()
    urlpatterns.extend(build_urls(url))


def time_rounds(
    request: Callable[[str], None], rounds: int, per_round: int
) -> dict[str, list[float]]:
    _replayed[0] = f"bench-replayed-{next(_keys)}"
    return alternating_samples(
        list(VARIANTS), lambda name: request(VARIANTS[name]), rounds, per_round
    )


def through_test_client(rounds: int, per_round: int) -> dict[str, list[float]]:
    from django.test import Client

    client = Client()

    def request(target: str) -> None:
        response = client.post(target, headers=headers_for(target))
        assert response.status_code == 200, response.status_code

    return time_rounds(request, rounds, per_round)


def _serve(listener: socket.socket) -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.join(root, "example_project"))
    from shop.demo import wsgi_server  # the demo's server: Django's threaded WSGI server

    try:
        wsgi_server(listener).serve_forever()
    finally:
        os._exit(0)


def through_http(rounds: int, per_round: int) -> dict[str, list[float]]:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    pid = os.fork()
    if pid == 0:
        _serve(listener)
    listener.close()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def request(target: str) -> None:
        connection.request("POST", target, b"", headers_for(target))
        response = connection.getresponse()
        response.read()
        assert response.status == 200, response.status
        if response.will_close:
            connection.close()

    try:
        return time_rounds(request, rounds, per_round)
    finally:
        connection.close()
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)


def report(title: str, samples: dict[str, list[float]]) -> None:
    base = statistics.median(samples["unguarded"])
    print(title)
    print(f"  {'':19}{'p50 ms':>9}{'p95 ms':>9}{'overhead p50 ms':>17}{'requests':>10}  target")
    for name, values in samples.items():
        p50, p95 = statistics.median(values), percentile(values, 0.95)
        overhead = (p50 - base) * 1000
        target = TARGETS.get(name)
        verdict = ""
        if target is not None:
            verdict = f"  <= {target} ms: {'PASS' if overhead <= target else 'FAIL'}"
        print(
            f"  {name:19}{p50 * 1000:9.3f}{p95 * 1000:9.3f}"
            f"{overhead:17.3f}{len(values):10d}{verdict}"
        )


def main() -> None:
    parser = command_line(__doc__, "fewer requests")
    args = parser.parse_args()
    rounds, per_round = (4, 100) if args.quick else (10, 400)

    with benchmark_redis() as url:
        setup(url)
        import redis

        print(machine(redis.Redis.from_url(url), url, f"Django {django.get_version()}") + "\n")
        report("Django test client (no network)", through_test_client(rounds, per_round))
        print()
        report(
            "Real HTTP server (threaded WSGI, another process, keep-alive)",
            through_http(rounds, per_round),
        )


if __name__ == "__main__":
    main()
