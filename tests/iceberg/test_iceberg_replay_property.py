"""A property of the Iceberg sink: however a source's records are cut into batches, wherever a
write is interrupted (before it wrote, after its files, after its commit), and however far
back a restarted sink replays (an offset commit that did not happen), the table holds every
offset once."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from icebergkit import TABLE, Order, SimulatedCrash, read_arrow, records

from aiostreams.sinks import SinkFailedError
from aiostreams.sinks.iceberg_sink import IcebergSink, IcebergStep
from aiostreams.types import TopicPartition

SOURCES = (TopicPartition("orders", 0), TopicPartition("orders", 1))
STEPS = (None, *IcebergStep)


class InterruptedSink(IcebergSink):
    """Crashes after ``crash_at`` of its ``nth`` write (None: never)."""

    def __init__(self, *args: object, crash_at: IcebergStep | None, nth: int,
                 **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.crash_at, self.nth, self.steps = crash_at, nth, 0

    def _after(self, step: IcebergStep) -> None:
        if step is IcebergStep.CHECKED:
            self.steps += 1
        if step is self.crash_at and self.steps >= self.nth:
            raise SimulatedCrash(step.value)


# per run: for each source, how far back it starts and how many new records it adds; how
# many flushes; where (and at which write) it crashes
runs = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8), st.integers(0, 8),
                          st.integers(0, 8), st.integers(1, 3), st.sampled_from(STEPS),
                          st.integers(1, 3)), min_size=1, max_size=3)


async def play(warehouse: Path,
               plan: list[tuple[int, int, int, int, int, IcebergStep | None, int]]
               ) -> dict[int, int]:
    resume = {tp: 0 for tp in SOURCES}  # per source, the offset after the durable ones
    high = {tp: 0 for tp in SOURCES}  # per source, one past the highest offset ever added
    for back0, new0, back1, new1, flushes, crash_at, nth in plan:
        sink = InterruptedSink(TABLE, Order, warehouse=warehouse, crash_at=crash_at, nth=nth)
        await sink.start()
        try:
            for tp, back, new in ((SOURCES[0], back0, new0), (SOURCES[1], back1, new1)):
                # the input replays from a committed offset at or below the durable ones
                offsets = range(max(0, resume[tp] - back), resume[tp] + new)
                high[tp] = max(high[tp], offsets.stop)
                step = max(1, len(offsets) // flushes)
                for start in range(offsets.start, offsets.stop, step):
                    for r in records(tp, range(start, min(start + step, offsets.stop)),
                                     id_base=1000 * tp.partition):
                        sink.add(r)
                    await sink.flush()
            await sink.stop()
        except SinkFailedError as e:  # the run "died" (the sink wraps the crash)
            assert isinstance(e.__cause__, SimulatedCrash), e
        resume = {tp: (sink.durable_offset(tp) if sink.durable_offset(tp) is not None
                       else -1) + 1 for tp in SOURCES}
    final = IcebergSink(TABLE, Order, warehouse=warehouse)  # the run that finishes the input
    await final.start()
    for tp in SOURCES:
        for r in records(tp, range(resume[tp], high[tp]), id_base=1000 * tp.partition):
            final.add(r)
    await final.stop()
    return {tp.partition: high[tp] for tp in SOURCES}


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=runs)
async def test_interrupted_and_replayed_batches_leave_every_offset_in_the_table_once(
        plan: list[tuple[int, int, int, int, int, IcebergStep | None, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ends = await play(Path(tmp), plan)
        expected = [p * 1000 + o for p, end in ends.items() for o in range(end)]
        sink = IcebergSink(TABLE, Order, warehouse=tmp)
        if sink.load() is None:
            assert not expected
            return
        ids = Counter(read_arrow(sink).column("id").to_pylist())
        assert sorted(ids) == sorted(expected)
        assert set(ids.values()) == {1}
