"""Lock benchmark: django-redislock side by side with the raw floor, redis-py's Lock,
python-redis-lock and pottery, on one Redis in one run.

    bash scripts/bench.sh locks          # or: python -m benchmarks.locks [--quick]

Uses ``REDIS_URL`` when set, else starts a ``redis-server`` of its own on a free port.
Measures:

* uncontended acquire+release pairs/s (rounds interleaved, median of rounds);
  django-redislock also with ``SPIN_WAIT`` 0: each reply awaited asleep in ``recv``, as
  redis-py does, rather than polled for first;
* hand-off latency: a holder in one process releases, a waiter blocked in another process
  holds the lock — median and p95;
* 16 client processes contending for one lock with a 10 ms hold: total acquisitions/s and
  the min/max share of acquisitions per client.

``Semaphore`` (limit 1, so that a waiter blocks) runs beside ``Lock`` in the first two, and
its ratios to ``Lock`` are printed against the targets of issue 14.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks import benchmark_redis, command_line, machine
from benchmarks.timing import hand_offs, pairs_per_second, percentile, take_in_turn, until_blocked

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import django
from django.conf import settings

RELEASE_LUA = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"
)


def setup(url: str) -> None:
    settings.configure(
        INSTALLED_APPS=["django_redislock"],
        REDISLOCK={"URL": url},
        DATABASES={},
    )
    django.setup()


def client(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


# --- the contenders, each as a factory: (url, name, ttl seconds) -> (acquire(blocking), release)


def ours(
    url: str, name: str, ttl: float, fair: bool = False, spin: bool = True
) -> tuple[Callable[..., bool], Callable[[], None]]:
    from django_redislock import Lock, get_redis
    from django_redislock.redis.fastpath import dedicated

    lock = Lock(name, ttl=ttl, fair=fair, using=None if spin else url)
    if not spin:  # a client of its own, its connection waiting for replies asleep in recv
        held = dedicated(get_redis(url))
        assert held is not None
        held.spin = 0.0  # as REDISLOCK["SPIN_WAIT"] = 0 would, for this connection only

    def acquire(blocking: bool = False) -> bool:
        return lock.acquire(math.inf if blocking else 0)

    return acquire, lock.release


def ours_fair(url: str, name: str, ttl: float) -> tuple[Callable[..., bool], Callable[[], None]]:
    return ours(url, name, ttl, fair=True)


def ours_no_spin(url: str, name: str, ttl: float) -> tuple[Callable[..., bool], Callable[[], None]]:
    return ours(url, name, ttl, spin=False)


def ours_semaphore(
    url: str, name: str, ttl: float
) -> tuple[Callable[..., bool], Callable[[], None]]:
    from django_redislock.semaphores.semaphore import Semaphore

    semaphore = Semaphore(name, limit=1, ttl=ttl)

    def acquire(blocking: bool = False) -> bool:
        return semaphore.acquire(math.inf if blocking else 0)

    return acquire, semaphore.release


def raw_floor(url: str, name: str, ttl: float) -> tuple[Callable[..., bool], Callable[[], None]]:
    r = client(url)
    sha = r.script_load(RELEASE_LUA)
    ex = r.execute_command
    ttl_ms = int(ttl * 1000)
    token = [b""]

    def acquire(blocking: bool = False) -> bool:
        token[0] = os.urandom(8).hex().encode()
        return bool(ex("SET", name, token[0], "NX", "PX", ttl_ms))

    def release() -> None:
        ex("EVALSHA", sha, 1, name, token[0])

    return acquire, release


def raw_floor_own_connection(
    url: str, name: str, ttl: float
) -> tuple[Callable[..., bool], Callable[[], None]]:
    """The floor again, on a connection held outside the pool (as django-redislock does)."""
    r = client(url)
    sha = r.script_load(RELEASE_LUA)
    conn = r.connection_pool.get_connection()
    ttl_ms = int(ttl * 1000)
    token = [b""]

    def run(*args: Any) -> Any:
        conn.send_packed_command(conn.pack_command(*args), check_health=False)
        return conn.read_response()

    def acquire(blocking: bool = False) -> bool:
        token[0] = os.urandom(8).hex().encode()
        return bool(run("SET", name, token[0], "NX", "PX", ttl_ms))

    def release() -> None:
        run("EVALSHA", sha, 1, name, token[0])

    return acquire, release


def redis_py(url: str, name: str, ttl: float) -> tuple[Callable[..., bool], Callable[[], None]]:
    lock = client(url).lock(name, timeout=ttl)
    return (lambda blocking=False: lock.acquire(blocking=blocking)), lock.release


def python_redis_lock(
    url: str, name: str, ttl: float
) -> tuple[Callable[..., bool], Callable[[], None]]:
    import redis_lock

    lock = redis_lock.Lock(client(url), name, expire=max(1, int(ttl)))
    return (lambda blocking=False: lock.acquire(blocking=blocking)), lock.release


def pottery(url: str, name: str, ttl: float) -> tuple[Callable[..., bool], Callable[[], None]]:
    from pottery import Redlock

    lock = Redlock(key=name, masters={client(url)}, auto_release_time=ttl)
    return (lambda blocking=False: lock.acquire(blocking=blocking)), lock.release


CONTENDERS: dict[str, Callable[..., Any]] = {
    "raw floor": raw_floor,
    "raw floor, own conn": raw_floor_own_connection,
    "django-redislock": ours,
    "ours, SPIN_WAIT 0": ours_no_spin,
    "ours, Semaphore": ours_semaphore,
    "redis-py Lock": redis_py,
    "python-redis-lock": python_redis_lock,
    "pottery Redlock": pottery,
}


# --- uncontended


def uncontended(url: str, rounds: int, seconds: float) -> dict[str, float]:
    made = {
        name: factory(url, f"bench-u-{i}", 10)
        for i, (name, factory) in enumerate(CONTENDERS.items())
    }
    return pairs_per_second(made, rounds, seconds)


# --- hand-off latency between two processes


def _handoff_waiter(url: str, kind: str, name: str, conn: Any) -> None:
    from django_redislock.redis.clients import reset_connections

    reset_connections()
    acquire, release = HANDOFF[kind](url, name, 30)
    take_in_turn(conn, lambda: acquire(blocking=True), release)


def handoff(url: str, kind: str, iterations: int, idle: float = 0.0) -> list[float]:
    name = f"bench-h-{kind.replace(' ', '-')}"

    def holder() -> Any:
        acquire, release = HANDOFF[kind](url, name, 30)
        return (lambda: acquire(blocking=True)), release

    probe = client(url)
    idle = idle or (0.0 if kind in PUSHED else 0.005)
    return hand_offs(
        _handoff_waiter, (url, kind, name), holder, lambda: until_blocked(probe, idle), iterations
    )


HANDOFF: dict[str, Callable[..., Any]] = {
    "django-redislock": ours,
    "django-redislock fair": ours_fair,
    "ours, SPIN_WAIT 0": ours_no_spin,
    "ours, Semaphore": ours_semaphore,
    "python-redis-lock": python_redis_lock,
    "redis-py Lock": redis_py,
}


# --- contention


def _contender(url: str, kind: str, seconds: float, start_at: float, out: Any) -> None:
    from django_redislock.redis.clients import reset_connections

    reset_connections()
    acquire, release = CONTENTION[kind](url, f"bench-c-{kind.replace(' ', '-')}", 30)
    count = 0
    while time.time() < start_at:
        time.sleep(0.001)
    end = start_at + seconds
    while time.time() < end:
        acquire(blocking=True)
        time.sleep(0.010)
        release()
        count += 1
    out.put(count)


def contention(url: str, kind: str, clients: int, seconds: float) -> tuple[float, float]:
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    start_at = time.time() + 1.0
    procs = [
        ctx.Process(target=_contender, args=(url, kind, seconds, start_at, out), daemon=True)
        for _ in range(clients)
    ]
    for p in procs:
        p.start()
    counts = [out.get(timeout=seconds + 60) for _ in procs]
    for p in procs:
        p.join(10)
    return sum(counts) / seconds, min(counts) / max(counts) if max(counts) else 0.0


HANDOFF_ROUNDS = 5
PUSHED = {
    "django-redislock",
    "django-redislock fair",
    "ours, SPIN_WAIT 0",
    "ours, Semaphore",
    "python-redis-lock",
}

CONTENTION: dict[str, Callable[..., Any]] = {
    "django-redislock fair": ours_fair,
    "django-redislock": ours,
    "python-redis-lock": python_redis_lock,
    "redis-py Lock": redis_py,
}


def main() -> None:
    parser = command_line(__doc__, "fewer rounds, shorter runs")
    parser.add_argument(
        "--only",
        choices=["uncontended", "handoff", "contention"],
        help="measure only that part",
    )
    args = parser.parse_args()
    parts = {args.only} if args.only else {"uncontended", "handoff", "contention"}
    rounds, seconds, iterations, window = (4, 0.3, 100, 3.0) if args.quick else (20, 0.4, 500, 5.0)

    with benchmark_redis() as url:
        setup(url)
        print(machine(client(url), url) + "\n")
        if "uncontended" in parts:
            _uncontended(url, rounds, seconds)
        if "handoff" in parts:
            _handoffs(url, iterations)
        if "contention" in parts:
            print(f"\n16 processes contending, 10 ms hold, {window:.0f} s")
            print(f"  {'':24}{'acq/s':>8}{'min/max share':>15}")
            for kind in CONTENTION:
                rate, share = contention(url, kind, 16, window)
                print(f"  {kind:24}{rate:8.1f}{share:15.2f}")


def _uncontended(url: str, rounds: int, seconds: float) -> None:
    print(f"Uncontended acquire+release (one client, median of {rounds} interleaved rounds)")
    rates = uncontended(url, rounds, seconds)
    ours_rate = rates["django-redislock"]
    print(f"  {'':22}{'pairs/s':>10}  {'django-redislock / it':>22}")
    for name, rate in rates.items():
        print(f"  {name:22}{rate:10.0f}  {ours_rate / rate:21.2f}x")
    ratio = rates["ours, Semaphore"] / ours_rate
    print(f"  Semaphore / Lock pairs/s: {ratio:.2f} (issue 14: >= 0.90)")


def _handoffs(url: str, iterations: int) -> None:
    for idle, title in [
        (0.0, "released as soon as Redis reports the waiter blocked"),
        (0.005, "released after 5 ms idle (adds this machine's idle wake-up cost)"),
    ]:
        print(f"\nHand-off: holder releases -> waiter in another process holds it;\n  {title}")
        samples: dict[str, list[float]] = {kind: [] for kind in HANDOFF}
        order = list(HANDOFF)
        for _ in range(HANDOFF_ROUNDS):
            order.reverse()  # rounds alternate, so drift hits every contender alike
            for kind in order:
                n = iterations if kind in PUSHED else max(20, iterations // 10)
                samples[kind] += handoff(url, kind, max(1, n // HANDOFF_ROUNDS), idle)
        results = {
            kind: (statistics.median(lat), percentile(lat, 0.95)) for kind, lat in samples.items()
        }
        base = results["django-redislock"][0]
        print(f"  {'':24}{'median ms':>10}{'p95 ms':>10}  {'django-redislock / it':>22}")
        for kind, (med, p95) in results.items():
            print(f"  {kind:24}{med * 1000:10.3f}{p95 * 1000:10.3f}  {base / med:21.2f}x")
        ratio = results["ours, Semaphore"][0] / base
        print(f"  Semaphore / Lock hand-off median: {ratio:.2f} (issue 14: <= 1.20)")
        if not idle:
            theirs = base / results["python-redis-lock"][0]
            verdict = "PASS" if theirs <= 0.5 else "FAIL"
            print(f"  hand-off / python-redis-lock's: {theirs:.2f} (issue 25: <= 0.50) {verdict}")


if __name__ == "__main__":
    main()
