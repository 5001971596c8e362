"""``@redis_locked`` overhead per request: the same tiny view unguarded, guarded by the
decorator, and guarded by hand with redis-py's ``Lock``, on one Redis in one run.

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

import argparse
import http.client
import os
import signal
import socket
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks import redis_url

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import django
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import path

VARIANTS = {"unguarded": "/plain/1/", "@redis_locked": "/guarded/1/", "redis-py Lock": "/rp/1/"}


def plain(request: HttpRequest, product_id: int) -> HttpResponse:
    return HttpResponse("ok")


def build_urls(url: str) -> list[Any]:
    import redis

    from django_redislock import redis_locked

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
    samples: dict[str, list[float]] = {name: [] for name in VARIANTS}
    order = list(VARIANTS)
    for name in order:  # warm up: connections, scripts, URL resolver caches
        for _ in range(50):
            request(VARIANTS[name])
    for _ in range(rounds):
        order.reverse()
        for name in order:
            target = VARIANTS[name]
            for _ in range(per_round):
                began = time.perf_counter()
                request(target)
                samples[name].append(time.perf_counter() - began)
    return samples


def through_test_client(rounds: int, per_round: int) -> dict[str, list[float]]:
    from django.test import Client

    client = Client()

    def request(target: str) -> None:
        response = client.get(target)
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
        connection.request("GET", target)
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


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(title: str, samples: dict[str, list[float]]) -> None:
    base = statistics.median(samples["unguarded"])
    print(title)
    print(f"  {'':16}{'p50 ms':>9}{'p95 ms':>9}{'overhead p50 ms':>17}{'requests':>10}")
    for name, values in samples.items():
        p50, p95 = statistics.median(values), percentile(values, 0.95)
        print(
            f"  {name:16}{p50 * 1000:9.3f}{p95 * 1000:9.3f}"
            f"{(p50 - base) * 1000:17.3f}{len(values):10d}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer requests")
    args = parser.parse_args()
    rounds, per_round = (4, 100) if args.quick else (10, 400)

    url, server = redis_url()
    setup(url)
    import redis

    info = redis.Redis.from_url(url).info("server")
    print(
        f"Redis {info['redis_version']} at {url}; Python {sys.version.split()[0]}; "
        f"Django {django.get_version()}; {os.cpu_count()} CPUs\n"
    )
    try:
        report("Django test client (no network)", through_test_client(rounds, per_round))
        print()
        report(
            "Real HTTP server (threaded WSGI, another process, keep-alive)",
            through_http(rounds, per_round),
        )
    finally:
        if server is not None:
            server.cleanup()


if __name__ == "__main__":
    main()
