"""OpenTelemetry: an enqueue is a PRODUCER span, a job run a CONSUMER span, child of the
enqueue span through the trace context the job carries in its metadata, so a job's run sits
in the trace of the request that enqueued it. Jobs run by a real worker (in this process,
``burst``) on a real redis-server; spans collected by the SDK's in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util._once import Once

from django_redislock import get_queue
from django_redislock.metrics import tracing
from django_redislock.queue.worker.loop import Worker
from tests.support.fixtures import Backend

from ..tasks import boom, record

pytestmark = pytest.mark.django_db


def _reset_global_provider() -> None:
    # OpenTelemetry sets its provider once per process; its own test utilities reset it so,
    # and so must these tests, for the rest of the suite to run untraced.
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _reset_global_provider()
    trace.set_tracer_provider(provider)
    yield exporter
    provider.shutdown()
    _reset_global_provider()


def by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {span.name: span for span in exporter.get_finished_spans()}


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def run_all() -> None:
    Worker(["default"], burst=True).run()


def test_a_job_runs_in_the_trace_of_the_request_that_enqueued_it(
    redis_backend: Backend, spans: InMemorySpanExporter
) -> None:
    queue = get_queue()
    with trace.get_tracer("tests").start_as_current_span("POST /checkout") as request:
        job = queue.enqueue("tests.tasks.record", args=[1], meta={"order": 7})
    assert job.meta["order"] == 7
    assert "traceparent" in job.meta
    assert queue.get(job.id).meta["traceparent"] == job.meta["traceparent"]  # kept in Redis
    run_all()
    found = by_name(spans)
    enqueue, run = found["enqueue tests.tasks.record"], found["run tests.tasks.record"]
    request_id = request.get_span_context().span_id
    assert (enqueue.kind, run.kind) == (SpanKind.PRODUCER, SpanKind.CONSUMER)
    assert parent_of(enqueue) == request_id
    assert parent_of(run) == enqueue.context.span_id
    trace_ids = {
        request.get_span_context().trace_id,
        enqueue.context.trace_id,
        run.context.trace_id,
    }
    assert len(trace_ids) == 1
    assert run.attributes is not None
    assert enqueue.attributes is not None
    assert run.attributes["messaging.message.id"] == enqueue.attributes["messaging.message.id"]
    assert run.attributes["messaging.destination.name"] == "default"
    assert run.status.status_code == StatusCode.UNSET


def test_tasks_and_batches_carry_the_context_too(
    redis_backend: Backend, spans: InMemorySpanExporter
) -> None:
    with trace.get_tracer("tests").start_as_current_span("request") as request:
        result = record.enqueue(2)
        get_queue().enqueue_many(
            [
                {"task": "tests.tasks.record", "args": [3]},
                {"task": "tests.tasks.record", "args": [4]},
            ]
        )
    run_all()
    finished = spans.get_finished_spans()
    producers = {s.context.span_id: s for s in finished if s.kind == SpanKind.PRODUCER}
    runs = [s for s in finished if s.kind == SpanKind.CONSUMER]
    assert len(producers) == 2
    assert len(runs) == 3
    assert {parent_of(s) for s in producers.values()} == {request.get_span_context().span_id}
    assert all(parent_of(run) in producers for run in runs)
    task_span = next(s for s in producers.values() if s.name == "enqueue tests.tasks.record")
    assert task_span.attributes["messaging.message.id"] == result.id  # type: ignore[index]


def test_a_failed_run_is_an_error_span(redis_backend: Backend, spans: InMemorySpanExporter) -> None:
    boom.enqueue()
    run_all()
    run = by_name(spans)["run tests.tasks.boom"]
    assert run.status.status_code == StatusCode.ERROR
    assert [e.name for e in run.events] == ["exception"]
    assert run.events[0].attributes["exception.type"] == "ValueError"  # type: ignore[index]
    assert run.parent is not None  # enqueued outside any request: the enqueue span's child


def test_without_a_tracer_provider_nothing_is_carried(redis_backend: Backend) -> None:
    assert tracing.tracer() is None
    job = get_queue().enqueue("tests.tasks.record", args=[5])
    result = record.enqueue(6)
    assert job.meta == {}
    assert get_queue().get(result.id).meta == {}


def test_without_opentelemetry_the_functions_are_left_alone(monkeypatch: Any) -> None:
    monkeypatch.setattr(tracing, "ON", False)

    def function() -> None:
        pass

    for decorator in (
        tracing.traced_enqueue,
        tracing.traced_enqueue_many,
        tracing.traced_task_enqueue,
        tracing.traced_run,
    ):
        assert decorator(function) is function
