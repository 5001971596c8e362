"""The key layout of the per-task history of one queue: the only place its keys are named.

Every key shares the queue's hash tag (``QueueKeys.base``, ``<prefix>:{Q:<queue>}:``), so a
flush of one queue is one pipeline to one Cluster node:

    base hist:m<span>:<task>   hash  ten minutes of a task (span = epoch minute // 10);
                                     fields ``<m>:n`` runs, ``<m>:f`` failures, ``<m>:h<k>``
                                     runs in duration bucket k (``durations``), m the minute
                                     in the span (0-9); only the non-zero ones exist
    base hist:h<hour>:<task>   hash  the same hour's totals (hour = epoch hour): ``n``, ``f``,
                                     ``h<k>``; what the tasks' 24 h summaries read
    base hist:tasks            zset  the tasks recorded; score = when last (epoch ms)
    base hist:recent:<task>    zset  the task's recent jobs: job id -> when it last started
                                     or ended a run (epoch ms); the ``RECENT`` latest only

Each bucket expires ``KEEP`` after its end (plus ``MARGIN``, for clocks that differ between
hosts); a task not seen for that long leaves ``hist:tasks`` at the next flush. A task's
recent jobs are trimmed to ``RECENT`` at each flush that adds to them, and expire
``KEEP + MARGIN`` after it.
"""

from __future__ import annotations

from ..queue.keys import QueueKeys

SPAN_MINUTES = 10
KEEP = 24 * 3600  # seconds of history shown
MARGIN = 300
RECENT = 50  # the jobs a task's index of recent jobs keeps


class HistoryKeys:
    """The history keys of the queue whose keys are ``queue_keys``."""

    def __init__(self, queue_keys: QueueKeys) -> None:
        self.base = queue_keys.base + "hist:"
        self.tasks = self.base + "tasks"

    def span(self, task: str, span: int) -> str:
        """Ten minutes of ``task``: those from epoch minute ``span * SPAN_MINUTES``."""
        return f"{self.base}m{span}:{task}"

    def hour(self, task: str, hour: int) -> str:
        """The totals of ``task`` in epoch hour ``hour``."""
        return f"{self.base}h{hour}:{task}"

    def recent(self, task: str) -> str:
        """The index of the recent jobs of ``task``."""
        return f"{self.base}recent:{task}"


def span_expiry(span: int) -> int:
    """When the bucket of ``span`` may go (epoch s): a day after its last minute."""
    return (span + 1) * SPAN_MINUTES * 60 + KEEP + MARGIN


def hour_expiry(hour: int) -> int:
    return (hour + 1) * 3600 + KEEP + MARGIN
