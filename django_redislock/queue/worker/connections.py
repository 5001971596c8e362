"""Django's ``close_old_connections`` around each job, as after a request: a database
connection that outlived ``CONN_MAX_AGE``, or broke, is closed before the next job uses it.

Django looks only at the connections this thread has set up (``connections.all(
initialized_only=True)``: the aliases found in the thread's own storage), and closes nothing
of one that is not open (``close_if_unusable_or_obsolete`` starts with ``if self.connection
is not None``). A worker running jobs that never touch the database holds none open, and
Django's look costs a few µs per job: that thread's storage is read first, and when every
connection set up in it is closed (or none was), Django, which would close nothing, is not
called. Anything else (an open connection, a backend with its own
``close_if_unusable_or_obsolete``, storage kept some other way) goes to Django.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db import close_old_connections, connections
from django.db.backends.base.base import BaseDatabaseWrapper

_DJANGOS_CHECK = BaseDatabaseWrapper.close_if_unusable_or_obsolete


def _thread_storage() -> Any:
    """The ``threading.local`` where Django keeps this thread's connections (asgiref's
    thread-critical ``Local``), or None when they are kept some other way."""
    storage = getattr(getattr(connections, "_connections", None), "_storage", None)
    return storage if type(storage) is threading.local else None


def close_stale_connections() -> None:
    """``close_old_connections()``, unless it would close nothing: every connection this
    thread set up is closed."""
    storage = _thread_storage()
    if storage is not None:
        for held in storage.__dict__.values():  # in an event loop's thread: its "cvar"
            if (
                not isinstance(held, BaseDatabaseWrapper)
                or held.connection is not None
                or type(held).close_if_unusable_or_obsolete is not _DJANGOS_CHECK
            ):
                break
        else:
            return
    close_old_connections()
