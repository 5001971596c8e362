"""Per-task history: for each task of a queue and each minute of the last day, how many of
its jobs ran, how many failed, and a histogram of their durations (whence p50 and p95).

Kept in Redis in fixed time buckets (``keys``) that expire a day after their last minute: the
memory a task takes does not grow with its number of jobs. The worker records each run in
memory (``recording``) and sends what it gathered once a second, one pipeline per queue
(``sending``); the admin and the metrics read it back (``reading``). The same pipeline keeps
each task's last jobs to start or end a run in a small index, which the admin's task page
reads (``recent``).
"""
