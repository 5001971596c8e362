"""The key layout of one queue: the only place its Redis keys are named.

Every key of a queue shares the hash tag ``{Q:<queue>}``, so every script runs on Redis
Cluster (``base`` = ``<prefix>:{Q:<queue>}:``):

    base j:<id>          hash    a pending job (fields: ``jobs.Field``)
    base result:<id>     hash    a finished job kept for RESULT_TTL: the job's hash, renamed,
                                 with state done and its return value
    base j:<id>:corrupt  any     what was found at ``j:<id>`` when it was not a hash, set aside
    base ready           zset    ready ids; score (100 - priority) * 2^40 + arrival number
    base sched           zset    scheduled ids; score = due (epoch ms)
    base run             zset    leased ids; score = lease expiry (epoch ms)
    base dead            zset    dead ids; score = when they died (epoch ms)
    base done            zset    ids of the finished jobs kept as ``result:<id>``; score =
                                 when they finished (epoch ms); the scripts that finish jobs
                                 trim what is older than RESULT_TTL, a bounded batch a call
    base seq             string  arrival counter (FIFO within a priority)
    base wake            list    wake-up tokens: a worker blocks on it (BLPOP) when idle
    base held            zset    the permits of running jobs with a concurrency key, all
                                 scored 0: "<key>\\x00<id>" (so a key's count is a ZLEXCOUNT)
    base parked          zset    the jobs held back by their key's limit, all scored 0:
                                 "<key>\\x00<ready score, 16 digits><id>" (a key's oldest first);
                                 a paused task's jobs under the key "\\t<task path>";
                                 those over their rate key's rate under "\\x02", by when
                                 they may start: "\\x02\\x00<epoch ms, 16 digits><ready
                                 score, 16 digits><id>"
    base paused          hash    what is paused: "*" (the whole queue) or a task path ->
                                 "<who>|<epoch ms>"
    base starts          zset    the starts of jobs with a rate key, all scored 0:
                                 "<key>\\x00<epoch ms, 15 digits><id>" (a key's window is a
                                 ZLEXCOUNT; older ones are trimmed as the key is used)
    base waiting         zset    the jobs waiting for their dependencies to end; score = when
                                 they were enqueued (epoch ms)
    base outbox          list    what a script could not do for want of a key, for the
                                 worker to deliver (``outbox``): "t" tell a dependant that a
                                 job ended, "r" register a dependant at its dependency in
                                 another queue, "e" wake those who join a job that ended
    base end:<id>        list    the wake-ups of those who ``join`` job <id> (expires)
    base wf:<id>         string  a workflow's record (JSON: its steps), in the queue of its
                                 first step (``workflows``)
    base workflows       zset    the workflows recorded here; score = when to look at it
                                 next (epoch ms), to clean it up once it ended long enough
    base tick:<name>     string  the last tick (epoch ms) enqueued for a SCHEDULE entry;
                                 2^53-1 while the entry is paused (``worker.schedule_keys``)
    base tick:<name>:now string  the last "run now" nonce (epoch µs) of a SCHEDULE entry
    base tick-paused:<name>  hash  a paused SCHEDULE entry: by, at (epoch ms), tick (the
                                 claim kept for its resume)
    base u:<id>          hash    a unique_for window: the creating enqueue's task, args,
                                 kwargs, meta, priority, due and enqueue time (job fields);
                                 expires with the window (PX), whatever became of the job
    base expired         string  how many jobs were buried as expired (never started)
"""

from __future__ import annotations

from .jobs import JobState

_SETS: dict[str, str] = {
    JobState.READY: "ready",
    JobState.SCHEDULED: "sched",
    JobState.RUNNING: "run",
    JobState.DEAD: "dead",
    JobState.WAITING: "waiting",
}


class QueueKeys:
    """The keys of queue ``name`` under ``prefix``. ``fixed`` are the keys every queue
    script is given first, in this order: ready, sched, run, dead, seq, wake, held, parked,
    paused, starts, waiting, outbox."""

    def __init__(self, prefix: str, name: str) -> None:
        self.base = f"{prefix}:{{Q:{name}}}:"
        self.ready = self.base + "ready"
        self.sched = self.base + "sched"
        self.run = self.base + "run"
        self.dead = self.base + "dead"
        self.seq = self.base + "seq"
        self.wake = self.base + "wake"
        self.done = self.base + "done"
        self.expired = self.base + "expired"
        self.held = self.base + "held"
        self.parked = self.base + "parked"
        self.paused = self.base + "paused"
        self.starts = self.base + "starts"
        self.waiting = self.base + "waiting"
        self.outbox = self.base + "outbox"
        self.workflows = self.base + "workflows"
        # ADD, the one-job enqueue, takes the first six (it touches no limit key): four
        # keys fewer to send on the enqueue path
        self.producing = (self.ready, self.sched, self.run, self.dead, self.seq, self.wake)
        self.fixed = (
            self.ready,
            self.sched,
            self.run,
            self.dead,
            self.seq,
            self.wake,
            self.held,
            self.parked,
            self.paused,
            self.starts,
            self.waiting,
            self.outbox,
        )
        self.job_prefix = self.base + "j:"
        self.result_prefix = self.base + "result:"

    def job(self, job_id: str) -> str:
        return self.job_prefix + job_id

    def jobs(self, job_ids: list[str]) -> list[str]:
        prefix = self.job_prefix
        return [prefix + job_id for job_id in job_ids]

    def corrupt(self, job_id: str) -> str:
        """Where a job's key that was not a hash is set aside."""
        return self.job_prefix + job_id + ":corrupt"

    def unique(self, job_id: str) -> str:
        """The marker of a ``unique_for`` window of ``job_id``."""
        return self.base + "u:" + job_id

    def result(self, job_id: str) -> str:
        return self.result_prefix + job_id

    def end(self, job_id: str) -> str:
        """The list those who ``join`` job ``job_id`` block on."""
        return self.base + "end:" + job_id

    def workflow(self, workflow_id: str) -> str:
        """The record of a workflow whose first step is in this queue."""
        return self.base + "wf:" + workflow_id

    def tick(self, entry: str) -> str:
        return self.base + "tick:" + entry

    def of_state(self, state: str) -> str:
        """The sorted set of the jobs in ``state`` (ready, scheduled, running, dead or
        waiting)."""
        if state not in _SETS:
            raise ValueError(f"state must be one of {', '.join(_SETS)}, not {state!r}.")
        return self.base + _SETS[state]
