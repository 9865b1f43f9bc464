"""Exactly once across crashes: a write interrupted at each of its steps, then a fresh app
and sink on the same dataset replaying from the committed offsets, leave every input in the
dataset exactly once."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pytest
from sparkkit import (
    Order,
    SimulatedCrash,
    WatchedSink,
    add_orders,
    create_topic,
    make_app,
    make_order,
    order_records,
    produce,
    read_with_pyarrow,
    unique,
)

from aiostreams import AiostreamsError
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks import (
    DatasetLockedError,
    FlushStep,
    ParquetSink,
    SinkFailedError,
    SinkState,
    committed_files,
)
from aiostreams.sinks.commit_log import LOG_DIR, STAGING_DIR
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

pytestmark = pytest.mark.spark

PHASE = 1500


class CrashingSink(WatchedSink):
    """Raises at ``crash_at`` (once armed): the write stops there, as if the process died."""

    crash_at: FlushStep | None = None

    def _after(self, step: FlushStep) -> None:
        if step is self.crash_at:
            self.crash_at = None
            raise SimulatedCrash(f"crash after the {step.value} step")


def offsets_of(broker: MemoryBroker, topic: str) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, p): broker.end_offset(TopicPartition(topic, p))
            for p in range(2)}


@pytest.mark.parametrize("engine", ["pyarrow", "spark"])
@pytest.mark.parametrize("step", list(FlushStep))
async def test_crash_at_each_write_step_then_replay_holds_each_input_once(
        tmp_path: Path, step: FlushStep, engine: str, request: pytest.FixtureRequest) -> None:
    if engine == "spark":
        request.getfixturevalue("spark")
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic, group = unique("orders"), unique("eo")
    await create_topic(transport, topic, 2)
    path = tmp_path / "orders"

    await produce(transport, topic, order_records(range(PHASE)))
    first_ends = {tp: end - 1 for tp, end in offsets_of(broker, topic).items()}
    crashing = CrashingSink(path, Order, engine=engine, include=("partition", "offset"))
    app = make_app(group, transport, topic, crashing)
    await app.start()
    await crashing.durable_through(first_ends).wait()
    crashing.crash_at = step
    await produce(transport, topic, order_records(range(PHASE, 2 * PHASE)))
    with pytest.raises(AiostreamsError) as failure:
        await app.wait()
    assert "SimulatedCrash" in repr(failure.value.__cause__) or "crash after" in str(failure.value)
    assert crashing.state is SinkState.STOPPED
    end = offsets_of(broker, topic)
    committed = {tp: broker.committed(group, tp) or 0 for tp in end}
    assert committed != end  # the crashed batch's offsets were not committed

    leftovers = {
        FlushStep.STAGED: lambda: any((path / STAGING_DIR).iterdir()),
        FlushStep.MOVED: lambda: len(list(path.rglob("part-*.parquet")))
        > len(committed_files(path)),
        FlushStep.LOGGED: lambda: len(committed_files(path)) > 0,
    }
    assert leftovers[step]()

    sink = WatchedSink(path, Order, engine=engine, include=("partition", "offset"))
    async with make_app(group, transport, topic, sink):
        last = {tp: e - 1 for tp, e in end.items()}
        await sink.durable_through(last).wait()
        await sink.retired_through(last).wait()
    assert {tp: broker.committed(group, tp) for tp in end} == end
    assert sink.recovery is not None
    if step is FlushStep.STAGED:
        assert sink.recovery.removed_staging
    if step is FlushStep.MOVED:
        assert sink.recovery.removed_files
    if step is FlushStep.LOGGED:
        assert sink.metrics.rows_replayed > 0

    table = read_with_pyarrow(path, sink)
    assert sorted(table.column("id").to_pylist()) == list(range(2 * PHASE))
    pairs = set(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(),
                    strict=True))
    assert len(pairs) == table.num_rows
    # only listed files exist: a plain reader and a log reader see the same rows
    assert sorted(path.rglob("part-*.parquet")) == sorted(committed_files(path))
    assert not (path / STAGING_DIR).exists() or not any((path / STAGING_DIR).iterdir())


async def test_records_at_or_below_the_durable_offset_are_dropped_as_replays(
        tmp_path: Path) -> None:
    tp = TopicPartition("orders", 0)
    first = ParquetSink(tmp_path / "d", Order, engine="pyarrow")
    await first.start()
    add_orders(first, range(10), tp)
    await first.stop()
    assert first.durable_offset(tp) == 9

    second = ParquetSink(tmp_path / "d", Order, engine="pyarrow")
    await second.start()
    assert second.durable_offset(tp) == 9
    add_orders(second, range(5, 15), tp)
    await second.stop()
    assert second.metrics.rows_replayed == 5
    ids = read_with_pyarrow(tmp_path / "d", second).column("id")
    assert sorted(ids.to_pylist()) == list(range(15))
    assert pc.count_distinct(ids).as_py() == 15
    assert sorted(p.name for p in (tmp_path / "d" / LOG_DIR).glob("*.json")) == [
        "0.json", "1.json"]


async def test_a_replay_that_add_could_not_see_is_durable_is_dropped_by_the_write(
        tmp_path: Path) -> None:
    """The event loop's durable offsets lag the log when a flush was abandoned (cancelled)
    and its write then succeeded; the write itself checks the log, so rows an abandoned
    write made durable are not written twice."""
    tp = TopicPartition("orders", 0)
    sink = ParquetSink(tmp_path / "d", Order, engine="pyarrow")
    await sink.start()
    add_orders(sink, range(10), tp)
    await sink.flush()
    sink._batch.durable.clear()  # as if the flush that wrote 0-9 had been abandoned
    sink._batch.last_added.clear()  # and the partition then replayed from offset 5
    add_orders(sink, range(5, 15), tp)
    assert sink.pending_offset(tp) == 5
    await sink.flush()
    assert sink.metrics.rows_replayed == 5
    assert sink.pending_offset(tp) is None
    assert sink.durable_offset(tp) == 14
    await sink.stop()
    ids = read_with_pyarrow(tmp_path / "d", sink).column("id")
    assert sorted(ids.to_pylist()) == list(range(15))


async def test_a_second_writer_on_the_same_dataset_is_refused(tmp_path: Path) -> None:
    first = ParquetSink(tmp_path / "d", Order, engine="pyarrow")
    await first.start()
    second = ParquetSink(tmp_path / "d", Order, engine="pyarrow")
    with pytest.raises(DatasetLockedError, match="one writer per dataset"):
        await second.start()
    await first.stop()
    third = ParquetSink(tmp_path / "d", Order, engine="pyarrow")
    await third.start()
    await third.stop()


async def test_a_failed_write_refuses_later_flushes_until_restart(tmp_path: Path) -> None:
    sink = CrashingSink(tmp_path / "d", Order, engine="pyarrow")
    await sink.start()
    sink.add(ExternalRecord("s", TopicPartition("t", 0), 0, "0", make_order(0), 0.0))
    sink.crash_at = FlushStep.STAGED
    with pytest.raises(SinkFailedError, match="crash after the staged step"):
        await sink.flush()
    assert sink.state is SinkState.FAILED
    tp = TopicPartition("t", 0)
    assert sink.pending_offset(tp) == 0  # no commit may pass the row that failed
    sink.add(ExternalRecord("s", tp, 1, "1", make_order(1), 0.0))  # dropped: replayed later
    assert sink.pending_offset(tp) == 0
    with pytest.raises(SinkFailedError, match="restart the app"):
        await sink.flush()
    await sink.stop()
    assert sink.state.value == "stopped"
