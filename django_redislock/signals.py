"""Signals sent by locks. Every one is sent with ``sender`` = the lock class and ``lock`` =
the lock instance, plus ``name``."""

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
