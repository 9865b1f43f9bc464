"""A processor whose one child is a sink runs the sink's common case in place
(sync_chain._processor_to_sink_runner): outputs and errors must be exactly those of the
processor runner calling the sink's own runner."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from aiostreams.engine.context import NodeContext
from aiostreams.engine.graph import NodeExec
from aiostreams.engine.sync_chain import _processor_runner, compile_node
from aiostreams.runtime.slot import Slot, SlotKind
from aiostreams.serde import StrSerde
from aiostreams.topology.processor import Processor
from aiostreams.topology.topology import SinkNode
from aiostreams.types import RawRecord, Record

MAX_BYTES = 8
# None, short and too-long strings, and a non-str the shortcut (str.encode) refuses
values = st.none() | st.text(max_size=6) | st.integers()


class Fan(Processor[Any, Any]):
    def __init__(self, out: list[tuple[Any, Any]], to_sink_by_name: bool) -> None:
        self.out = out
        self.by_name = to_sink_by_name

    def process(self, record: Record[Any, Any]) -> None:
        for key, value in self.out:
            self.context.forward(record.with_key_value(key, value),
                                 "sink" if self.by_name else None)


def outcome(out: list[tuple[Any, Any]], by_name: bool, fused: bool) -> object:
    sink = NodeExec("sink")
    sink.sink = SinkNode("sink", "out", StrSerde(), StrSerde(), ("p",))
    node = NodeExec("p")
    node.processor = Fan(out, by_name)
    node.children = [sink]
    node.children_by_name = {"sink": sink}
    node.context = NodeContext(cast(Any, None), node)
    node.processor.context = node.context
    sink_run = compile_node(sink, lambda c: c, max_record_bytes=MAX_BYTES, tp_of={})
    if fused:
        run = compile_node(node, lambda c: sink_run, max_record_bytes=MAX_BYTES, tp_of={})
    else:
        run = _processor_runner("p", node.processor, node.context, {"sink": sink_run})
    raw = RawRecord("in", 0, 7, 1.5, b"k", b"v", (("h", b"1"),))
    slot = Slot(SlotKind.RECORD, raw, None, None)
    try:
        run(Record("k", "v", "in", 0, 7, 1.5, (("h", b"1"),)), slot)
    except Exception as e:  # the error, where it was raised (slot.node) and what was out
        return type(e), str(e), slot.node, list(slot.outputs)
    return slot.node, slot.outputs


@given(out=st.lists(st.tuples(values, values), max_size=4), by_name=st.booleans())
def test_fused_sink_outputs_and_errors_equal_the_sink_runners(
        out: list[tuple[Any, Any]], by_name: bool) -> None:
    assert outcome(out, by_name, fused=True) == outcome(out, by_name, fused=False)


def test_a_processor_with_one_sink_child_compiles_to_the_fused_runner() -> None:
    sink = NodeExec("sink")
    sink.sink = SinkNode("sink", "out", StrSerde(), StrSerde(), ("p",))
    node = NodeExec("p")
    node.processor = Fan([], False)
    node.children = [sink]
    node.context = NodeContext(cast(Any, None), node)
    run = compile_node(node, lambda c: c, max_record_bytes=MAX_BYTES, tp_of={})
    assert run.__qualname__.startswith("_processor_to_sink_runner.")
