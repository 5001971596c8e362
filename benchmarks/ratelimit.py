"""``@redis_rate_limited``: the latency it adds per request, and the exact count over a
minute at ``rate="5/m"``, on one Redis in one run.

    bash scripts/bench.sh ratelimit      # or: python -m benchmarks.ratelimit [--quick]
                                         #     [--skip-minute]

Uses ``REDIS_URL`` when set, else starts a ``redis-server`` of its own on a free port.

1. Latency, through Django's test client (the whole middleware and handler stack, no
   network), each request timed on its own, the variants in alternating rounds: the same
   tiny view unguarded, rate-limited and let through, rate-limited and refused (429), and
   guarded by ``@redis_locked`` for comparison. The added latency is a variant's median
   minus the unguarded median. Then ``RateLimit.hit()`` alone beside a plain ``INCR`` (one
   round trip, the floor).
2. The minute: one client hits a ``5/m`` limit about once a millisecond for 61 s; every
   hit is replayed through the tests' exact reference model at the server time it was
   judged, and the passes are counted: 5 in the first 60 s from the first pass, the next
   ones no sooner than 60 s after.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from benchmarks import benchmark_redis, command_line, machine
from benchmarks.timing import alternating_samples

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import django
from django.http import HttpRequest, HttpResponse
from django.urls import path

from benchmarks.decorator import report, setup

VARIANTS = {
    "unguarded": ("/plain/1/", 200),
    "rate-limited": ("/limited/1/", 200),
    "refused (429)": ("/refused/1/", 429),
    "@redis_locked": ("/guarded/1/", 200),
}


def plain(request: HttpRequest, product_id: int) -> HttpResponse:
    return HttpResponse("ok")


def build_urls() -> list[Any]:
    from django_redislock import redis_locked, redis_rate_limited

    # 10000/s is never reached here: every request passes, through the whole script.
    limited = redis_rate_limited("bench:{product_id}", rate="10000/s")(plain)
    refused = redis_rate_limited("bench-refused:{product_id}", rate="1/d")(plain)
    return [
        path("plain/<int:product_id>/", plain),
        path("limited/<int:product_id>/", limited),
        path("refused/<int:product_id>/", refused),
        path("guarded/<int:product_id>/", redis_locked("bench:{product_id}", ttl=5)(plain)),
    ]


def through_test_client(rounds: int, per_round: int) -> dict[str, list[float]]:
    from django.test import Client

    client = Client()

    def request(name: str) -> None:
        target, status = VARIANTS[name]
        response = client.get(target)
        assert response.status_code == status, (name, response.status_code)

    client.get("/refused/1/")  # its one pass of the day
    return alternating_samples(list(VARIANTS), request, rounds, per_round)


def direct(rounds: int, per_round: int) -> dict[str, list[float]]:
    from django_redislock.ratelimit.limiter import RateLimit
    from django_redislock.redis.clients import call, get_redis

    limit = RateLimit("bench-direct", rate="10000/s")
    client = get_redis()
    calls = {"unguarded": lambda: call(client, "INCR", "bench-incr"), "RateLimit.hit()": limit.hit}
    return alternating_samples(list(calls), lambda name: calls[name](), rounds, per_round)


def the_minute(seconds: float) -> bool:
    """Hit a 5/m limit for ``seconds``; True when every hit is the exact model's."""
    from django_redislock.ratelimit.limiter import RateLimit
    from django_redislock.ratelimit.scripts import HIT
    from django_redislock.redis.clients import get_redis, run_script
    from tests.ratelimit.model import Model, Seen

    limit = RateLimit("bench-minute", rate="5/m")
    limit.reset()
    client, seen = get_redis(), []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        allowed, wait, now = run_script(client, HIT, [limit.key], (5, 60_000_000, 5, 1))
        seen.append(Seen(allowed == 1, int(wait), int(now)))
        time.sleep(0.001)
    passes = [hit.now for hit in seen if hit.allowed]
    first = passes[0]
    within = sum(p < first + 60_000_000 for p in passes)
    later = [(p - first) / 1e6 for p in passes if p >= first + 60_000_000]
    try:
        Model(5, 60_000_000).replay(seen)
        agrees = True
    except AssertionError as exc:
        print(f"  model disagrees: {exc}")
        agrees = False
    print(f"rate='5/m' hammered for {seconds:.0f} s: {len(seen)} hits, {len(passes)} passed")
    print(f"  passed within 60 s of the first pass: {within} (expected 5)")
    print(f"  later passes, seconds after the first: {', '.join(f'{s:.6f}' for s in later)}")
    print(f"  every hit's decision and wait equal the exact model's: {agrees}")
    return agrees and within == 5 and all(s >= 60 for s in later)


def main() -> None:
    parser = command_line(__doc__, "fewer requests")
    parser.add_argument("--skip-minute", action="store_true", help="skip the 61-s 5/m check")
    args = parser.parse_args()
    rounds, per_round = (4, 100) if args.quick else (10, 400)

    with benchmark_redis() as url:
        setup(url)
        import benchmarks.decorator

        benchmarks.decorator.urlpatterns[:] = build_urls()
        import redis

        print(machine(redis.Redis.from_url(url), url, f"Django {django.get_version()}") + "\n")
        report("Django test client (no network)", through_test_client(rounds, per_round))
        print()
        report(
            "The limiter alone ('unguarded': a plain INCR, the round trip's floor)",
            direct(rounds, per_round),
        )
        print()
        if not args.skip_minute:
            exact = the_minute(61)
            print(f"  exact: {exact}")
            if not exact:
                sys.exit(1)


if __name__ == "__main__":
    main()
