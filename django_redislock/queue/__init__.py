"""The delayed job queue: a queue's key layout and job codec, its Lua scripts, the queue
object, the worker and its parts, periodic jobs and the Django Tasks backend."""
