"""A record that fails in a drained batch of the inline path (after others ran on the same
reused slot) is dead-lettered naming the node that raised, not the node that ran last."""

from __future__ import annotations

from taskkit import MakeTask, feed, raw, str_topic

from aiostreams.engine.failure import DLQ_HEADER_PREFIX
from aiostreams.policies import OnError, Retry
from aiostreams.testing import settle
from aiostreams.topology.processor import Processor
from aiostreams.topology.topology import Topology
from aiostreams.types import Record, TopicPartition

IN = TopicPartition("in", 0)


class RejectBad(Processor[str, str]):
    def process(self, record: Record[str, str]) -> None:
        if record.value == "bad":
            raise ValueError("bad value")
        self.context.forward(record.with_value(record.value.upper()))


async def test_failure_in_a_drained_batch_names_the_processor_that_raised(
        make_task: MakeTask) -> None:
    topo = (Topology().add_source("src", str_topic("in"))
            .add_processor("reject", RejectBad, "src")
            .add_sink("sink", str_topic("out"), "reject"))
    h = make_task(topo, retry=Retry(attempts=1), on_error=OnError.DEAD_LETTER,
                  dead_letter_topic="dlq")
    await h.task.initialize()
    feed(h.task, IN, [raw("in", 0, i, "k", v) for i, v in enumerate(["a", "b", "bad", "c"])])
    await settle()
    assert h.task.committable() == {IN: 4}
    assert [(o.topic, o.value) for o in h.outputs] == [
        ("out", b"A"), ("out", b"B"), ("dlq", b"bad"), ("out", b"C")]
    headers = dict(h.outputs[2].headers)
    assert headers[DLQ_HEADER_PREFIX + "processor"] == b"reject"


class Describe(Processor[str, str]):
    """Forwards what the context says of the current record; sends a side output."""

    def process(self, record: Record[str, str]) -> None:
        ctx = self.context
        ctx.send("side", record.key, record.value)  # takes the current record's timestamp
        ctx.forward(record.with_value(
            f"{record.key}:{ctx.topic}:{ctx.partition}:{ctx.offset}:{ctx.timestamp}:"
            f"{ctx.headers}"))


async def test_context_in_a_drained_batch_describes_each_current_record(
        make_task: MakeTask) -> None:
    topo = (Topology().add_source("src", str_topic("in"))
            .add_processor("describe", Describe, "src")
            .add_sink("sink", str_topic("out"), "describe"))
    topo.add_topic(str_topic("side"))
    tp = TopicPartition("in", 3)
    h = make_task(topo, [tp])
    await h.task.initialize()
    records = [raw("in", 3, i, None if i == 1 else "k", f"v{i}", timestamp=100.0 + i)
               for i in range(3)]
    records[2].headers = (("h", b"x"),)
    feed(h.task, tp, records)
    assert [o.value for o in h.outputs if o.topic == "out"] == [
        b"k:in:3:0:100.0:()", b"None:in:3:1:101.0:()", b"k:in:3:2:102.0:(('h', b'x'),)"]
    assert [o.timestamp for o in h.outputs if o.topic == "side"] == [100.0, 101.0, 102.0]
