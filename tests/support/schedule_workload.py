"""The schedule's own scripts (PAUSE_ENTRY, RESUME_ENTRY; a run now is ENQUEUE) run through
their public API, every branch that writes, for ``tests/test_script_keys.py``: it needs a
SCHEDULE entry named ``tick`` (every 60 s) in a configured queue."""

from __future__ import annotations

from django_redislock import get_queue, get_redis
from django_redislock.queue.worker.schedule_keys import entry_keys
from django_redislock.queue.worker.schedule_state import (
    entry_named,
    entry_states,
    pause_entry,
    resume_entry,
    run_entry_now,
)


def exercise() -> None:
    entry = entry_named("tick")
    resume_entry(entry)  # not paused: nothing to do
    assert pause_entry(entry, by="script keys")
    keys = entry_keys(get_queue(entry.queue).keys, entry.name)
    get_redis().set(keys.tick, 1)  # a claim put back under the pause: parked again
    assert not pause_entry(entry)
    assert run_entry_now(entry) is not None
    assert entry_states([entry])[0].paused
    assert resume_entry(entry)
