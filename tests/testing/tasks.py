"""Tasks the testing helpers run."""

from __future__ import annotations

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the backport
    from django_tasks import task

from django_redislock import get_queue

CALLS: list[tuple[str, object]] = []  # what ran, in this process (eager mode, run_jobs)


@task()
def add(a: int, b: int) -> int:
    CALLS.append(("add", (a, b)))
    return a + b


@task()
def echo(*args: object, **kwargs: object) -> dict[str, object]:
    CALLS.append(("echo", (args, kwargs)))
    return {"args": args, "kwargs": kwargs, "arg_type": type(args[0]).__name__ if args else ""}


@task()
def fails(message: str) -> None:
    CALLS.append(("fails", message))
    raise ValueError(message)


@task()
def countdown(n: int) -> int:
    """Enqueues itself with n - 1 until 0: jobs that enqueue jobs."""
    CALLS.append(("countdown", n))
    if n > 0:
        get_queue().enqueue("tests.testing.tasks.countdown", args=[n - 1])
    return n


@task()
def credit(account_id: int, amount: int) -> int:
    """A job that reads and writes the database."""
    from django.db.models import F

    from tests.models import Account

    Account.objects.filter(pk=account_id).update(balance=F("balance") + amount)
    return Account.objects.get(pk=account_id).balance
