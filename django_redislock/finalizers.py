"""Work that a garbage-collector callback asks for, run on a thread of its own.

A finalizer (``__del__``, ``weakref.finalize``) runs inside whatever allocation triggered the
collection, on any thread, possibly while that thread holds a lock a Redis command needs (a
connection pool's, a client registry's): a finalizer that takes such a lock, or sends a
command, can wait on its own thread forever. So finalizers only ``post`` here (a
``SimpleQueue.put``, safe in a finalizer), and the work runs on the ``django-redislock-
finalizers`` thread. ``start()`` is called where the finalizer is registered, never in it:
starting a thread takes locks too.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)

_work: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_start_lock = threading.Lock()


def post(work: Callable[[], object]) -> None:
    """Run ``work`` on the finalizers' thread (callable from a finalizer)."""
    _work.put(work)


def start() -> None:
    """Make sure the finalizers' thread runs (call it where a finalizer is registered)."""
    global _thread
    if _thread is not None and _thread.is_alive():
        return
    with _start_lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="django-redislock-finalizers", daemon=True)
            _thread.start()


def _run() -> None:
    while True:
        work = _work.get()
        try:
            work()
        except Exception:
            logger.exception("django-redislock: deferred clean-up %r failed", work)


def _after_fork() -> None:
    # The parent's thread does not exist in the child; its pending work is the parent's.
    global _thread, _work, _start_lock
    _thread = None
    _work = queue.SimpleQueue()
    _start_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
