"""The engine's behaviour on one task, with a manual clock and a sequencer (no sleeps)."""

from __future__ import annotations

from typing import Any

from taskkit import MakeTask, feed, gated_topology, raw, str_topic

from aiostreams.policies import OnError, Retry
from aiostreams.state.memory import InMemoryKeyValueStore
from aiostreams.testing import Sequencer, settle
from aiostreams.topology.processor import Processor, PunctuationType
from aiostreams.topology.topology import StoreSpec, Topology
from aiostreams.types import Record, TopicPartition

IN = TopicPartition("in", 0)


class Upper(Processor[str, str]):
    def process(self, record: Record[str, str]) -> None:
        self.context.forward(record.with_value(record.value.upper()))


async def test_slow_head_blocks_commit_but_not_execution_of_later_records(
        make_task: MakeTask) -> None:
    seq = Sequencer()
    h = make_task(gated_topology(seq))
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, 0, "a", "x"), raw("in", 0, 1, "b", "y"),
                            raw("in", 0, 2, "c", "z")])
    await seq.wait_started("z")
    seq.release("y", "z")
    await settle()
    assert h.outputs == []
    assert h.task.committable() == {}
    seq.release("x")
    await settle()
    assert h.values() == ["X", "Y", "Z"]
    assert h.task.committable() == {IN: 3}


async def test_different_key_record_overtakes_a_slow_one(make_task: MakeTask) -> None:
    seq = Sequencer()
    h = make_task(gated_topology(seq))
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, 0, "a", "slow"), raw("in", 0, 1, "b", "fast")])
    await seq.wait_started("fast")
    assert seq.started == ["slow", "fast"]


async def test_same_key_records_execute_in_offset_order(make_task: MakeTask) -> None:
    seq = Sequencer()
    h = make_task(gated_topology(seq))
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, 0, "a", "first"), raw("in", 0, 1, "a", "second"),
                            raw("in", 0, 2, "b", "other")])
    await seq.wait_started("other")
    assert "second" not in seq.started
    seq.release("second", "other")
    await settle()
    assert "second" not in seq.started
    seq.release("first")
    await seq.wait_started("second")
    await settle()
    assert h.values() == ["FIRST", "SECOND", "OTHER"]


async def test_partition_ordering_serialises_every_record(make_task: MakeTask) -> None:
    seq = Sequencer()
    h = make_task(gated_topology(seq), ordering="partition")
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, 0, "a", "one"), raw("in", 0, 1, "b", "two")])
    await seq.wait_started("one")
    await settle()
    assert seq.started == ["one"]
    seq.release("one", "two")
    await settle()
    assert h.values() == ["ONE", "TWO"]


async def test_unordered_mode_runs_same_key_records_at_once(make_task: MakeTask) -> None:
    seq = Sequencer()
    h = make_task(gated_topology(seq), ordering="unordered")
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, 0, "a", "one"), raw("in", 0, 1, "a", "two")])
    await seq.wait_started("two")
    seq.release("two", "one")
    await settle()
    assert h.values() == ["ONE", "TWO"]  # still released in offset order


async def test_full_window_pauses_fetching_until_a_slot_frees(make_task: MakeTask) -> None:
    seq = Sequencer()
    h = make_task(gated_topology(seq), max_in_flight=2)
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, i, f"k{i}", f"v{i}") for i in range(5)])
    await seq.wait_started("v1")
    await settle()
    assert seq.started == ["v0", "v1"]
    assert h.task.in_flight == 2
    assert h.pauses == [(IN, True)]
    assert h.task.intake.is_paused(IN)
    seq.release("v0", "v1", "v2", "v3", "v4")
    await settle(10)
    assert h.values() == ["V0", "V1", "V2", "V3", "V4"]
    assert h.pauses[-1] == (IN, False)
    assert not h.task.intake.is_paused(IN)


async def test_partition_buffer_limit_pauses_fetching(make_task: MakeTask) -> None:
    seq = Sequencer()
    h = make_task(gated_topology(seq), max_in_flight=1, max_buffered=3)
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, i, "k", f"v{i}") for i in range(4)])
    assert h.task.buffered(IN) == 3
    assert h.task.intake.is_paused(IN)


async def test_sync_chain_runs_inline_without_tasks(make_task: MakeTask) -> None:
    topo = (Topology().add_source("src", str_topic("in"))
            .add_processor("upper", Upper, "src").add_sink("sink", str_topic("out"), "upper"))
    h = make_task(topo)
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, i, "k", f"v{i}") for i in range(3)])
    # no await in between: the fast path finished and retired them during feed
    assert h.values() == ["V0", "V1", "V2"]
    assert h.task.committable() == {IN: 3}


