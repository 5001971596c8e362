"""OpenTelemetry spans (``pip install "django-redislock[otel]"``): a PRODUCER span for each
enqueue (``Queue.enqueue``, ``enqueue_many``, ``Task.enqueue``) and a CONSUMER span for each
job run, child of its enqueue span: the trace context travels inside the job, in its metadata
(``traceparent``, and whatever else the configured propagator writes).

Zero cost without OpenTelemetry: the decorators here then return the function itself. With
it installed but no tracer provider set, a traced call costs one look-up of the provider.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

try:
    from opentelemetry import propagate, trace
except ImportError:  # pragma: no cover - the otel extra is not installed
    ON = False
else:
    ON = True

if TYPE_CHECKING:
    from ..queue.jobs import Job

F = TypeVar("F", bound=Callable[..., Any])

SYSTEM = "django_redislock"
_UNKNOWN, _NONE = object(), object()  # no such attribute; no provider was set
_cached: tuple[Any, Any] = (None, None)  # (provider, its tracer); (_NONE, None): none


def tracer() -> Any:
    """This app's tracer, None while no tracer provider is set (nothing to record)."""
    global _cached
    # The API's own getter reads os.environ on every call while no provider is set (a
    # microsecond, on every enqueue); its module attribute is read instead, once the getter
    # has had its chance to load a provider named in the environment.
    provider: Any = getattr(trace, "_TRACER_PROVIDER", _UNKNOWN)
    if provider is None and _cached[0] is not None:
        return None
    if provider is None or provider is _UNKNOWN:
        provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        _cached = (_NONE, None)
        return None
    if _cached[0] is not provider:
        _cached = (provider, provider.get_tracer(SYSTEM))
    return _cached[1]


def carried(meta: Any) -> Any:
    """``meta`` (a job's metadata) with the current trace context added; anything but a
    mapping is left for the queue to refuse."""
    if meta is not None and not isinstance(meta, Mapping):
        return meta
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return {**(meta or {}), **carrier} if carrier else meta


def carried_text(meta: str) -> str:
    """``carried`` for metadata already encoded as JSON text ("" for none)."""
    if tracer() is None:  # nothing is traced: no context to carry
        return meta
    added = carried(json.loads(meta) if meta else {})
    return json.dumps(added, separators=(",", ":")) if added else meta


def _attributes(queue: str, task: Any, operation: str) -> dict[str, Any]:
    return {
        "messaging.system": SYSTEM,
        "messaging.destination.name": queue,
        "messaging.operation.type": operation,
        "redislock.task": str(task),
    }


def traced_enqueue(method: F) -> F:
    """``Producing.enqueue`` in a PRODUCER span, the job's meta carrying its context."""
    if not ON:
        return method

    @functools.wraps(method)
    def enqueue(self: Any, task: Any, *args: Any, **kwargs: Any) -> Any:
        found = tracer()
        if found is None:
            return method(self, task, *args, **kwargs)
        attributes = _attributes(self.name, task, "send")
        with found.start_as_current_span(
            f"enqueue {task}", kind=trace.SpanKind.PRODUCER, attributes=attributes
        ) as span:
            kwargs["meta"] = carried(kwargs.get("meta"))
            job = method(self, task, *args, **kwargs)
            span.set_attribute("messaging.message.id", job.id)
            return job

    return enqueue  # type: ignore[return-value]


def traced_enqueue_many(method: F) -> F:
    """``Producing.enqueue_many`` in one PRODUCER span, every job's meta carrying it."""
    if not ON:
        return method

    @functools.wraps(method)
    def enqueue_many(self: Any, jobs: Iterable[Any], **kwargs: Any) -> Any:
        found = tracer()
        if found is None:
            return method(self, jobs, **kwargs)
        attributes = _attributes(self.name, "", "send")
        with found.start_as_current_span(
            f"enqueue_many {self.name}", kind=trace.SpanKind.PRODUCER, attributes=attributes
        ):
            jobs = [
                {**spec, "meta": carried(spec.get("meta"))} if isinstance(spec, Mapping) else spec
                for spec in jobs
            ]
            return method(self, jobs, **kwargs)

    return enqueue_many  # type: ignore[return-value]


def traced_task_enqueue(method: F) -> F:
    """``RedisTaskBackend.enqueue`` in a PRODUCER span; told so (its ``traced`` argument),
    the backend adds the context to the job's meta (``carried_text``)."""
    if not ON:
        return method

    @functools.wraps(method)
    def enqueue(self: Any, task: Any, args: Any, kwargs: Any) -> Any:
        found = tracer()
        if found is None:
            return method(self, task, args, kwargs)
        attributes = _attributes(task.queue_name, task.module_path, "send")
        with found.start_as_current_span(
            f"enqueue {task.module_path}", kind=trace.SpanKind.PRODUCER, attributes=attributes
        ) as span:
            result = method(self, task, args, kwargs, True)
            span.set_attribute("messaging.message.id", result.id)
            return result

    return enqueue  # type: ignore[return-value]


def traced_run(function: F) -> F:
    """``execution.run_job`` in a CONSUMER span, child of the context the job carries; what
    the task raised is recorded on it."""
    if not ON:
        return function

    @functools.wraps(function)
    def run_job(job: Job, *args: Any, **kwargs: Any) -> Any:
        found = tracer()
        if found is None:
            return function(job, *args, **kwargs)
        fields = propagate.get_global_textmap().fields
        carrier = {k: v for k in fields if isinstance(v := job.meta.get(k), str)}
        parent = propagate.extract(carrier) if carrier else None
        attributes = {
            **_attributes(job.queue, job.task, "process"),
            "messaging.message.id": job.id,
            "redislock.attempt": job.attempts,
        }
        with found.start_as_current_span(
            f"run {job.task}",
            context=parent,
            kind=trace.SpanKind.CONSUMER,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                return function(job, *args, **kwargs)
            except BaseException as exc:  # a time limit, a cancel: failed runs too
                span.record_exception(exc)
                span.set_status(trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}")
                raise

    return run_job  # type: ignore[return-value]
