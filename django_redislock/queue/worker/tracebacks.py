"""A failed job's traceback as the worker logs it: from the task's first frame on. The
frames that ran the task (the worker's, the Tasks framework's; asgiref's and asyncio's for
an async task) are left out, and so is the worker's signal handler a time limit or a cancel
may have arrived in. Frames of this app that the task called (a lock, a queue) stay: they
say where it failed.
"""

from __future__ import annotations

from types import TracebackType

# Modules (with a trailing dot) whose frames lead into a task.
RUNNING = (
    "django_redislock.",
    "django.tasks.",
    "django_tasks.",
    "asgiref.",
    "asyncio.",
    "concurrent.futures.",
    "threading.",
    "importlib.",
)
# Where an exception raised in a job's thread from outside (a time limit, a cancel) lands.
DELIVERED_IN = ("django_redislock.queue.worker.",)


def _module(tb: TracebackType) -> str:
    return f"{tb.tb_frame.f_globals.get('__name__', '')}."


def task_traceback(exc: BaseException, whole: bool = True) -> TracebackType | None:
    """``exc``'s traceback from the task's first frame on. When no frame is the task's: all
    of it with ``whole`` (a failure of the worker itself), else None."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    start = next((i for i, f in enumerate(frames) if not _module(f).startswith(RUNNING)), None)
    if start is None:
        return exc.__traceback__ if whole else None
    end = len(frames)
    while end > start + 1 and _module(frames[end - 1]).startswith(DELIVERED_IN):
        end -= 1
    if end == len(frames):
        return frames[start]  # the same chain from there on
    trimmed: TracebackType | None = None
    for frame in reversed(frames[start:end]):
        trimmed = TracebackType(trimmed, frame.tb_frame, frame.tb_lasti, frame.tb_lineno)
    return trimmed
