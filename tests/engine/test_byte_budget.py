"""The task's byte budget: what it counts, and the back-pressure it applies (no timing)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st
from taskkit import MakeTask, TaskHarness, feed, raw, str_topic

from aiostreams.engine.byte_budget import ByteBudget, outputs_size, raw_size
from aiostreams.engine.task_state import TaskSettings
from aiostreams.services.service import Service
from aiostreams.testing import settle
from aiostreams.topology.processor import Processor
from aiostreams.topology.topology import Topology
from aiostreams.types import OutgoingRecord, RawRecord, Record, TopicPartition

IN = TopicPartition("in", 0)


@given(st.lists(st.integers(0, 500), max_size=40), st.integers(1, 2000))
def test_budget_is_exhausted_exactly_while_held_bytes_reach_the_limit(
        sizes: list[int], limit: int) -> None:
    budget = ByteBudget(limit)
    for size in sizes:
        budget.take(size)
        assert budget.exhausted == (budget.held >= limit)
    for size in reversed(sizes):
        budget.give(size)
        assert budget.exhausted == (budget.held >= limit)
    assert budget.held == 0


def test_releasing_more_than_held_is_an_error() -> None:
    budget = ByteBudget(10)
    budget.take(3)
    with pytest.raises(AssertionError, match="never held"):
        budget.give(4)


def test_sizes_count_key_value_and_headers() -> None:
    r = RawRecord("t", 0, 0, 0.0, b"ab", b"cde", (("h", b"xy"), ("n", None)))
    assert raw_size(r) == 2 + 3 + 1 + 2 + 1
    assert raw_size(RawRecord("t", 0, 0, 0.0, None, None)) == 0
    out = OutgoingRecord("t", b"k", b"vvvv", headers=(("hh", b"z"),))
    assert outputs_size([out, OutgoingRecord("t", None, b"12")]) == 1 + 4 + 2 + 1 + 2


def test_defaults_keep_execution_well_below_the_reorder_window() -> None:
    s = TaskSettings()
    assert s.max_concurrency is not None
    assert s.max_in_flight >= 10 * s.max_concurrency
    assert s.max_task_buffer_bytes >= 1024 * 1024


class StuckOnFirst(Processor[str, str]):
    """Record "stuck" waits for ``release``; every other record is forwarded at once."""

    def __init__(self, release: asyncio.Event) -> None:
        self.release = release

    async def process(self, record: Record[str, str]) -> None:
        if record.value == "stuck":
            await self.release.wait()
        self.context.forward(record)


def stuck_topology(release: asyncio.Event) -> Topology:
    return (Topology().add_source("src", str_topic("in"))
            .add_processor("p", lambda: StuckOnFirst(release), "src")
            .add_sink("sink", str_topic("out"), "p"))


async def feed_until_paused(h: TaskHarness, batch: int) -> tuple[int, int]:
    """Feed "stuck" at offset 0, then batches of ``batch`` records, as the worker's loop
    does: while the partition is not paused. Returns the next offset and one batch's raw
    bytes; fails if fetching never pauses."""
    feed(h.task, IN, [raw("in", 0, 0, "k", "stuck")])
    offset, batch_bytes = 1, 0
    while not h.task.intake.is_paused(IN):
        assert offset < 1_000, "fetching never paused"
        records = [raw("in", 0, offset + i, f"k{offset + i:04}", "v" * 40)
                   for i in range(batch)]
        batch_bytes = sum(map(raw_size, records))
        feed(h.task, IN, records)
        offset += batch
        await settle(5)
    return offset, batch_bytes


async def test_a_stuck_record_pauses_fetching_once_the_budget_is_held_and_resumes_after(
        make_task: MakeTask) -> None:
    release = asyncio.Event()
    limit, batch = 2_000, 5
    h = make_task(stuck_topology(release), max_in_flight=10_000, max_concurrency=100,
                  max_task_buffer_bytes=limit, ordering="unordered")
    await h.task.initialize()
    offset, batch_bytes = await feed_until_paused(h, batch)
    assert h.task.in_flight == offset  # nothing retired: all wait behind the stuck one
    assert h.task.intake.buffered_bytes >= limit
    # at most the budget, plus one fetch and its outputs
    assert h.task.intake.buffered_bytes <= limit + 2 * batch_bytes
    assert h.outputs == []
    release.set()
    await settle(10)
    assert h.task.in_flight == 0
    assert h.task.intake.buffered_bytes == 0
    assert len(h.outputs) == offset
    assert h.pauses[-1] == (IN, False)
    assert h.task.committable() == {IN: offset}


class CallsOneAtATime(Processor[str, str]):
    """Each record calls ``service`` (one place); the call of "stuck" waits for ``release``,
    so every later record waits for the service's permit."""

    def __init__(self, service: Service, release: asyncio.Event) -> None:
        self.service = service
        self.release = release

    async def process(self, record: Record[str, str]) -> None:
        async def answer() -> str:
            if record.value == "stuck":
                await self.release.wait()
            return record.value.upper()

        self.context.forward(record.with_value(await self.service.call(answer)))


async def test_records_held_by_a_service_pause_fetching_at_the_byte_budget(
        make_task: MakeTask) -> None:
    """What a service holds is bounded by the task's budget (docs/guides/services.md,
    Bounds): records waiting for its permit keep their bytes, fetching pauses at the
    budget, and every held record is answered once the service has room."""
    release = asyncio.Event()
    service = Service("lookups", concurrency=1)
    topo = (Topology().add_source("src", str_topic("in"))
            .add_processor("p", lambda: CallsOneAtATime(service, release), "src")
            .add_sink("sink", str_topic("out"), "p"))
    limit, batch = 2_000, 5
    h = make_task(topo, max_in_flight=10_000, max_concurrency=100,
                  max_task_buffer_bytes=limit, ordering="unordered")
    await h.task.initialize()
    offset, batch_bytes = await feed_until_paused(h, batch)
    assert service.in_flight == 1 and service.waiting == offset - 1
    assert h.task.intake.buffered_bytes <= limit + 2 * batch_bytes
    assert h.outputs == []
    release.set()
    for _ in range(50):  # the service lets its waiters out one call at a time
        if h.task.in_flight == 0:
            break
        await settle(10)
    assert h.task.in_flight == 0 and len(h.outputs) == offset
    assert service.stats.calls == offset
    assert h.pauses[-1] == (IN, False)


async def test_records_the_inline_path_retires_at_once_hold_no_bytes(
        make_task: MakeTask) -> None:
    topo = (Topology().add_source("src", str_topic("in"))
            .add_sink("sink", str_topic("out"), "src"))
    h = make_task(topo, max_task_buffer_bytes=100)
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, i, "k", "x" * 30) for i in range(50)])
    assert h.task.intake.buffered_bytes == 0
    assert not h.task.intake.is_paused(IN)
    assert len(h.outputs) == 50