async def test_task_idles_for_an_empty_partition_then_counts_enforced_processing(
        make_task: MakeTask) -> None:
    topo = (Topology().add_source("src", str_topic("left"), str_topic("right"))
            .add_processor("upper", Upper, "src").add_sink("sink", str_topic("out"), "upper"))
    left, right = TopicPartition("left", 0), TopicPartition("right", 0)
    h = make_task(topo, [left, right], max_task_idle=5.0)
    await h.task.initialize()
    feed(h.task, left, [raw("left", 0, 0, "k", "l0", timestamp=10.0)])
    await settle()
    assert h.outputs == []
    h.clock.advance(4.9)
    await settle()
    assert h.outputs == []
    h.clock.advance(0.1)
    await settle()
    assert h.values() == ["L0"]
    assert h.task.enforced_processing_total == 1


async def test_records_are_chosen_by_smallest_head_timestamp(make_task: MakeTask) -> None:
    topo = (Topology().add_source("src", str_topic("left"), str_topic("right"))
            .add_processor("upper", Upper, "src").add_sink("sink", str_topic("out"), "upper"))
    left, right = TopicPartition("left", 0), TopicPartition("right", 0)
    h = make_task(topo, [left, right], max_task_idle=5.0)
    await h.task.initialize()
    feed(h.task, left, [raw("left", 0, 0, "k", "l@3", 3.0),
                              raw("left", 0, 1, "k", "l@5", 5.0)])
    feed(h.task, right, [raw("right", 0, 0, "k", "r@1", 1.0),
                               raw("right", 0, 1, "k", "r@4", 4.0)])
    h.clock.advance(5.0)
    await settle()
    assert h.values() == ["R@1", "L@3", "R@4", "L@5"]
    assert h.task.enforced_processing_total == 1  # l@5 went while 'right' was empty
    assert h.task.stream_time == 5.0


class Counter(Processor[str, str]):
    """Per-key read-modify-write through a store, with an await in between."""

    def __init__(self, seq: Sequencer | None = None) -> None:
        self.seq = seq

    async def process(self, record: Record[str, str]) -> None:
        store = self.context.store("counts")
        current = await store.get(record.key) or 0
        if self.seq is not None:
            await self.seq.wait(record.value)
        store.put(record.key, current + 1)
        self.context.forward(record.with_value(f"{record.key}={current + 1}"))


def counting_topology(seq: Sequencer | None, stores: dict[str, InMemoryKeyValueStore]) -> Topology:
    def make_store() -> InMemoryKeyValueStore:
        stores["counts"] = InMemoryKeyValueStore("counts")
        return stores["counts"]
    return (Topology().add_source("src", str_topic("in"))
            .add_processor("count", lambda: Counter(seq), "src")
            .add_store(StoreSpec("counts", make_store), "count")
            .add_sink("sink", str_topic("out"), "count"))


async def test_store_reads_see_buffered_writes_of_earlier_same_key_records(
        make_task: MakeTask) -> None:
    seq = Sequencer()
    stores: dict[str, InMemoryKeyValueStore] = {}
    h = make_task(counting_topology(seq, stores))
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, 0, "a", "a1"), raw("in", 0, 1, "b", "b1"),
                            raw("in", 0, 2, "a", "a2")])
    await seq.wait_started("b1")
    seq.release("b1")
    await settle()
    assert stores["counts"].snapshot() == {}  # b1 finished but has not retired
    seq.release("a1")
    await seq.wait_started("a2")
    seq.release("a2")
    await settle()
    assert h.values() == ["a=1", "b=1", "a=2"]
    assert stores["counts"].snapshot() == {"a": 2, "b": 1}


class Ticker(Processor[str, str]):
    async def init(self, context: Any) -> None:
        await super().init(context)
        context.schedule(10.0, self.tick, on=PunctuationType.STREAM_TIME)

    def tick(self, at: float) -> None:
        self.context.forward(Record("tick", f"tick@{at:g}", timestamp=at))

    def process(self, record: Record[str, str]) -> None:
        self.context.forward(record)


async def test_stream_time_punctuation_is_ordered_among_records(make_task: MakeTask) -> None:
    topo = (Topology().add_source("src", str_topic("in"))
            .add_processor("tick", Ticker, "src").add_sink("sink", str_topic("out"), "tick"))
    h = make_task(topo)
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, 0, "k", "r0", 0.0), raw("in", 0, 1, "k", "r5", 5.0),
                            raw("in", 0, 2, "k", "r12", 12.0), raw("in", 0, 3, "k", "r13", 13.0)])
    await settle(10)
    assert h.values() == ["r0", "r5", "r12", "tick@12", "r13"]
    assert h.task.committable() == {IN: 4}


