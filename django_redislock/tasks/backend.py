"""``RedisTaskBackend``: Django's Tasks framework on the django-redislock queues.

The framework is ``django.tasks`` on Django 6 and the ``django-tasks`` backport on Django 5.2
(``pip install "django-redislock[tasks]"``)::

    TASKS = {"default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend",
                         "QUEUES": ["default"]}}

A task's ``queue_name`` is the name of a queue in ``REDISLOCK['QUEUES']`` (``QUEUES: []``:
any of them); ``run_queue_worker`` runs it. Results (return value, every attempt's error,
times, the worker of each attempt) are kept for the queue's ``RESULT_TTL`` after the task
finishes.

The backend only adapts: the worker runs jobs as tasks (``execution.run_job``), and ``enqueue``
refuses what it would refuse to run (``execution.resolve_task``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.core.checks import CheckMessage
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone as django_timezone

from ..conf import conf, user_settings
from ..exceptions import InvalidTask, JobNotFound
from ..metrics import tracing
from ..queue.arguments import Made, due_argument, new_id
from ..queue.eager import eager_job, run_now
from ..queue.enqueued import Enqueued
from ..queue.execution import resolve_task
from ..queue.job_codec import encoded_meta
from ..queue.job_options import with_expires
from ..queue.on_commit import commit_alias, described, push_at_commit
from ..queue.options import with_options
from ..queue.queue import Job, Queue, get_queue
from ..redis.clients import get_redis
from .backend_checks import backend_errors
from .new_results import new_result
from .receivers import announce_enqueued, enqueued_receivers
from .redis_task import RedisTask
from .results import (
    FRAMEWORK,
    NOT_A_TASK,
    FrameworkInvalidTask,
    TaskResultDoesNotExist,
    framework_backends,
    restored,
    signals,
    stand_in,
    task_result,
    when,
)
from .task_options import enqueue_decided, enqueue_options, enqueued_with_options, rebuilt_options
from .values import arguments

__all__ = ["FRAMEWORK", "RedisTaskBackend"]


class RedisTaskBackend(framework_backends.BaseTaskBackend):  # type: ignore[misc]
    """Tasks on the django-redislock queues: defer (``run_after``), priority, async task
    functions and ``get_result`` from any process. ``QUEUES: []`` takes any queue of
    ``REDISLOCK['QUEUES']``."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True
    task_class = RedisTask  # the framework's Task, finding its backend faster

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
        # id(task) -> (task, REDISLOCK, client, capabilities, path, queue, meta, due): what
        # enqueue found out about a task, kept while the setting, the client and the
        # backend's capabilities (a test may switch one off) are unchanged.
        self._prepared: dict[int, tuple[Any, Any, Any, Any, str, Queue, str, int, Any]] = {}

    def validate_task(self, task: Any) -> None:
        # The framework inspects the function's signature every time: a task that passed is
        # remembered (not with run_after, whose check reads USE_TZ), with the capabilities
        # it passed under (a test may switch one off on this instance).
        key = (task, self._capabilities())
        if key in self._validated:
            return
        super().validate_task(task)
        if task.run_after is None and len(self._validated) < 1000:
            self._validated.add(key)

    def _capabilities(self) -> tuple[bool, bool, bool]:
        return (self.supports_async_task, self.supports_priority, self.supports_defer)

    @tracing.traced_task_enqueue
    def enqueue(self, task: Any, args: Any, kwargs: Any, traced: bool = False) -> Any:
        # (``traced``: inside the enqueue span, whose context the job's meta carries)
        path, queue, meta, due, decided = self._kept(task)[4:]
        if traced:
            meta = tracing.carried_text(meta)
        args, kwargs, args_text, kwargs_text = arguments(args, kwargs)
        job_id = new_id()
        values = [job_id, path, args_text, kwargs_text, meta, task.priority, due]
        if queue.eager:  # EAGER: run here, never pushed
            made_now = Made(job_id, path, args, kwargs, task.priority, json.loads(meta or "{}"))
            return self._run_eagerly(task, queue, eager_job(queue.name, made_now))
        if decided:  # expires, uniqueness, debounce: the queue's enqueue with options
            result = enqueued_with_options(
                task, queue, path, args, kwargs, meta, decided, self.alias
            )
            signals.task_enqueued.send(type(self), task_result=result)
            return result
        if queue.on_commit and (alias := commit_alias(None)) is not None:
            # inside transaction.atomic(): pushed when it commits
            result = new_result(task, job_id, args, kwargs, self.alias)
            push_at_commit(
                alias,
                lambda: self._stamped(result, queue.add_new(values)),
                described([(job_id, path, args, kwargs)]),
            )
            return result
        made: list[Any] = []
        sender = type(self)

        def meanwhile() -> None:  # while the job is on its way to Redis
            made.append(new_result(task, job_id, args, kwargs, self.alias))
            made.append(enqueued_receivers(sender))

        reply = queue.add_new(values, meanwhile)
        return self._stamped(made[0], reply, made[1])

    def _kept(self, task: Any) -> tuple[Any, ...]:
        """What ``_prepare`` found out about ``task``, kept while nothing it depends on
        changed (else found out again)."""
        raw, client = user_settings(), get_redis()
        kept = self._prepared.get(id(task))
        if (
            kept is None
            or kept[0] is not task
            or kept[2] is not client
            or (kept[1] is not raw and kept[1] != raw)
            or kept[3] != self._capabilities()
        ):
            kept = self._prepare(task, raw, client)
        return kept

    def queue_of(self, name: str) -> Queue:
        """Queue ``name`` (what this backend's results and contexts read and write)."""
        return get_queue(name)

    def job_spec(self, task: Any, args: Any, kwargs: Any) -> tuple[Queue, dict[str, Any]]:
        """The queue ``task`` goes to, and the job it would be as ``queue.enqueue_many``
        takes one: checked as ``enqueue`` checks it (a workflow's step). A task whose
        options decide at enqueue whether a job is written at all (``unique_for``,
        ``debounce``) cannot be a step: TypeError."""
        path, queue, meta, _, decided = self._kept(task)[4:]
        for name in ("unique_for", "debounce", "unique_by_args"):
            if name in decided:
                raise TypeError(f"{path} has {name}: a workflow's step cannot.")
        args, kwargs, _, _ = arguments(args, kwargs)
        run_after = task.run_after
        if run_after is not None and django_timezone.is_naive(run_after):
            run_after = django_timezone.make_aware(run_after)
        spec = {
            "task": path,
            "args": args,
            "kwargs": kwargs,
            "priority": task.priority,
            "meta": json.loads(meta) if meta else None,
            "at": run_after,
            **decided,
        }
        return queue, spec

    def _run_eagerly(self, task: Any, queue: Queue, job: Job) -> Any:
        """An EAGER queue's task, run as that queue's own enqueue runs a job (``eager``):
        announced and run at once, or when the transaction commits inside
        ``transaction.atomic()``. Its result as it ended; READY until that commit."""
        ready = task_result(job, task, self.alias)

        def run() -> Any:
            signals.task_enqueued.send(type(self), task_result=ready)
            return task_result(run_now(job), task, self.alias)

        alias = commit_alias(None) if queue.on_commit else None
        if alias is None:
            return run()
        transaction.on_commit(run, using=alias)
        return ready

    def _stamped(self, result: Any, reply: Enqueued, receivers: list[Any] | None = None) -> Any:
        """``result`` of a job pushed: with Redis's enqueue time, announced (to the
        ``receivers`` looked up meanwhile, if they were)."""
        object.__setattr__(result, "enqueued_at", when(reply.enqueued))
        announce_enqueued(type(self), result, receivers)
        return result

    def _prepare(self, task: Any, raw: Any, client: Any) -> tuple[Any, ...]:
        """Check ``task`` as the worker would, before anything is written, and find out its
        path, queue, the job metadata and due argument it is enqueued with."""
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
        try:
            queue = get_queue(task.queue_name)
        except ImproperlyConfigured as exc:
            if task.queue_name in conf.QUEUES:  # a connection setting, not the queue
                raise
            raise FrameworkInvalidTask(str(exc)) from exc  # TASKS QUEUES [] takes any name
        meta: dict[str, Any] = with_expires(with_options({}, **enqueue_options(task)), task.expires)
        meta.update(rebuilt_options(task, declared, meta))
        if self.alias != declared.backend:
            meta["backend"] = self.alias
        run_after = task.run_after
        if run_after is not None:
            meta["run_after"] = run_after.isoformat()
            if django_timezone.is_naive(run_after):
                run_after = django_timezone.make_aware(run_after)
        kept = (
            task,
            raw,
            client,
            self._capabilities(),
            path,
            queue,
            encoded_meta(meta),
            due_argument(None, run_after),
            enqueue_decided(task),
        )
        if task.run_after is None:  # (run_after: validated each time, see validate_task)
            if len(self._prepared) >= 1000:
                self._prepared.clear()
            self._prepared[id(task)] = kept
        return kept

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
            task = self.task_class(
                func=stand_in(job.task, str(exc)),
                priority=job.priority,
                backend=self.alias,
                queue_name=job.queue,
            )
        return task_result(job, task, task.backend)

    def check(self, **kwargs: Any) -> Iterable[CheckMessage]:
        yield from super().check(**kwargs)
        yield from backend_errors(self.alias, self._queues_setting, self.options)
