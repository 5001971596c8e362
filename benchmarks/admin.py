"""Admin benchmark: every page of django-redislock's admin, timed through Django's test client
(logged in as a superuser), on one Redis holding a big queue and many held locks.

    bash scripts/bench.sh admin          # or: python -m benchmarks.admin
    python -m benchmarks.admin --jobs 1000000 --locks 100000 --runs 20   # the defaults

Uses ``REDIS_URL`` when set (its database is flushed), else starts a ``redis-server`` of its
own on a free port; Django runs on an in-memory SQLite database. The Redis gets:

* ``--jobs`` scheduled jobs in queue "default", due in 1 hour to 1 day, enqueued with
  ``Queue.enqueue_many``, 1,000 per call; 1 % of that ready; 200 running (leased by four
  registered workers) and 5 left by a worker that is gone (flagged); 1,000 dead (leased and
  buried, with a traceback); ``--finished`` finished jobs kept with their result;
* ``--locks`` held locks (TTL 600 s) taken by the lock's own acquire script, pipelined 1,000
  at a time, so each has its owner, TTL, index entries, a fence (every other one) and a
  waiter (one in a hundred). Named ``lock:<number>``, zero-padded: prefix searches match a
  block of them.

Then each page is loaded once (a warm-up; it must answer 200) and timed ``--runs`` times:
p50 and max in ms. A page passes when its p50 is within the 200 ms target.
"""

from __future__ import annotations

import os
import sys

from benchmarks import benchmark_redis, machine

# Run as a script, this file's directory comes first on sys.path, where ``queue.py`` beside
# it would shadow the standard library's ``queue``: it goes last, and the repository first.
sys.path.sort(
    key=lambda p: os.path.realpath(p or ".") == os.path.dirname(os.path.realpath(__file__))
)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import argparse
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from secrets import token_hex
from typing import Any
from urllib.parse import urlencode

import django
import redis
from django.conf import settings
from django.test.utils import override_settings

BATCH = 1000
LOCK_TTL = 600
TARGET_MS = 200.0
TASK = "benchmarks.queue_tasks.redislock_noop"
QUEUE = "default"
RUNNING, DEAD, WORKERS, LEFT = 200, 1000, 4, 5
SCHEDULE = {
    "sweep": {"task": TASK, "every": 60},
    "nightly": {"task": TASK, "cron": "0 3 * * *"},
    "often": {"task": TASK, "every": 5, "args": [1]},
}
PER_PAGE = 50
DEEP_JOB_PAGE = 10_000

urlpatterns: list[Any] = []  # the URLconf when run as a script: the admin only


def configure() -> None:
    """Django settings for running as a script: the admin on an in-memory SQLite database."""
    settings.configure(
        SECRET_KEY="benchmark",
        DEBUG=False,
        ALLOWED_HOSTS=["testserver"],
        USE_TZ=True,
        ROOT_URLCONF=__name__,
        INSTALLED_APPS=[
            "django.contrib.admin",
            "django.contrib.contenttypes",
            "django.contrib.auth",
            "django.contrib.sessions",
            "django.contrib.messages",
            "django_tasks",
            "django_redislock",
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "APP_DIRS": True,
                "OPTIONS": {
                    "context_processors": [
                        "django.template.context_processors.request",
                        "django.contrib.auth.context_processors.auth",
                        "django.contrib.messages.context_processors.messages",
                    ]
                },
            }
        ],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
        LOGGING_CONFIG=None,
    )
    django.setup()
    from django.contrib import admin
    from django.core.management import call_command
    from django.urls import path

    urlpatterns.append(path("admin/", admin.site.urls))
    call_command("migrate", verbosity=0)


# --- filling ------------------------------------------------------------------------------


class Progress:
    """A counter line on stderr."""

    def __init__(self, what: str, total: int) -> None:
        self.what, self.total, self.started = what, total, time.perf_counter()

    def __call__(self, done: int) -> None:
        sys.stderr.write(f"\r  {self.what}: {done:,} of {self.total:,}")
        if done >= self.total:
            sys.stderr.write(f" in {time.perf_counter() - self.started:.1f} s\n")
        sys.stderr.flush()


def fill_finished(count: int) -> None:
    """``count`` jobs run and acknowledged with a result (kept for RESULT_TTL)."""
    from django_redislock import get_queue

    queue = get_queue(QUEUE)
    progress = Progress("finished jobs", count)
    for start in range(0, count, BATCH):
        end = min(count, start + BATCH)
        queue.enqueue_many({"task": TASK, "args": [i]} for i in range(start, end))
        popped = queue.pop(end - start, worker="benchmark")
        queue.fetch(
            0, finished=[(job, f'{{"ok": true, "n": {i}}}') for i, job in enumerate(popped, start)]
        )
        progress(end)


