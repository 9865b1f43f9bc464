"""OpenTelemetry spans per record, through the real SDK (its InMemorySpanExporter): the
record span and its children (queue wait, permit wait, calls, head-of-line wait), their
times in the order the record lived them, the commit that made it durable, W3C trace
context in and out; and with tracing off, no span and no ``opentelemetry`` import."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import (
    NonRecordingSpan,
    StatusCode,
    set_span_in_context,
)
from opentelemetry.trace.propagation.tracecontext import (
    TraceContextTextMapPropagator,
)

from aiostreams import App, Retry
from aiostreams.engine.worker_config import CommitRecord
from aiostreams.testing import settle
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord

PARENT_TRACE = 0x4BF92F3577B34DA6A3CE929D0E0E4736
PARENT_SPAN = 0x00F067AA0BA902B7
TRACEPARENT = f"00-{PARENT_TRACE:032x}-{PARENT_SPAN:016x}-01".encode()


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def provider_of(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return sorted((s for s in spans if s.parent is not None
                   and s.parent.span_id == parent.context.span_id),
                  key=lambda s: (s.start_time or 0, s.end_time or 0))


def record_span(spans: list[ReadableSpan], offset: int) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == "aiostreams.record"
               and s.attributes is not None and s.attributes["messaging.kafka.offset"] == offset]
    return span


async def run_three_records(exporter: InMemorySpanExporter) -> tuple[Any, list[ReadableSpan]]:
    """Records a, x, b (offsets 0, 1, 2; distinct keys) call one service with two places.
    a holds its place until b has succeeded; x holds the other until b waits for a
    permit; b's first attempt fails, its retry succeeds - so b waited for a permit,
    retried once, and finished before a: it waits at the head of the line behind a."""
    broker = MemoryBroker()
    app = App("traced", transport=MemoryTransport(broker), commit_interval_ms=5.0,
              poll_timeout=0.01, tracer_provider=provider_of(exporter))
    src = app.topic("in", key=str, value=str, partitions=1)
    out = app.topic("out", key=str, value=str, partitions=1)
    service = app.service("lookups", concurrency=2)
    release_a, release_x, x_started = asyncio.Event(), asyncio.Event(), asyncio.Event()
    b_attempts = 0

    async def lookup(v: str) -> str:
        nonlocal b_attempts
        if v == "a":
            await release_a.wait()
        elif v == "x":
            x_started.set()
            await release_x.wait()
        else:
            b_attempts += 1
            if b_attempts == 1:
                raise ValueError("the first attempt fails")
            release_a.set()
        return v.upper()

    async def let_x_go_once_b_waits() -> None:
        await x_started.wait()
        await settle()  # b's executor ran in the same turn as x's: it waits for a permit
        assert service.current is not None and service.current.waiting == 1
        release_x.set()

    app.stream(src).map_values_async(
        lookup, service=service, retry=Retry(attempts=2, backoff=0.0, jitter=0.0)).to(out)
    broker.create_topic("in", 1)
    broker.append([(OutgoingRecord("in", k.encode(), v.encode(), 1.0, headers), 0)
                   for k, v, headers in [("ka", "a", ((b"traceparent".decode(), TRACEPARENT),)),
                                         ("kx", "x", ()), ("kb", "b", ())]])
    helper = asyncio.ensure_future(let_x_go_once_b_waits())
    await run_until_committed(app, 3)
    await helper
    return broker, list(exporter.get_finished_spans())


async def run_until_committed(app: App, offset: int) -> None:
    """Run ``app`` until it has committed ``in[0]`` at ``offset``, then stop it."""
    all_committed = asyncio.Event()

    def on_commit(commit: CommitRecord) -> None:
        if any(tp.topic == "in" and o == offset for tp, o in commit.offsets.items()):
            all_committed.set()

    app.on_commit(on_commit)
    await app.start()
    try:
        async with asyncio.timeout(20):
            await all_committed.wait()
    finally:
        await app.stop()


async def test_a_record_that_waits_retries_and_blocks_has_its_spans_in_order(
        exporter: InMemorySpanExporter) -> None:
    _, spans = await run_three_records(exporter)
    b = record_span(spans, 2)
    kids = children(spans, b)
    assert [s.name for s in kids] == [
        "aiostreams.queue_wait",
        "aiostreams.permit_wait", "aiostreams.call",   # attempt 0: waited for x's place
        "aiostreams.permit_wait", "aiostreams.call",   # attempt 1, the retry
        "aiostreams.head_of_line_wait"]
    queue, permit0, call0, permit1, call1, hol = kids
    t = [(s.start_time or 0, s.end_time or 0) for s in kids]
    assert b.start_time == queue.start_time
    for (_, end), (start, _) in itertools.pairwise(t):
        assert end <= start, "each stage starts after the one before it ended"
    assert permit0.end_time == call0.start_time and permit1.end_time == call1.start_time
    assert (permit0.end_time or 0) > (permit0.start_time or 0), "b waited for x's place"
    assert call0.attributes == {"aiostreams.service": "lookups", "aiostreams.attempt": 0,
                                "aiostreams.call.outcome": "error",
                                "error.type": "ValueError"}
    assert call1.attributes is not None and call1.attributes["aiostreams.attempt"] == 1
    assert call1.attributes["aiostreams.call.outcome"] == "success"
    assert call0.status.status_code is StatusCode.ERROR
    assert call1.status.status_code is StatusCode.UNSET
    # head of line: b finished before a; it retired when a finished
    a_call = [s for s in children(spans, record_span(spans, 0)) if s.name == "aiostreams.call"]
    assert (hol.end_time or 0) > (hol.start_time or 0)
    assert (a_call[-1].end_time or 0) <= (hol.end_time or 0)
    assert [e.name for e in b.events] == ["exception"]
    assert b.events[0].attributes is not None
    assert b.events[0].attributes["aiostreams.decision"] == "retry"
    assert b.attributes is not None and b.attributes["aiostreams.attempts"] == 2
    assert b.attributes["aiostreams.outcome"] == "processed"
    assert b.attributes["aiostreams.committed"] is True


async def test_each_record_ends_with_the_commit_that_made_it_durable_and_links_it(
        exporter: InMemorySpanExporter) -> None:
    _, spans = await run_three_records(exporter)
    commits = {s.context.span_id: s for s in spans
               if s.name == "aiostreams.commit" and s.context is not None}
    assert commits
    for offset in (0, 1, 2):
        record = record_span(spans, offset)
        (link,) = record.links
        commit = commits[link.context.span_id]
        assert commit.parent is None  # a trace of its own: it holds many records' traces
        assert record.attributes is not None
        assert record.attributes["aiostreams.commit.span_id"] == f"{link.context.span_id:016x}"
        assert record.end_time == commit.end_time
        assert commit.attributes is not None
        offsets = commit.attributes["aiostreams.offsets"]
        assert isinstance(offsets, tuple)
        committed = dict(str(o).split("=") for o in offsets)
        assert int(committed["in[0]"]) > offset
        last_child = children(spans, record)[-1]
        assert (last_child.end_time or 0) <= (commit.start_time or 0), \
            "it retired before the commit's snapshot took it"


async def test_a_traceparent_on_the_input_makes_the_record_span_its_child(
        exporter: InMemorySpanExporter) -> None:
    _, spans = await run_three_records(exporter)
    a, x = record_span(spans, 0), record_span(spans, 1)
    assert a.context is not None and a.context.trace_id == PARENT_TRACE
    assert a.parent is not None and a.parent.span_id == PARENT_SPAN and a.parent.is_remote
    assert x.parent is None and x.context is not None and x.context.trace_id != PARENT_TRACE
    assert all(s.context is not None and s.context.trace_id == PARENT_TRACE
               for s in children(spans, a))


async def test_outputs_carry_the_traceparent_of_their_record_span(
        exporter: InMemorySpanExporter) -> None:
    broker, spans = await run_three_records(exporter)
    outputs = broker.records("out", 0)
    assert [o.value for o in outputs] == [b"A", b"X", b"B"]
    for offset, out in enumerate(outputs):
        # what OpenTelemetry's own W3C propagator writes for the record span
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(
            carrier, set_span_in_context(NonRecordingSpan(record_span(spans, offset).context)))
        headers = [v for n, v in out.headers if n == "traceparent"]
        assert headers == [carrier["traceparent"].encode()]


async def test_a_dead_lettered_record_says_so_and_its_dead_letter_carries_its_trace(
        exporter: InMemorySpanExporter) -> None:
    broker = MemoryBroker()
    app = App("dead", transport=MemoryTransport(broker), commit_interval_ms=5.0,
              poll_timeout=0.01, tracer_provider=provider_of(exporter),
              on_error="dead_letter", dead_letter_topic="dlq")
    src = app.topic("in", key=str, value=str, partitions=1)

    async def broken(v: str) -> str:
        raise ValueError(f"cannot enrich {v}")

    app.stream(src).map_values_async(
        broken, retry=Retry(attempts=2, backoff=0.0, jitter=0.0)).to(
            app.topic("out", key=str, value=str, partitions=1))
    broker.create_topic("in", 1)
    broker.append([(OutgoingRecord("in", b"k", b"v", 1.0), 0)])
    await run_until_committed(app, 1)
    record = record_span(list(exporter.get_finished_spans()), 0)
    assert record.attributes is not None
    assert record.attributes["aiostreams.outcome"] == "dead_lettered"
    assert record.attributes["aiostreams.attempts"] == 2
    assert [(e.attributes or {}).get("aiostreams.decision") for e in record.events] == [
        "retry", "dead_letter"]
    (dead,) = broker.records("dlq", 0)
    assert record.context is not None
    traceparent = dict(dead.headers)["traceparent"]
    assert traceparent is not None
    assert traceparent.split(b"-")[2] == f"{record.context.span_id:016x}".encode()


async def test_each_record_of_a_batched_call_has_the_call_in_its_own_trace(
        exporter: InMemorySpanExporter) -> None:
    """Three records share one batch call: each record's trace has its permit wait (from
    joining the batch) and the call, marked with the batch's size and one call id; the
    user's span inside the batch function is the child of the first record's call span."""
    broker = MemoryBroker()
    provider = provider_of(exporter)
    app = App("batched", transport=MemoryTransport(broker), commit_interval_ms=5.0,
              poll_timeout=0.01, tracer_provider=provider)
    src = app.topic("in", key=str, value=str, partitions=1)
    service = app.service("lookups", concurrency=4)
    user_tracer = provider.get_tracer("user")

    async def lookup_many(values: list[str]) -> list[str]:
        with user_tracer.start_as_current_span("user.http_request"):
            await asyncio.sleep(0)
        return [v.upper() for v in values]

    app.stream(src).map_values_batched_async(lookup_many, service=service, max_batch=3,
                                             max_wait=5.0).to(
        app.topic("out", key=str, value=str, partitions=1))
    broker.create_topic("in", 1)
    broker.append([(OutgoingRecord("in", f"k{v}".encode(), v.encode(), 1.0), 0)
                   for v in "abc"])
    await run_until_committed(app, 3)
    assert [o.value for o in broker.records("out", 0)] == [b"A", b"B", b"C"]
    spans = list(exporter.get_finished_spans())
    calls, permits = [], []
    for offset in range(3):
        record = record_span(spans, offset)
        kids = children(spans, record)
        names = [s.name for s in kids]
        assert names == ["aiostreams.queue_wait", "aiostreams.permit_wait",
                         "aiostreams.call", "aiostreams.head_of_line_wait"], names
        permit, call = kids[1], kids[2]
        assert call.context is not None and record.context is not None
        assert call.context.trace_id == record.context.trace_id
        assert permit.end_time == call.start_time
        calls.append(call)
        permits.append(permit)
    (user_span,) = [s for s in spans if s.name == "user.http_request"]
    assert user_span.parent is not None and calls[0].context is not None
    assert user_span.parent.span_id == calls[0].context.span_id
    batch = {(c.attributes or {}).get("aiostreams.batch.call_id") for c in calls}
    assert len(batch) == 1 and None not in batch, "one call id for the three records"
    assert all((c.attributes or {}).get("aiostreams.batch.size") == 3 for c in calls)
    assert all((c.attributes or {}).get("aiostreams.call.outcome") == "success" for c in calls)
    # the first record waited for the batch to fill: its permit wait began first
    assert (permits[0].start_time or 0) <= (permits[2].start_time or 0)
    assert (permits[0].end_time or 0) > (permits[0].start_time or 0)


TRACING_OFF = textwrap.dedent("""
    import asyncio, sys
    from aiostreams import App
    from aiostreams.testing import TopologyTestDriver

    async def run(**settings):
        app = App("off", broker="memory://off-" + str(len(settings)), **settings)
        src = app.topic("in", key=str, value=str)
        async def upper(v):
            return v.upper()
        app.stream(src).map_values_async(upper).to(app.topic("out", key=str, value=str))
        async with TopologyTestDriver(app) as driver:
            driver.pipe_input("in", "k", "v")
            await driver.process_all()
            await driver.commit()
            assert [r.value for r in driver.read_output("out")] == ["V"]

    asyncio.run(run())
    loaded = sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")
    print("loaded:", loaded)
    assert not loaded, loaded

    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    asyncio.run(run())
    assert exporter.get_finished_spans() == (), "tracing is off"
    asyncio.run(run(tracing=True))  # the setting, to the global provider
    names = sorted({s.name for s in exporter.get_finished_spans()})
    print("traced:", names)
    assert names == ["aiostreams.commit", "aiostreams.head_of_line_wait",
                     "aiostreams.queue_wait", "aiostreams.record"], names
""")


def test_with_tracing_off_no_span_is_made_and_opentelemetry_is_never_imported() -> None:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", TRACING_OFF], capture_output=True,
                          text=True, env=env, cwd=root, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "loaded: []" in done.stdout
