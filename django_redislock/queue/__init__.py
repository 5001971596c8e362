"""The delayed job queue as producers and operators see it: the queue object, its key layout
and job codec, its Lua scripts, eager mode and ``on_commit`` enqueues. The worker lives in
``queue.worker``; the Django Tasks backend in ``tasks``."""