def fill_jobs(scheduled: int) -> dict[str, str]:
    """The queue's jobs in every state; returns a job id of each state (for the actions)."""
    from django_redislock import get_queue
    from django_redislock.queue.worker.loop import Worker

    queue = get_queue(QUEUE)
    rng = random.Random(42)
    ready = RUNNING + DEAD + scheduled // 100
    progress = Progress("scheduled jobs", scheduled)
    for start in range(0, scheduled, BATCH):
        end = min(scheduled, start + BATCH)
        queue.enqueue_many(
            {"task": TASK, "args": [i], "delay": rng.uniform(3600, 86400)}
            for i in range(start, end)
        )
        progress(end)
    for start in range(0, ready, BATCH):
        queue.enqueue_many(
            {"task": TASK, "args": [i]} for i in range(start, min(ready, start + BATCH))
        )
    for _ in range(WORKERS):  # registered as live, each holding its share of running jobs
        worker = Worker([QUEUE], concurrency=RUNNING // WORKERS)
        worker.tracker.every = LOCK_TTL  # its registry entry lasts 3 beats
        for job in queue.pop(RUNNING // WORKERS, lease=3600, worker=worker.id):
            worker.leases.running[(QUEUE, job.id)] = (queue, job)
        worker.heartbeat()
    trace = "Traceback (most recent call last):\n" + '  File "shop/tasks.py", line 12\n' * 20
    for job in queue.pop(DEAD, lease=3600):
        queue.bury(job, RuntimeError("payment provider said no"), trace)
    queue.enqueue_many({"task": TASK, "args": [i]} for i in range(LEFT))
    left = queue.pop(LEFT, lease=3600, worker="gone-worker")  # no registry entry, and...
    renewed_ms = (time.time() - 60) * 1000  # ... no renewal for a minute: flagged
    queue.client.zadd(queue.keys.run, {job.id: renewed_ms + 3600_000 for job in left}, xx=True)
    ids = {s: queue.jobs(s, 0, 1)[0].id for s in ("ready", "scheduled", "running", "dead")}
    return {**ids, "left": left[0].id}


def lock_name(i: int, count: int) -> str:
    return f"lock:{i:0{len(str(max(count - 1, 100)))}d}"


def fill_locks(client: Any, count: int) -> None:
    """Locks held as ``Lock.acquire`` holds them, through its acquire script, pipelined."""
    from django_redislock import Lock
    from django_redislock.locks.scripts import ACQUIRE

    sha = client.script_load(ACQUIRE.source)
    progress = Progress("held locks", count)
    for start in range(0, count, BATCH):
        end = min(count, start + BATCH)
        pipe = client.pipeline(transaction=False)
        for i in range(start, end):
            lock = Lock(lock_name(i, count), ttl=LOCK_TTL, fencing=i % 2 == 0)
            token = f"{token_hex(8)}|"
            keys = lock.keys.acquiring
            args = list(lock._args(token, register=False, queued=False))
            pipe.execute_command("EVALSHA", sha, len(keys), *keys, *args)
            if i % 100 == 50:  # a waiter, queued (registered for as long as the lock lasts)
                waiter = f"{token_hex(8)}|"
                keys = lock.keys.acquiring
                args[0], args[7] = waiter, LOCK_TTL * 1000
                pipe.execute_command("EVALSHA", sha, len(keys), *keys, *args)
        held = sum(1 for reply in pipe.execute() if type(reply) is int)  # else {pttl}: busy
        if held != end - start:
            raise RuntimeError(f"Only {held} of locks {start}..{end} could be taken.")
        progress(end)


# --- timing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    page: str
    p50: float  # ms
    max: float  # ms
    status: int

    @property
    def passed(self) -> bool:
        return self.status == 200 and self.p50 <= TARGET_MS


def pages(jobs: dict[str, str], counts: dict[str, int], locks: int) -> list[tuple[str, str]]:
    """(label, URL) of every page to time."""
    from django.urls import reverse

    from django_redislock.locks.listing import list_locks

    def url(view: str, /, *args: str, **query: Any) -> str:
        found = reverse(f"admin:django_redislock_{view}", args=args)
        return f"{found}?{urlencode(query)}" if query else found

    def last(total: int) -> int:
        return max(1, -(-total // PER_PAGE))

    found = [("admin index", reverse("admin:index")), ("queues", url("dashboard_changelist"))]
    for state, count in counts.items():
        if state == "waiting":  # (no page: kept 0 until workflows)
            continue
        deep = min(DEEP_JOB_PAGE, last(count))
        found += [
            (f"jobs {state} ({count:,}) p1", url("jobs", QUEUE, state)),
            (f"jobs {state} p{deep:,}", url("jobs", QUEUE, state, p=deep)),
        ]
    middle = lock_name(locks // 2, locks)
    small, big = middle[: len(middle) - 2], middle[: len("lock:") + 1]  # ~100, ~10 % of locks
    deep, deep_big = last(locks) // 2 + 1, last(locks // 10) // 2 + 1
    matches = {q: list_locks(q).total for q in (small, big)}
    found += [
        (f"locks ({locks:,}) p1", url("locks")),
        (f"locks p{deep:,}", url("locks", p=deep)),
        (f"locks q={small} ({matches[small]:,}) p1", url("locks", q=small)),
        (f"locks q={big} ({matches[big]:,}) p1", url("locks", q=big)),
        (f"locks q={big} p{deep_big:,}", url("locks", q=big, p=deep_big)),
        ("workers", url("workers")),
        ("confirm force release", url("confirm", "release", name=middle)),
        ("confirm run now", url("confirm", "run", queue=QUEUE, job=jobs["scheduled"])),
        ("confirm retry", url("confirm", "retry", queue=QUEUE, job=jobs["dead"])),
        ("confirm delete", url("confirm", "delete", queue=QUEUE, job=jobs["ready"])),
        ("confirm purge dead", url("confirm", "purge", queue=QUEUE)),
        ("confirm retry all dead", url("confirm", "retry_all", queue=QUEUE)),
        ("confirm requeue now", url("confirm", "requeue_running", queue=QUEUE, job=jobs["left"])),
        ("job dead", url("job", QUEUE, id=jobs["dead"])),
        ("job running", url("job", QUEUE, id=jobs["left"])),
        ("job scheduled", url("job", QUEUE, id=jobs["scheduled"])),
        ("schedule", url("schedule")),
    ]
    if jobs.get("done"):
        found.append(("job finished", url("job", QUEUE, id=jobs["done"])))
    return found


def time_page(client: Any, url: str, runs: int) -> tuple[list[float], int]:
    status = client.get(url).status_code  # warm-up
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        client.get(url)
        took.append((time.perf_counter() - start) * 1000)
    return took, status


def measure(r: redis.Redis, jobs: int, locks: int, runs: int, finished: int) -> list[Row]:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from django_redislock import get_queue, get_redis

    r.flushdb()
    print(
        f"Filling: {jobs:,} scheduled jobs, {finished:,} finished, {locks:,} held locks", flush=True
    )
    fill_finished(finished)
    ids = fill_jobs(jobs)
    done = get_queue(QUEUE).jobs("done", 0, 1)
    ids["done"] = done[0].id if done else ""
    fill_locks(get_redis(), locks)
    memory = r.info("memory")["used_memory_human"]
    counts = get_queue(QUEUE).counts(done=True)
    print(f"Redis used_memory_human: {memory}; {r.dbsize():,} keys; jobs {counts}\n", flush=True)

    user, _ = get_user_model().objects.get_or_create(
        username="benchmark", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    rows = []
    for label, url in pages(ids, counts, locks):
        took, status = time_page(client, url, runs)
        rows.append(Row(label, statistics.median(took), max(took), status))
    return rows


def report(rows: Sequence[Row], runs: int) -> None:
    width = max(len(row.page) for row in rows) + 2
    print(f"  {'page':{width}}{'p50 ms':>9}{'max ms':>9}   p50 <= {TARGET_MS:.0f} ms ({runs} runs)")
    for row in rows:
        verdict = (
            "PASS" if row.passed else f"FAIL{'' if row.status == 200 else f' (HTTP {row.status})'}"
        )
        print(f"  {row.page:{width}}{row.p50:9.1f}{row.max:9.1f}   {verdict}")
    failed = [row.page for row in rows if not row.passed]
    print(
        f"\n{len(rows) - len(failed)} of {len(rows)} pages pass"
        + (f"; failing: {', '.join(failed)}" if failed else "")
    )


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1_000_000, help="scheduled jobs")
    parser.add_argument("--locks", type=int, default=100_000, help="held locks")
    parser.add_argument("--runs", type=int, default=20, help="timed loads of each page")
    parser.add_argument(
        "--finished", type=int, default=100_000, help="finished jobs kept with their result"
    )
    args = parser.parse_args(argv)

    with benchmark_redis(flush=True) as url:
        if not settings.configured:
            configure()
        r = redis.Redis.from_url(url)
        print(machine(r, url, f"Django {django.get_version()}"))
        queues = {QUEUE: {"LEASE": 3600, "RESULT_TTL": 86400}}
        options = {"URL": url, "QUEUES": queues, "SCHEDULE": SCHEDULE}
        with override_settings(REDISLOCK=options):
            rows = measure(r, args.jobs, args.locks, args.runs, args.finished)
        report(rows, args.runs)
        return rows


if __name__ == "__main__":
    main()
