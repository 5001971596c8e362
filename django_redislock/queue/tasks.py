"""``RedisTaskBackend``: Django's Tasks framework on the django-redislock queues.

The framework is ``django.tasks`` on Django 6 and the ``django-tasks`` backport on Django 5.2
(``pip install "django-redislock[tasks]"``)::

    TASKS = {"default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend",
                         "QUEUES": ["default"]}}

A task's ``queue_name`` is the name of a queue in ``REDISLOCK['QUEUES']`` (``QUEUES: []``:
any of them); ``run_queue_worker`` runs it. Results (return value, every attempt's error,
times, the worker of each attempt) are kept for the queue's ``RESULT_TTL`` after the task
finishes.

The backend only adapts: the worker runs jobs as tasks (``runner.run_job``), and ``enqueue``
refuses what it would refuse to run (``runner.resolve_task``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.checks import CheckMessage, Error
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone as django_timezone

from ..conf import conf, user_settings
from ..exceptions import InvalidTask, JobNotFound
from ..redis.clients import get_redis
from .core import Job, Queue, get_queue
from .runner import resolve_task
from .task_jobs import (
    FRAMEWORK,
    NOT_A_TASK,
    FrameworkInvalidTask,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    arguments,
    framework_backends,
    restored,
    signals,
    stand_in,
    task_result,
    when,
)

__all__ = ["FRAMEWORK", "RedisTaskBackend"]


class RedisTaskBackend(framework_backends.BaseTaskBackend):  # type: ignore[misc]
    """Tasks on the django-redislock queues: defer (``run_after``), priority, async task
    functions and ``get_result`` from any process. ``QUEUES: []`` takes any queue of
    ``REDISLOCK['QUEUES']``."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        # The framework builds backends inside its own system check: a QUEUES of the wrong
        # shape must reach check() (E013), not raise a TypeError here.
        self._queues_setting = params.get("QUEUES", ["default"])
        if not isinstance(self._queues_setting, (list, tuple)) or not all(
            isinstance(name, str) for name in self._queues_setting
        ):
            params = {**params, "QUEUES": []}
        super().__init__(alias, params)
        self._validated: set[Any] = set()
        self._queues: dict[str, tuple[Any, Any, Queue]] = {}

    def validate_task(self, task: Any) -> None:
        # The framework inspects the function's signature every time: a task that passed is
        # remembered (not with run_after, whose check reads USE_TZ).
        if task in self._validated:
            return
        super().validate_task(task)
        if task.run_after is None and len(self._validated) < 1000:
            self._validated.add(task)

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        self.validate_task(task)
        path = task.module_path
        try:  # what the worker would refuse is refused here, before anything is written
            declared = resolve_task(path)
        except InvalidTask as exc:
            raise FrameworkInvalidTask(f"The worker would not run this task: {exc}") from exc
        if declared.func is not task.func:
            raise FrameworkInvalidTask(
                f"{path!r} names another task: the worker would run that one, not this one."
            )
        queue = self._queue(task.queue_name)
        args, kwargs = arguments(args, kwargs)
        meta: dict[str, Any] = {}
        if self.alias != declared.backend:
            meta["backend"] = self.alias
        run_after = task.run_after
        if run_after is not None:
            meta["run_after"] = run_after.isoformat()
            if django_timezone.is_naive(run_after):
                run_after = django_timezone.make_aware(run_after)
        job_id, reply = queue.add(path, args, kwargs, at=run_after, priority=task.priority,
                                  meta=meta or None)  # fmt: skip
        result = TaskResult(
            task=task,
            id=job_id,
            status=TaskResultStatus.READY,
            enqueued_at=when(int(reply[3])),  # Redis's clock, as get_result reads it
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        signals.task_enqueued.send(type(self), task_result=result)
        return result

    def _queue(self, name: str) -> Queue:
        # get_queue reads and copies REDISLOCK['QUEUES'] each time: the queue is kept while
        # that setting is unchanged and the client the same (a changed setting, a fork and
        # reset_connections each make a new client).
        raw, kept = user_settings(), self._queues.get(name)
        if kept is not None and kept[0] == raw and kept[1] is get_redis():
            return kept[2]
        try:
            queue = get_queue(name)
        except ImproperlyConfigured as exc:
            if name in conf.QUEUES:  # a connection setting, not the queue
                raise
            raise FrameworkInvalidTask(str(exc)) from exc  # TASKS QUEUES [] takes any name
        self._queues[name] = (raw, queue.client, queue)
        return queue

    def get_result(self, result_id: str) -> Any:
        if not isinstance(result_id, str):
            raise TypeError(f"result_id must be a str, not {type(result_id).__name__}.")
        configured = conf.QUEUES
        names = self.queues & configured.keys() if self.queues else configured
        for name in sorted(names):
            try:
                job = get_queue(name).get(result_id)
            except JobNotFound:
                continue
            return self._result(job)
        raise TaskResultDoesNotExist(result_id)

    def _result(self, job: Job) -> Any:
        try:
            if not job.task:
                raise InvalidTask(NOT_A_TASK)
            task = restored(resolve_task(job.task), job, self.alias)
        except InvalidTask as exc:  # a job the worker refuses: its result all the same
            task = self.task_class(func=stand_in(job.task, str(exc)), priority=job.priority,
                                   backend=self.alias, queue_name=job.queue)  # fmt: skip
        return task_result(job, task, task.backend)

    def check(self, **kwargs: Any) -> Iterable[CheckMessage]:
        yield from super().check(**kwargs)
        where = f"TASKS[{self.alias!r}]"
        configured = conf.QUEUE_NAMES  # never raises: REDISLOCK's own check reports its shape
        names = self._queues_setting
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
            yield Error(
                f"{where}['QUEUES'] must be a list of queue names, not {names!r:.60}.",
                hint=f"For example {configured[:3] or ['default']!r}: names of queues in "
                "REDISLOCK['QUEUES'].",
                id="django_redislock.E013",
            )
            names = []
        for name in sorted(set(names) - set(configured)):
            yield Error(
                f"{where}['QUEUES'] names {name!r}, which is not a queue in REDISLOCK['QUEUES'].",
                hint=f"Add {name!r} to REDISLOCK['QUEUES'] (configured: "
                f"{', '.join(configured) or 'none'}).",
                id="django_redislock.E013",
            )
        if not isinstance(self.options, dict):
            yield Error(
                f"{where}['OPTIONS'] must be a dict, not {self.options!r:.60}.",
                hint="RedisTaskBackend takes no options: leave OPTIONS out. Queue options "
                "(LEASE, MAX_ATTEMPTS, ...) go in REDISLOCK['QUEUES'].",
                id="django_redislock.E014",
            )
        elif self.options:
            yield Error(
                f"{where}['OPTIONS'] has {', '.join(map(repr, self.options))}; "
                "RedisTaskBackend takes no options.",
                hint="Queue options (LEASE, MAX_ATTEMPTS, ...) go in REDISLOCK['QUEUES'].",
                id="django_redislock.E014",
            )