async def test_wall_clock_punctuation_fires_without_input(make_task: MakeTask) -> None:
    class WallTicker(Ticker):
        async def init(self, context: Any) -> None:
            self.context = context
            context.schedule(1.0, self.tick, on="wall_clock")

    topo = (Topology().add_source("src", str_topic("in"))
            .add_processor("tick", WallTicker, "src").add_sink("sink", str_topic("out"), "tick"))
    h = make_task(topo)
    await h.task.initialize()
    h.clock.advance(1.0)
    await settle(5)
    h.clock.advance(1.0)
    await settle(5)
    assert len(h.values()) == 2
    assert all(v.startswith("tick@") for v in h.values())


class FailsOn(Processor[str, str]):
    def __init__(self, bad: str, times: int = 10**9) -> None:
        self.bad = bad
        self.left = times

    async def process(self, record: Record[str, str]) -> None:
        if record.value == self.bad and self.left > 0:
            self.left -= 1
            raise RuntimeError(f"cannot handle {record.value}")
        self.context.forward(record)


def failing_topology(bad: str, times: int = 10**9) -> Topology:
    return (Topology().add_source("src", str_topic("in"))
            .add_processor("fragile", lambda: FailsOn(bad, times), "src")
            .add_sink("sink", str_topic("out"), "fragile"))


async def test_fail_handler_stops_the_task_and_commits_nothing_past_the_record(
        make_task: MakeTask) -> None:
    h = make_task(failing_topology("bad"))
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, 0, "a", "ok"), raw("in", 0, 1, "b", "bad"),
                            raw("in", 0, 2, "c", "later")])
    await settle(10)
    assert len(h.failures) == 1
    message = str(h.failures[0])
    assert "processor 'fragile' failed on in[0]@1" in message
    assert "RuntimeError: cannot handle bad" in message
    assert h.task.committable() == {IN: 1}
    assert h.values() == ["ok"]


async def test_retry_reexecutes_after_backoff_while_later_records_run(
        make_task: MakeTask) -> None:
    h = make_task(failing_topology("flaky", times=2),
                  retry=Retry(attempts=3, backoff=1.0, jitter=0.0))
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, 0, "a", "flaky"), raw("in", 0, 1, "b", "fine"),
                            raw("in", 0, 2, "a", "same-key")])
    await settle(10)
    assert h.outputs == []  # 'fine' finished but waits behind the failed head
    assert h.task.metrics.retries == 1
    h.clock.advance(1.0)
    await settle(10)
    assert h.task.metrics.retries == 2
    h.clock.advance(2.0)
    await settle(10)
    assert h.values() == ["flaky", "fine", "same-key"]
    assert h.failures == []


class GatedOnceFlaky(Processor[str, str]):
    """Logs each attempt's start; fails 'flaky' once; waits for the gate of 'b'."""

    def __init__(self, seq: Sequencer, started: list[str]) -> None:
        self.seq = seq
        self.started = started
        self.failed = False

    async def process(self, record: Record[str, str]) -> None:
        self.started.append(record.value)
        if record.value == "flaky" and not self.failed:
            self.failed = True
            raise RuntimeError("flaky once")
        if record.value == "b":
            await self.seq.wait("b")
        self.context.forward(record)


async def test_a_retried_record_runs_before_newer_records_waiting_for_an_executor(
        make_task: MakeTask) -> None:
    seq = Sequencer()
    started: list[str] = []
    topo = (Topology().add_source("src", str_topic("in"))
            .add_processor("p", lambda: GatedOnceFlaky(seq, started), "src")
            .add_sink("sink", str_topic("out"), "p"))
    h = make_task(topo, max_concurrency=1, ordering="unordered",
                  retry=Retry(attempts=2, backoff=1.0, jitter=0.0))
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, i, f"k{i}", v)
                            for i, v in enumerate(["flaky", "b", "c", "d"])])
    await seq.wait_started("b")  # the one executor holds 'b'; 'c' and 'd' wait
    h.clock.advance(1.0)  # the retry of 'flaky' is due and waits too
    await settle(10)
    seq.release("b")
    await settle(10)
    assert started == ["flaky", "b", "flaky", "c", "d"]
    assert h.values() == ["flaky", "b", "c", "d"]


