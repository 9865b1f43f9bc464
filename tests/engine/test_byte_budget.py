"""The task's byte budget: what it counts, and the back-pressure it applies (no timing)."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st
from taskkit import MakeTask, TaskHarness, feed, raw, str_topic

from aiostreams.engine.byte_budget import (
    OUTPUT_OVERHEAD_BYTES,
    RECORD_OVERHEAD_BYTES,
    ByteBudget,
    input_cost,
    outputs_cost,
)
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


def test_costs_count_key_value_headers_and_the_overhead_of_each_record() -> None:
    r = RawRecord("t", 0, 0, 0.0, b"ab", b"cde", (("h", b"xy"), ("n", None)))
    assert input_cost(r) == RECORD_OVERHEAD_BYTES + 2 + 3 + 1 + 2 + 1
    assert input_cost(RawRecord("t", 0, 0, 0.0, None, None)) == RECORD_OVERHEAD_BYTES
    out = OutgoingRecord("t", b"k", b"vvvv", headers=(("hh", b"z"),))
    assert outputs_cost([out, OutgoingRecord("t", None, b"12")]) == \
        2 * OUTPUT_OVERHEAD_BYTES + 1 + 4 + 2 + 1 + 2
    assert outputs_cost([]) == 0


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


async def feed_until_paused(h: TaskHarness, batch: int, value_size: int = 40,
                            max_records: int = 1_000) -> int:
    """Feed "stuck" at offset 0, then batches of ``batch`` records, as the worker's loop
    does: while the partition is not paused. Returns the next offset; fails if fetching
    never pauses."""
    feed(h.task, IN, [raw("in", 0, 0, "k", "stuck")])
    offset = 1
    while not h.task.intake.is_paused(IN):
        assert offset < max_records, "fetching never paused"
        feed(h.task, IN, [raw("in", 0, offset + i, f"k{offset + i:06}", "v" * value_size)
                          for i in range(batch)])
        offset += batch
        await settle(5)
    return offset


async def stuck_task(make_task: MakeTask, release: asyncio.Event, limit: int) -> TaskHarness:
    """An initialized task of :func:`stuck_topology` whose byte budget is ``limit``, with a
    window and concurrency the budget reaches first."""
    h = make_task(stuck_topology(release), max_in_flight=10_000, max_concurrency=100,
                  max_task_buffer_bytes=limit, ordering="unordered")
    await h.task.initialize()
    return h


def one_record_cost(value_size: int) -> int:
    """What one record of :func:`feed_until_paused` holds until it retires: its input and
    the one output :class:`StuckOnFirst` forwards."""
    key, value = b"k000000", b"v" * value_size
    return (input_cost(RawRecord("in", 0, 0, 0.0, key, value))
            + outputs_cost([OutgoingRecord("out", key, value)]))


async def test_a_stuck_record_pauses_fetching_once_the_budget_is_held_and_resumes_after(
        make_task: MakeTask) -> None:
    release = asyncio.Event()
    limit, batch = 20_000, 5
    h = await stuck_task(make_task, release, limit)
    offset = await feed_until_paused(h, batch)
    # nothing retired: all wait behind the stuck one, in the buffer or (past the budget)
    # in the partition queue
    assert h.task.in_flight + h.task.intake.buffered(IN) == offset
    assert h.task.intake.buffered_bytes >= limit
    # at most the budget, plus the one record that reached it and the outputs of those
    # executing then (a batch of them at most: each batch finishes before the next)
    assert h.task.intake.buffered_bytes <= limit + batch * one_record_cost(40)
    assert h.outputs == []
    release.set()
    await settle(10)
    assert h.task.in_flight == 0
    assert h.task.intake.buffered_bytes == 0
    assert len(h.outputs) == offset
    assert h.pauses[-1] == (IN, False)
    assert h.task.committable() == {IN: offset}


async def test_issuing_stops_at_the_budget_so_a_large_fetch_waits_in_its_queue(
        make_task: MakeTask) -> None:
    release = asyncio.Event()
    limit, fetched = 20_000, 200
    h = await stuck_task(make_task, release, limit)
    feed(h.task, IN, [raw("in", 0, 0, "k", "stuck")])
    feed(h.task, IN, [raw("in", 0, 1 + i, f"k{1 + i:06}", "v" * 40) for i in range(fetched)])
    await settle(5)
    assert h.task.intake.is_paused(IN)
    # the budget, plus the one record that reached it and the outputs of those executing
    # then (all of them: they finish on later turns of the loop)
    assert limit <= h.task.intake.buffered_bytes <= limit + h.task.in_flight * one_record_cost(40)
    waiting = h.task.intake.buffered(IN)
    assert waiting > fetched // 2  # most of the fetch was never admitted
    assert h.task.in_flight + waiting == fetched + 1
    # a fetch that was under way when fetching paused lands: it waits in the queue too
    in_flight, landed = h.task.in_flight, 10
    feed(h.task, IN, [raw("in", 0, fetched + 1 + i, f"k{fetched + 1 + i:06}", "v" * 40)
                      for i in range(landed)])
    await settle(5)
    assert h.task.in_flight == in_flight
    assert h.task.intake.buffered(IN) == waiting + landed
    fetched += landed
    release.set()
    for _ in range(20):  # retirement frees the budget a pump at a time
        if len(h.outputs) == fetched + 1:
            break
        await settle(10)
    assert len(h.outputs) == fetched + 1 and h.task.intake.buffered_bytes == 0
    assert h.pauses[-1] == (IN, False)


@pytest.mark.parametrize("value_size", [100, 10_000], ids=["100B", "10KB"])
async def test_the_memory_a_stuck_record_holds_stays_within_the_budget(
        make_task: MakeTask, value_size: int) -> None:
    """What the budget counts is what the records cost: the memory the task allocates
    while a stuck record holds it (tracemalloc, from before the first record to the pause)
    is within the budget plus what the module docstring bounds on top of it (the record
    that reached it, the outputs of the batch executing then, the batch left in the
    partition queue, and the executing records' tasks: 64 KiB here), and the budget's
    held bytes are that memory within 25%."""
    release = asyncio.Event()
    limit, batch = 1_000_000, 20
    h = make_task(stuck_topology(release), max_in_flight=100_000, max_concurrency=100,
                  max_task_buffer_bytes=limit, ordering="unordered")
    await h.task.initialize()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        offset = await feed_until_paused(h, batch, value_size, max_records=100_000)
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    held = h.task.intake.buffered_bytes
    on_top = (1 + 2 * batch) * one_record_cost(value_size) + 64 * 1024
    assert traced <= limit + on_top, (traced, offset)
    assert 0.8 <= traced / held <= 1.25, (traced, held)
    release.set()
    for _ in range(50):
        if h.task.in_flight == 0:
            break
        await settle(10)
    assert len(h.outputs) == offset


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
    limit, batch = 20_000, 5
    h = make_task(topo, max_in_flight=10_000, max_concurrency=100,
                  max_task_buffer_bytes=limit, ordering="unordered")
    await h.task.initialize()
    offset = await feed_until_paused(h, batch)
    assert service.in_flight == 1
    assert service.waiting + h.task.intake.buffered(IN) == offset - 1
    assert h.task.intake.buffered_bytes <= limit + batch * one_record_cost(40)
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
