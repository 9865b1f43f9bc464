"""The compiled decoder and sink build their records field by field (no class call): what
they build must be what the dataclasses' own constructors build."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aiostreams.engine.graph import NodeExec
from aiostreams.engine.sync_chain import compile_decoder, compile_node
from aiostreams.runtime.slot import Slot, SlotKind
from aiostreams.serde import StrSerde
from aiostreams.topology.topology import SinkNode
from aiostreams.types import OutgoingRecord, RawRecord, Record

headers = st.tuples() | st.tuples(st.tuples(st.text(max_size=3), st.binary(max_size=3)))


@given(key=st.none() | st.text(max_size=5), value=st.none() | st.text(max_size=5),
       offset=st.integers(0, 10**9), timestamp=st.floats(0, 2e9), headers=headers)
def test_decoded_and_sunk_records_equal_the_constructed_ones(
        key: str | None, value: str | None, offset: int, timestamp: float,
        headers: tuple[tuple[str, bytes], ...]) -> None:
    raw = RawRecord("in", 3, offset, timestamp, None if key is None else key.encode(),
                    None if value is None else value.encode(), headers)
    record = compile_decoder(StrSerde(), StrSerde())(raw)
    assert record == Record(key, value, "in", 3, offset, timestamp, headers)

    node = NodeExec("sink")
    node.sink = SinkNode("sink", "out", StrSerde(), StrSerde(), ("p",))
    slot = Slot(SlotKind.RECORD, raw, None, None)
    compile_node(node, lambda c: c, max_record_bytes=1 << 20, tp_of={})(record, slot)
    assert slot.outputs == [OutgoingRecord("out", raw.key, raw.value, timestamp, headers)]


@given(key=st.none() | st.text(max_size=5), value=st.none() | st.text(max_size=5),
       new_key=st.integers(), new_value=st.integers(), offset=st.integers(0, 10**9),
       timestamp=st.floats(0, 2e9), headers=headers)
def test_derived_records_equal_the_constructed_ones(
        key: str | None, value: str | None, new_key: int, new_value: int, offset: int,
        timestamp: float, headers: tuple[tuple[str, bytes], ...]) -> None:
    record = Record(key, value, "in", 3, offset, timestamp, headers)
    assert record.with_value(new_value) == Record(key, new_value, "in", 3, offset, timestamp,
                                                  headers)
    assert record.with_key_value(new_key, new_value) == Record(
        new_key, new_value, "in", 3, offset, timestamp, headers)
    assert record == Record(key, value, "in", 3, offset, timestamp, headers)  # untouched
