"""Everything only the worker runs (``manage.py run_queue_worker``): its loop, the runner
and its time limits, leases and their renewal, the channel that fetches jobs, the waiter,
the supervisor of worker processes, the registry of live workers and periodic jobs. It
imports the producer side (``queue``); nothing there imports it."""
