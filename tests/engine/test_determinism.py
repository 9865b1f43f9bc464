"""The engine's central property, with the serial run as the oracle.

For processors whose results depend only on their input and per-key state, the outputs,
the final store contents and the committed offsets are identical for every window size
and every completion order; the committable offset never passes an unretired record
(checked continuously while the run goes on, not only at the end).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from taskkit import feed, str_topic

from aiostreams.engine.task import StreamTask, TaskSettings
from aiostreams.policies import OnError, Ordering, Retry
from aiostreams.runtime.clock import LoopClock
from aiostreams.state.memory import InMemoryKeyValueStore
from aiostreams.topology.processor import Processor
from aiostreams.topology.topology import StoreSpec, Topology
from aiostreams.types import OutgoingRecord, RawRecord, Record, TopicPartition

IN = TopicPartition("in", 0)


@dataclass(frozen=True)
class Plan:
    key: str
    yields: int  # how many loop turns this record's I/O takes
    fails: int  # how many attempts fail before one succeeds


plans = st.lists(
    st.builds(Plan, key=st.sampled_from("abcdefgh"), yields=st.integers(0, 25),
              fails=st.sampled_from([0, 0, 0, 0, 1, 2])),
    min_size=1, max_size=60,
)


class RunningSum(Processor[str, str]):
    """Per-key read-modify-write with awaits between the read and the write."""

    def __init__(self, plan: list[Plan]) -> None:
        self.plan = plan
        self.failed: dict[int, int] = {}

    async def process(self, record: Record[str, str]) -> None:
        p = self.plan[record.offset]
        store = self.context.store("sums")
        total = await store.get(record.key) or 0
        for _ in range(p.yields):
            await asyncio.sleep(0)
        if self.failed.get(record.offset, 0) < p.fails:
            self.failed[record.offset] = self.failed.get(record.offset, 0) + 1
            raise ConnectionError("flaky dependency")
        total += record.offset
        store.put(record.key, total)
        self.context.forward(record.with_value(f"{record.offset}:{record.key}={total}"))


async def run_once(plan: list[Plan], window: int) -> tuple[list[str], dict[Any, Any],
                                                              dict[TopicPartition, int]]:
    stores: list[InMemoryKeyValueStore] = []

    def make_store() -> InMemoryKeyValueStore:
        stores.append(InMemoryKeyValueStore("sums"))
        return stores[-1]

    topo = (Topology().add_source("src", str_topic("in"))
            .add_processor("sum", lambda: RunningSum(plan), "src")
            .add_store(StoreSpec("sums", make_store), "sum")
            .add_sink("sink", str_topic("out"), "sum"))
    outputs: list[OutgoingRecord] = []
    done = asyncio.Event()
    task: StreamTask

    def check_commit_point() -> None:
        # everything below the committable offset has released its output; nothing above
        committable = task.committable().get(IN, 0)
        released = {int(o.value.decode().split(":")[0]) for o in outputs if o.value}
        assert released == set(range(committable)), (committable, sorted(released))

    def emit(records: list[OutgoingRecord]) -> None:
        outputs.extend(records)
        check_commit_point()
        if len(outputs) == len(plan):
            done.set()

    task = StreamTask(
        "0_0", topo.build()[0], [IN],
        TaskSettings(max_in_flight=window, ordering=Ordering.KEY,
                     retry=Retry(attempts=3, backoff=0.0, jitter=0.0), on_error=OnError.FAIL),
        topics=topo.topics, clock=LoopClock(), emit=emit,
        on_failed=lambda t, e: (_ for _ in ()).throw(AssertionError(str(e))),
    )
    await task.initialize()
    records = [RawRecord("in", 0, i, float(i), p.key.encode(), b"v") for i, p in enumerate(plan)]
    for i in range(0, len(records), 7):  # arrives in fetch batches
        feed(task, IN, records[i:i + 7])
        check_commit_point()
        await asyncio.sleep(0)
    while not done.is_set():
        check_commit_point()
        await asyncio.sleep(0)
    assert task.in_flight == 0
    await task.close()
    return ([o.value.decode() for o in outputs if o.value], stores[0].snapshot(),
            task.committable())


@settings(max_examples=1000, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans, window=st.sampled_from([7, 64, 1024]))
def test_any_window_and_completion_order_matches_the_serial_run(plan: list[Plan],
                                                                window: int) -> None:
    oracle = asyncio.run(run_once(plan, 1))
    result = asyncio.run(run_once(plan, window))
    assert result == oracle
    outputs, final, committed = result
    assert committed == {IN: len(plan)}
    sums: dict[str, int] = {}
    for offset, p in enumerate(plan):
        sums[p.key] = sums.get(p.key, 0) + offset
    assert final == sums
    for key in set(p.key for p in plan):  # per-key order: offsets rise within each key
        offsets = [int(v.split(":")[0]) for v in outputs if f":{key}=" in v]
        assert offsets == sorted(offsets)


class SyncFlaky(Processor[str, str]):
    """A synchronous step (the inline fast path) that writes state, sends a side output
    for some keys, and fails transiently or for good as the plan says."""

    def __init__(self, plan: list[Plan]) -> None:
        self.plan = plan
        self.failed: dict[int, int] = {}

    def process(self, record: Record[str, str]) -> None:
        p = self.plan[record.offset]
        # buffered before the failure: a failed attempt's writes and sends must vanish
        self.context.store("last").put(record.key, record.offset)
        if record.key in "ab":
            self.context.send("side", record.key.encode(), f"{record.offset}:side".encode())
        if self.failed.get(record.offset, 0) < p.fails:
            self.failed[record.offset] = self.failed.get(record.offset, 0) + 1
            raise ConnectionError("flaky dependency")
        self.context.forward(record.with_value(f"{record.offset}:{record.key}"))


sync_plans = st.lists(
    st.builds(Plan, key=st.sampled_from("abcdefgh"), yields=st.just(0),
              fails=st.sampled_from([0, 0, 0, 0, 0, 1, 2, 5])),
    min_size=1, max_size=80,
)


async def run_sync_once(plan: list[Plan], window: int) -> tuple[list[tuple[str, bytes]],
                                                                 dict[Any, Any],
                                                                 dict[TopicPartition, int]]:
    stores: list[InMemoryKeyValueStore] = []

    def make_store() -> InMemoryKeyValueStore:
        stores.append(InMemoryKeyValueStore("last"))
        return stores[-1]

    topo = (Topology().add_source("src", str_topic("in"))
            .add_processor("flaky", lambda: SyncFlaky(plan), "src")
            .add_store(StoreSpec("last", make_store), "flaky")
            .add_sink("sink", str_topic("out"), "flaky"))
    outputs: list[OutgoingRecord] = []
    task: StreamTask

    def check_commit_point() -> None:
        # every record below the committable offset has released its main or dead-letter
        # output, and no record at or above it has
        committable = task.committable().get(IN, 0)
        released = {int(o.value.split(b":")[0]) for o in outputs
                    if o.value and o.topic in ("out", "dlq")}
        assert released == set(range(committable)), (committable, sorted(released))

    def emit(records: list[OutgoingRecord]) -> None:
        outputs.extend(records)
        check_commit_point()

    task = StreamTask(
        "0_0", topo.build()[0], [IN],
        TaskSettings(max_in_flight=window, ordering=Ordering.KEY,
                     retry=Retry(attempts=3, backoff=0.0, jitter=0.0),
                     on_error=OnError.DEAD_LETTER, dead_letter_topic="dlq"),
        topics=topo.topics, clock=LoopClock(), emit=emit,
        on_failed=lambda t, e: (_ for _ in ()).throw(AssertionError(str(e))),
    )
    await task.initialize()
    records = [RawRecord("in", 0, i, float(i), p.key.encode(), str(i).encode())
               for i, p in enumerate(plan)]
    for i in range(0, len(records), 7):  # arrives in fetch batches
        feed(task, IN, records[i:i + 7])
        check_commit_point()
        await asyncio.sleep(0)
    while task.committable().get(IN, 0) < len(plan):
        check_commit_point()
        await asyncio.sleep(0)
    assert task.in_flight == 0
    await task.close()
    return ([(o.topic, o.value or b"") for o in outputs], stores[0].snapshot(),
            task.committable())


@settings(max_examples=1000, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(plan=sync_plans, window=st.sampled_from([7, 64, 1024]))
def test_sync_steps_on_the_fast_path_match_the_serial_run(plan: list[Plan],
                                                          window: int) -> None:
    """Sync chains run inline (and in drained batches) until a record fails, then through
    the reorder buffer; outputs, side outputs, dead letters, state and offsets must be
    those of the serial run."""
    oracle = asyncio.run(run_sync_once(plan, 1))
    result = asyncio.run(run_sync_once(plan, window))
    assert result == oracle
    outputs, final, committed = result
    assert committed == {IN: len(plan)}
    # the serial semantics spelled out, independently of the engine
    expected: list[tuple[str, bytes]] = []
    last: dict[str, int] = {}
    for offset, p in enumerate(plan):
        if p.fails >= 3:  # attempts=3: set aside, with the original value
            expected.append(("dlq", str(offset).encode()))
            continue
        if p.key in "ab":
            expected.append(("side", f"{offset}:side".encode()))
        expected.append(("out", f"{offset}:{p.key}".encode()))
        last[p.key] = offset
    assert outputs == expected
    assert final == last
