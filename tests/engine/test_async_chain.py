"""The fused ``source -> async processor -> sync child`` runner keeps the node graph's
semantics: every forward reaches the child, in forward order, only once ``process`` has
returned; a failure names the node that raised (the source for an undecodable record)."""

from __future__ import annotations

from taskkit import MakeTask, feed, raw, str_topic

from aiostreams.engine.async_chain import compile_fused_source
from aiostreams.testing import Sequencer, settle
from aiostreams.topology.processor import Processor
from aiostreams.topology.topology import Topology
from aiostreams.types import Record, TopicPartition

IN = TopicPartition("in", 0)


class ForwardsAroundAnAwait(Processor[str, str]):
    """Forwards before and after its gate; fails on the value "bad" after the await."""

    def __init__(self, seq: Sequencer) -> None:
        self.seq = seq

    async def process(self, record: Record[str, str]) -> None:
        self.context.forward(record.with_value(record.value + "-before"))
        await self.seq.wait(record.value)
        if record.value == "bad":
            raise RuntimeError("cannot handle bad")
        self.context.forward(record.with_value(record.value + "-after"))


def topology(seq: Sequencer) -> Topology:
    return (Topology().add_source("src", str_topic("in"))
            .add_processor("twice", lambda: ForwardsAroundAnAwait(seq), "src")
            .add_sink("sink", str_topic("out"), "twice"))


async def test_the_common_async_shape_is_fused_into_one_runner(make_task: MakeTask) -> None:
    h = make_task(topology(Sequencer()))
    graph = h.task._graph  # the compiled graph: which runner the source got
    source = graph.sources["in"]
    node = graph.nodes["twice"]
    assert compile_fused_source(source.name, source.decode, [node]) is not None
    assert source.begin_async.__qualname__.startswith("compile_fused_source")
    assert source.run_async.__qualname__.startswith("compile_fused_source")


async def test_every_forward_reaches_the_sink_in_order_once_process_returned(
        make_task: MakeTask) -> None:
    seq = Sequencer()
    h = make_task(topology(seq))
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, 0, "a", "x"), raw("in", 0, 1, "b", "y")])
    await seq.wait_started("y")
    seq.release("y")
    await settle()
    assert h.values() == []  # y waits behind x; x's first forward is still buffered
    seq.release("x")
    await settle()
    assert h.values() == ["x-before", "x-after", "y-before", "y-after"]
    assert h.task.committable() == {IN: 2}


async def test_a_failure_after_the_await_names_the_processor(make_task: MakeTask) -> None:
    seq = Sequencer()
    h = make_task(topology(seq))
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, 0, "a", "bad")])
    seq.release("bad")
    await settle(10)
    assert len(h.failures) == 1
    assert "processor 'twice' failed on in[0]@0" in str(h.failures[0])
    assert h.values() == [] and h.task.committable() == {}


async def test_an_undecodable_record_names_the_source(make_task: MakeTask) -> None:
    h = make_task(topology(Sequencer()))
    await h.task.initialize()
    bad = raw("in", 0, 0, "a", "x")
    bad = type(bad)(bad.topic, bad.partition, bad.offset, bad.timestamp, b"a", b"\xff\xfe")
    feed(h.task, IN, [bad])
    await settle(10)
    assert len(h.failures) == 1
    assert "processor 'src' failed on in[0]@0" in str(h.failures[0])
