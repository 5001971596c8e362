"""Enqueue on commit: inside ``transaction.atomic()``, a job is pushed to Redis when the
transaction commits on its database, and never when it rolls back (a rolled-back savepoint
drops the jobs enqueued inside it). Django's own ``transaction.on_commit`` does the
bookkeeping; this module decides which database's commit an enqueue waits for, and pushes
at commit time, riding out a Redis that is gone for a moment.

The atomic blocks a test case wraps around each test (Django's ``TestCase``, pytest-django's
``db``) do not count: there, as in production outside a transaction, a job is pushed at
once; inside an ``atomic()`` of the code under test it waits, as ``on_commit`` does in tests
(``captureOnCommitCallbacks`` runs such callbacks).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, transaction

from ..exceptions import RedisUnavailable

logger = logging.getLogger("django_redislock.queue")

T = TypeVar("T")

# At commit, a push that finds Redis unreachable is tried again after these pauses (about
# 1.5 s in all) before the commit's caller is told.
RETRY_PAUSES = (0.05, 0.1, 0.2, 0.4, 0.8)


def _in_transaction(connection: Any) -> bool:
    return connection.in_atomic_block and any(
        not getattr(block, "_from_testcase", False) for block in connection.atomic_blocks
    )


_this_thread = threading.local()


def _connections() -> list[Any]:
    """This thread's connection object of each database (made without connecting), kept:
    reading them through ``connections`` costs microseconds an enqueue need not spend."""
    found: list[Any] | None = getattr(_this_thread, "connections", None)
    if found is None:
        found = _this_thread.connections = [connections[alias] for alias in connections]
    return found


def database(using: str | None, db: str | None) -> str | None:
    """The database alias an enqueue names: ``using`` (as Django's own ``on_commit``
    calls it), or ``db`` (the same, by another name)."""
    if using is not None and db is not None and using != db:
        raise TypeError("Pass using= or db= (the same thing), not both.")
    return using if using is not None else db


def commit_alias(db: str | None) -> str | None:
    """The alias of the database whose commit an enqueue now waits for, or None to push at
    once. ``db`` names it; None: the default database if it is in a transaction, else the
    one database that is."""
    if db is not None:
        if not isinstance(db, str):
            raise TypeError(f"using must be a database alias (str), not {type(db).__name__}.")
        if db not in connections.settings:
            raise ValueError(f"using {db!r} is not a database in DATABASES.")
        return db if _in_transaction(connections[db]) else None
    for connection in _connections():  # (every enqueue: the usual answer, none, comes fast)
        if connection.in_atomic_block:
            break
    else:
        return None
    open_: list[str] = [c.alias for c in _connections() if _in_transaction(c)]
    if not open_ or DEFAULT_DB_ALIAS in open_:
        return DEFAULT_DB_ALIAS if open_ else None
    if len(open_) > 1:
        raise ValueError(
            f"Enqueued inside transactions on several databases ({', '.join(open_)}): pass "
            "using= to say whose commit pushes the job."
        )
    return open_[0]


def push_at_commit(alias: str, push: Callable[[], T], what: str) -> None:
    """Run ``push`` when the transaction on ``alias`` commits (never if it rolls back). A
    Redis that is unreachable then is tried again for about 1.5 s; after that the commit
    stands, the error is logged with ``what`` (the jobs, to enqueue again by hand) and
    RedisUnavailable is raised to the code that committed."""

    def at_commit() -> None:
        for pause in (*RETRY_PAUSES, None):
            try:
                push()
                return
            except RedisUnavailable as exc:
                if pause is None:
                    logger.error("Committed, but %s could not be enqueued: %s", what, exc)
                    raise RedisUnavailable(
                        f"The transaction committed, but {what} could not be enqueued: {exc}"
                    ) from exc
                time.sleep(pause)

    transaction.on_commit(at_commit, using=alias)


def described(jobs: list[tuple[str, Any, Any, Any]]) -> str:
    """``jobs`` (id, task, args, kwargs) as the error at commit names them."""
    shown = "; ".join(
        f"{job_id} ({task} {args!r} {kwargs!r})"[:200] for job_id, task, args, kwargs in jobs[:20]
    )
    more = f" and {len(jobs) - 20} more" if len(jobs) > 20 else ""
    return f"job{'s' if len(jobs) > 1 else ''} {shown}{more}"