async def test_dead_letter_keeps_original_bytes_and_says_why(make_task: MakeTask) -> None:
    h = make_task(failing_topology("poison"), on_error=OnError.DEAD_LETTER,
                  dead_letter_topic="dlq")
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, 0, "a", "poison"), raw("in", 0, 1, "b", "ok")])
    await settle(10)
    dead = [o for o in h.outputs if o.topic == "dlq"]
    assert len(dead) == 1
    assert (dead[0].key, dead[0].value) == (b"a", b"poison")
    headers = dict(dead[0].headers)
    assert headers["aiostreams.dlq.exception"] == b"RuntimeError"
    assert headers["aiostreams.dlq.offset"] == b"0"
    assert headers["aiostreams.dlq.processor"] == b"fragile"
    assert h.values() == ["ok"]
    assert h.task.committable() == {IN: 2}


async def test_undecodable_record_takes_the_error_path_not_a_crash(make_task: MakeTask) -> None:
    h = make_task(failing_topology("never"), on_error=OnError.SKIP)
    await h.task.initialize()
    bad = raw("in", 0, 0, "a", "x")
    bad = type(bad)(bad.topic, bad.partition, bad.offset, bad.timestamp, b"a", b"\xff\xfe")
    feed(h.task, IN, [bad, raw("in", 0, 1, "b", "fine")])
    await settle(10)
    assert h.values() == ["fine"]
    assert h.task.metrics.skipped == 1
    assert h.task.committable() == {IN: 2}


async def test_drain_finishes_in_flight_work_before_close(make_task: MakeTask) -> None:
    seq = Sequencer()
    h = make_task(gated_topology(seq))
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, 0, "a", "x")])
    await seq.wait_started("x")
    import asyncio
    drain = asyncio.ensure_future(h.task.drain(timeout=60))
    await settle()
    assert not drain.done()
    seq.release("x")
    assert await drain is True
    assert h.values() == ["X"]
    await h.task.close()


class DeferOnce(Processor[str, str]):
    def __init__(self) -> None:
        self.deferred: set[int] = set()

    def process(self, record: Record[str, str]) -> None:
        if record.value == "later" and record.offset not in self.deferred:
            self.deferred.add(record.offset)
            self.context.defer(2.0)
        self.context.forward(record)


async def test_deferred_record_is_reprocessed_after_its_delay_without_blocking_others(
        make_task: MakeTask) -> None:
    topo = (Topology().add_source("src", str_topic("in"))
            .add_processor("defer", DeferOnce, "src").add_sink("sink", str_topic("out"), "defer"))
    h = make_task(topo)
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, 0, "a", "later"), raw("in", 0, 1, "b", "now"),
                            raw("in", 0, 2, "a", "same-key")])
    await settle(5)
    assert h.outputs == []  # 'now' ran, but waits behind the deferred head to retire
    assert h.task.in_flight == 3
    h.clock.advance(2.0)
    await settle(5)
    assert h.values() == ["later", "now", "same-key"]
    assert h.task.metrics.deferred == 1
    assert h.task.metrics.retries == 0
    assert h.task.committable() == {IN: 3}


async def test_empty_partition_with_unfetched_records_is_waited_for_without_idling(
        make_task: MakeTask) -> None:
    topo = (Topology().add_source("src", str_topic("left"), str_topic("right"))
            .add_processor("upper", Upper, "src").add_sink("sink", str_topic("out"), "upper"))
    left, right = TopicPartition("left", 0), TopicPartition("right", 0)
    on_broker = {left: 1, right: 1}  # each partition's end offset, as the fetcher saw it
    h = make_task(topo, [left, right], max_task_idle=0.0,
                  has_unfetched=lambda tp, nxt: on_broker[tp] > nxt)
    await h.task.initialize()
    feed(h.task, left, [raw("left", 0, 0, "k", "l@2", 2.0)])
    await settle()
    assert h.outputs == []  # 'right' has a record on the broker: wait for it
    feed(h.task, right, [raw("right", 0, 0, "k", "r@1", 1.0)])
    await settle()
    assert h.values() == ["R@1", "L@2"]
    assert h.task.enforced_processing_total == 0


async def test_caught_up_empty_partition_does_not_hold_the_other_back(
        make_task: MakeTask) -> None:
    topo = (Topology().add_source("src", str_topic("left"), str_topic("right"))
            .add_processor("upper", Upper, "src").add_sink("sink", str_topic("out"), "upper"))
    left, right = TopicPartition("left", 0), TopicPartition("right", 0)
    h = make_task(topo, [left, right], max_task_idle=0.0, has_unfetched=lambda tp, nxt: False)
    await h.task.initialize()
    feed(h.task, left, [raw("left", 0, 0, "k", "l@2", 2.0)])
    assert h.values() == ["L@2"]
