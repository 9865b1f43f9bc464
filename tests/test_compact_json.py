"""JSON values cost their length in memory (aiostreams.compact_json): orjson's own output
keeps an allocation of 4 KiB or more per value, which the engine would hold per output
waiting to retire, per in-memory store entry and per suppressed record."""

from __future__ import annotations

import tracemalloc
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from aiostreams import compact_json
from aiostreams.processors.suppress import BufferEntry, BufferEntrySerde
from aiostreams.serde import JsonSerde

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=50)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=5),
    max_leaves=20)


def traced_bytes_per_value(make: Any, n: int = 2_000) -> float:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        held = [make(i) for i in range(n)]
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(held) == n
    return (after - before) / n


ORDER = {"id": 1, "customer": "c17", "amount": 12.5, "note": "x" * 60}  # 90-odd bytes


def test_a_held_json_value_costs_about_its_length_not_orjsons_allocation() -> None:
    length = len(orjson.dumps(ORDER))
    serde = JsonSerde()
    per_value = traced_bytes_per_value(lambda i: serde.serialize("t", {**ORDER, "id": i}))
    assert per_value < length + 120, (per_value, length)
    fast = JsonSerde.fast_serialize
    assert traced_bytes_per_value(lambda i: fast({**ORDER, "id": i})) < length + 120


def test_a_suppressed_record_in_the_buffer_costs_about_its_length() -> None:
    serde = BufferEntrySerde(JsonSerde())
    entry = BufferEntry(time_ms=5, new=ORDER, old=None, ts_ms=5, headers=(), topic="t",
                        partition=0, offset=1)
    length = len(serde.serialize("t", entry) or b"")
    assert traced_bytes_per_value(lambda i: serde.serialize("t", entry)) < length + 120


@given(json_values)
def test_compact_dumps_writes_exactly_what_orjson_writes(value: Any) -> None:
    assert compact_json.dumps(value) == orjson.dumps(value)
    assert JsonSerde().serialize("t", value) == (None if value is None
                                                  else orjson.dumps(value))
