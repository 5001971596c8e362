"""``RedisTask``: ``RedisTaskBackend``'s ``task_class``, the framework's task with the
per-task options (DESIGN, "Per-task options and retry policy") as fields, checked when the
task is made (``@task(...)``, ``using(...)``), and finding its backend faster."""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime
from typing import Any

from ..queue.job_keys import check_template
from ..queue.options import TASK_OPTIONS, checked_option
from ..ratelimit.rate import parse_rate
from .results import Task, framework

_known = threading.local()  # (the framework's backends of this thread, {alias: backend})
_OPTIONS = frozenset(TASK_OPTIONS)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RedisTask(Task):  # type: ignore[misc]
    """The framework's task, with this backend's options; None (``unique_by_args``: False)
    leaves an option to the job, else to the queue's setting. ``retry_on`` is kept as a
    tuple of exception classes (a single class, or a list, is made one).

    It finds its backend faster: the framework's own look-up (``task_backends[alias]``, a
    context-local) costs about as much as the rest of an enqueue's Python; the backend found
    is kept per thread until ``TASKS`` changes (the framework then makes its backends anew).
    """

    max_attempts: int | None = None
    retry_backoff: float | None = None
    retry_backoff_max: float | None = None
    retry_on: tuple[type[BaseException], ...] | None = None
    time_limit: float | None = None
    expires: float | None = None
    unique_for: float | None = None
    unique_by_args: bool = False
    debounce: float | None = None
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    rate_key: str | None = None
    rate: Any = None

    def __post_init__(self) -> None:
        for name in TASK_OPTIONS:
            checked = checked_option(name, getattr(self, name))
            if name == "retry_on" and checked is not None:
                object.__setattr__(self, name, checked)
        if self.concurrency_key is not None:  # (a limit alone limits nothing)
            check_template(self.concurrency_key, self.func)
        if self.rate_key is not None:  # (a rate alone limits nothing)
            if self.rate is None:
                raise ValueError("rate_key needs a rate.")
            check_template(self.rate_key, self.func, "rate_key")
            if parse_rate(self.rate).count < 1:
                raise ValueError(f"rate {self.rate!r}: a job's rate lets at least one start.")
        Task.__post_init__(self)  # (zero-argument super() fails in a slots dataclass)

    def using(
        self,
        *,
        priority: int | None = None,
        queue_name: str | None = None,
        run_after: datetime | None = None,
        backend: str | None = None,
        **options: Any,
    ) -> RedisTask:
        """A copy with other defaults, as the framework's ``using``, and other options (an
        option given as None is unset); every option not given is kept."""
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise TypeError(
                f"Unknown task option(s) {', '.join(map(repr, unknown))} "
                f"(options: {', '.join(TASK_OPTIONS)})."
            )
        changes = dict(options)
        for name, value in (
            ("priority", priority),
            ("queue_name", queue_name),
            ("run_after", run_after),
            ("backend", backend),
        ):
            if value is not None:
                changes[name] = value
        return dataclasses.replace(self, **changes)

    def options(self) -> dict[str, Any]:
        """Each option's value (None: unset)."""
        return {name: getattr(self, name) for name in TASK_OPTIONS}

    def get_backend(self) -> Any:
        backends = framework.task_backends._connections  # replaced when TASKS changes
        known = getattr(_known, "backends", None)
        if known is None or known[0] is not backends:
            known = _known.backends = (backends, {})
        found = known[1].get(self.backend)
        if found is None:
            found = known[1][self.backend] = Task.get_backend(self)
        return found
