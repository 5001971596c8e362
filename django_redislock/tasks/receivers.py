"""The Tasks framework's signals, sent without ``Signal.send``'s look-up of the receivers
where it costs most. ``task_started`` and ``task_finished`` go out for every job a worker
runs: that look-up (a lock, a walk over every receiver, a list or two built) is most of
what a signal costs its sender when the receivers themselves do little, as the
framework's own logging ones do when their logger is off.

The receivers found for a sender are kept, as the signal holds them (weakly held ones stay
weak), for as long as the signal's list of receivers is the one they were found in: a
receiver connected or disconnected, or one that died, sends through ``Signal.send`` again,
which looks them up afresh. Asynchronous receivers, a signal that caches its own look-ups,
or a dispatcher unlike Django 5.2's and 6's are always sent through ``Signal.send``.

``task_enqueued``: its receivers are looked up while the job is on its way to Redis, and
called once it is in (``enqueued_receivers``, ``announce_enqueued``).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

# (what Signal keys senders by)
from django.dispatch.dispatcher import NONE_ID, _make_id  # type: ignore[attr-defined]

from .results import signals

# The signal's receivers as last seen, and those of the sender among them, each with
# whether it is a weak reference; None: sent through Signal.send.
_Found = tuple["list[Any] | None", "list[tuple[Any, bool]] | None"]


class Receivers:
    """``signal``'s receivers for ``sender``; ``send`` calls them as ``Signal.send`` would."""

    def __init__(self, signal: Any, sender: Any) -> None:
        self.signal, self.sender = signal, sender
        self.found: _Found = (None, None)  # replaced whole: read by any thread

    def send(self, **named: Any) -> None:
        signal, sender = self.signal, self.sender
        receivers = signal.receivers
        if not receivers:
            return  # as Signal.send: nothing connected
        seen, kept = self.found
        if receivers != seen:
            kept = self._look_up(receivers)
        if kept is None or getattr(signal, "_dead_receivers", True):
            signal.send(sender, **named)  # (which clears the dead receivers)
            return
        calls = []
        for receiver, weak in kept:
            if weak:
                receiver = receiver()
                if receiver is None:  # died: Signal.send clears it, and sends to the others
                    self.found = (None, None)
                    signal.send(sender, **named)
                    return
            calls.append(receiver)
        for receiver in calls:
            receiver(signal=signal, sender=sender, **named)

    def _look_up(self, receivers: list[Any]) -> list[tuple[Any, bool]] | None:
        """The receivers of ``sender`` as the signal holds them; None: through Signal.send."""
        seen = list(receivers)
        kept: list[tuple[Any, bool]] | None = None
        try:
            signal = self.signal
            if signal.use_caching:
                raise ValueError
            key, kept = _make_id(self.sender), []
            for (_, sender_key), receiver, is_async in seen:
                if is_async:
                    raise ValueError
                if sender_key in (NONE_ID, key):
                    kept.append((receiver, isinstance(receiver, weakref.ReferenceType)))
        except (AttributeError, TypeError, ValueError):
            kept = None
        self.found = (seen, kept)
        return kept


_made: dict[tuple[int, Any], Receivers] = {}
_making = threading.Lock()


def receivers(signal: Any, sender: Any) -> Receivers:
    """The ``Receivers`` of ``signal`` for ``sender``, made once."""
    found = _made.get((id(signal), sender))
    if found is None:
        with _making:
            found = _made.setdefault((id(signal), sender), Receivers(signal, sender))
    return found


def enqueued_receivers(sender: type) -> list[Any] | None:
    """The receivers of the framework's ``task_enqueued`` for ``sender``, looked up while a
    job is on its way to Redis (``announce_enqueued`` calls them once it is in): the look-up
    is most of what the signal costs. None when ``Signal.send`` itself must deliver it
    (asynchronous receivers, or a dispatcher unlike Django 5.2's and 6's)."""
    signal = signals.task_enqueued
    if not signal.receivers:
        return []
    try:  # (Django's own look-up, a private method)
        sync, asynchronous = signal._live_receivers(sender)
    except (AttributeError, TypeError, ValueError):
        return None
    return None if asynchronous else list(sync)


def announce_enqueued(sender: type, result: Any, receivers: list[Any] | None) -> None:
    """Send ``task_enqueued`` for ``result``, as ``Signal.send`` would, to the ``receivers``
    ``enqueued_receivers`` found (None: through ``Signal.send``)."""
    signal = signals.task_enqueued
    if receivers is None:
        signal.send(sender, task_result=result)
        return
    for receiver in receivers:
        receiver(signal=signal, sender=sender, task_result=result)
