"""A property of the Delta sink: however a source's records are cut into batches, and however
often a restarted sink replays from an earlier offset (an offset commit that did not happen),
the table holds every offset once."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

from deltakit import read_with_deltars
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sparkkit import Order, add_orders

from aiostreams.sinks import DeltaSink
from aiostreams.types import TopicPartition

SOURCES = (TopicPartition("orders", 0), TopicPartition("orders", 1))

# per run: for each source, how far back the run starts (records it replays) and how many
# new ones it adds, and how many flushes it makes
runs = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8), st.integers(0, 8),
                          st.integers(0, 8), st.integers(1, 3)), min_size=1, max_size=5)


async def play(path: Path, plan: list[tuple[int, int, int, int, int]]) -> dict[int, int]:
    ends = {tp: 0 for tp in SOURCES}  # per source, the next new offset
    for back0, new0, back1, new1, flushes in plan:
        sink = DeltaSink(path, Order)
        await sink.start()
        for tp, back, new in ((SOURCES[0], back0, new0), (SOURCES[1], back1, new1)):
            first = max(0, ends[tp] - back)
            offsets = range(first, ends[tp] + new)
            step = max(1, len(offsets) // flushes)
            for start in range(offsets.start, offsets.stop, step):
                # ids encode the source: partition 1's offsets are ids 1000+
                add_orders(sink, range(start + 1000 * tp.partition,  # type: ignore[arg-type]
                                       min(start + step, offsets.stop) + 1000 * tp.partition),
                           tp)
                await sink.flush()
            ends[tp] += new
        await sink.stop()
    return {tp.partition: ends[tp] for tp in SOURCES}


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=runs)
async def test_replayed_batches_leave_every_offset_in_the_table_once(
        plan: list[tuple[int, int, int, int, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t"
        ends = await play(path, plan)
        expected = [p * 1000 + o for p, end in ends.items() for o in range(end)]
        if not expected:
            return
        ids = Counter(read_with_deltars(path).column("id").to_pylist())
        assert sorted(ids) == sorted(expected)
        assert set(ids.values()) == {1}
