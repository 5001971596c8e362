"""Signals sent by locks (and semaphores), stocks, rate limits and the worker. A lock's are
sent with ``sender`` = the lock (or semaphore) class and ``lock`` = the instance, plus
``name``; a stock's with ``sender`` = the stock class, ``stock`` and ``name``; a rate
limit's with ``sender`` = the limiter class, ``limit`` and ``name``; the worker's with
``sender`` = the queue class, ``queue`` (its name) and ``job``."""

from __future__ import annotations

from django.dispatch import Signal

#: A lock was acquired (also on a direct hand-off from a releasing holder). Extra: ``fence``.
lock_acquired = Signal()
#: A held lock was released by its owner.
lock_released = Signal()
#: An acquire gave up: the lock stayed busy for the whole timeout. Extra: ``timeout``.
lock_busy = Signal()
#: A held lock was found lost: its TTL ran out or another owner took it over (seen by the
#: auto-renewer, by ``extend`` or by ``release``).
lock_lost = Signal()
#: An ``auto_renew`` lock's owner went away without releasing it (its thread or asyncio task
#: ended, or its ``Lock`` object was garbage-collected), so the renewer stopped renewing it
#: and it ends within its TTL. ``lock`` is None when it was garbage-collected. Extra:
#: ``reason``.
lock_abandoned = Signal()

#: A stock reserved units. Extra: ``reservation``.
stock_reserved = Signal()
#: A reservation found too few units available (``reserve`` returned None). Extra:
#: ``quantity``.
stock_sold_out = Signal()
#: A reservation was confirmed (sold), by this call: not sent again for a repeated confirm.
#: Extra: ``reservation_id``.
reservation_confirmed = Signal()
#: A reservation was released (its units back), by this call. Extra: ``reservation_id``.
reservation_released = Signal()
#: A rate limit refused a hit. Extra: ``hit`` (its ``retry_after``).
rate_limited = Signal()

#: A job's task raised ``RetryLater``: the job runs again after ``delay`` s, which is not a
#: failure (the Tasks framework's ``task_finished`` is not sent for such a run: the task has
#: not finished). Extra: ``delay``.
job_snoozed = Signal()
