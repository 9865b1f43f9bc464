"""The sink's blocking work happens on the one Spark thread: the event loop keeps running
during a write, a cancelled flush still completes its write, and a full buffer asks the
worker for an early commit; until then commits leave its rows buffered and stop before them."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from sparkkit import (
    Order,
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

from aiostreams.errors import SerializationError
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks import FlushStep, ParquetSink, SinkState, committed_files
from aiostreams.sinks.parquet_sink import FIRST_WRITE_GUESS
from aiostreams.sinks.spark.spark_thread import THREAD_NAME_PREFIX
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

pytestmark = pytest.mark.spark

TP = TopicPartition("orders", 0)


class GatedSink(ParquetSink):
    """Holds each write after staging until the test opens the gate (from the loop)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.gate = threading.Event()
        self.waiting = threading.Event()
        self.threads: list[str] = []

    def _after(self, step: FlushStep) -> None:
        self.threads.append(threading.current_thread().name)
        if step is FlushStep.STAGED:
            self.waiting.set()
            assert self.gate.wait(30), "the test never opened the gate"


async def test_a_write_runs_on_the_spark_thread_while_the_loop_keeps_running(
        tmp_path: Path) -> None:
    sink = GatedSink(tmp_path / "d", Order, engine="pyarrow")
    await sink.start()
    add_orders(sink, range(10))
    flush = asyncio.ensure_future(sink.flush())
    # the loop is free while the write waits: this coroutine runs and opens the gate
    await asyncio.to_thread(sink.waiting.wait, 30)
    assert not flush.done()
    sink.gate.set()
    await flush
    assert set(sink.threads) == {f"{THREAD_NAME_PREFIX}_0"}
    assert sink.durable_offset(TP) == 9
    await sink.stop()


async def test_a_cancelled_flush_completes_its_write_and_the_next_flush_waits_for_it(
        tmp_path: Path) -> None:
    sink = GatedSink(tmp_path / "d", Order, engine="pyarrow")
    await sink.start()
    add_orders(sink, range(10))
    first = asyncio.ensure_future(sink.flush())
    await asyncio.to_thread(sink.waiting.wait, 30)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert committed_files(tmp_path / "d") == []  # the write is still held at the gate
    add_orders(sink, range(10, 20))
    sink.waiting.clear()
    second = asyncio.ensure_future(sink.flush())
    sink.gate.set()  # releases the first write, then the second
    await second
    assert sink.state is SinkState.RUNNING
    assert sink.durable_offset(TP) == 19
    await sink.stop()
    ids = read_with_pyarrow(tmp_path / "d", sink).column("id").to_pylist()
    assert sorted(ids) == list(range(20))
    assert len(committed_files(tmp_path / "d")) == 2


async def test_a_full_buffer_makes_the_worker_commit_before_its_interval(
        tmp_path: Path) -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic = unique("orders")
    await create_topic(transport, topic, 1)
    await produce(transport, topic, order_records(range(2000)))
    sink = WatchedSink(tmp_path / "d", Order, engine="pyarrow", batch_rows=100)
    app = make_app(unique("early"), transport, topic, sink, commit_interval_ms=600_000)
    async with app:
        await sink.durable_through({TopicPartition(topic, 0): 999}).wait()
        assert sink.metrics.batches >= 1
    assert sink.metrics.rows_written == 2000  # the rest on the stop's commit


async def test_at_least_once_files_follow_batch_rows_not_the_commit_interval(
        tmp_path: Path) -> None:
    """Ten rounds of 100 records, each followed by commits, make 2 files of 500 rows: the
    commits left the sink's partial batch buffered (and committed no further than its first
    row) instead of writing a small file each."""
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic = unique("orders")
    await create_topic(transport, topic, 1)
    tp = TopicPartition(topic, 0)
    sink = WatchedSink(tmp_path / "d", Order, engine="pyarrow", batch_rows=500,
                       batch_interval=3600.0)
    app = make_app(unique("batches"), transport, topic, sink, commit_interval_ms=20)
    async with app:
        worker = app.inspect().worker  # internal: awaits the worker's next commit
        assert worker is not None
        for n in range(10):
            await produce(transport, topic, order_records(range(100 * n, 100 * (n + 1))))
            await sink.retired_through({tp: 100 * n + 99}).wait()
            await worker.next_commit()
            await worker.next_commit()  # one began after the last record retired
            durable = sink.durable_offset(tp)
            assert (worker.committed_offset(tp) or 0) == (0 if durable is None else durable + 1)
    assert sink.metrics.batches == 2
    assert sink.metrics.rows_written == 1000
    assert len(committed_files(tmp_path / "d")) == 2


async def test_pending_offset_is_the_first_row_not_durable_even_while_it_is_written(
        tmp_path: Path) -> None:
    sink = GatedSink(tmp_path / "d", Order, engine="pyarrow")
    await sink.start()
    assert sink.pending_offset(TP) is None
    add_orders(sink, range(10))
    assert sink.pending_offset(TP) == 0
    first = asyncio.ensure_future(sink.flush())
    await asyncio.to_thread(sink.waiting.wait, 30)
    add_orders(sink, range(10, 15))
    assert sink.pending_offset(TP) == 0  # rows 0-9 are being written, not durable
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert sink.pending_offset(TP) == 0  # the abandoned write may still fail
    sink.waiting.clear()
    second = asyncio.ensure_future(sink.flush())
    sink.gate.set()
    await second  # succeeds only after the abandoned write did
    assert sink.pending_offset(TP) is None
    assert sink.durable_offset(TP) == 14
    add_orders(sink, range(15, 20))
    assert sink.pending_offset(TP) == 15
    assert sink.pending_offset(TopicPartition("orders", 1)) is None
    await sink.stop()


async def test_a_filling_batch_is_converted_in_chunks_and_written_as_one(
        tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path / "d", Order, engine="pyarrow", batch_rows=100,
                       convert_rows=30, batch_interval=3600.0)
    converted: list[int] = []
    to_table = sink.schema.to_table

    def counting(values: list[Order], metadata: dict[str, list[object]]) -> object:
        converted.append(len(values))
        return to_table(values, metadata)

    sink.schema.to_table = counting  # type: ignore[assignment,method-assign]
    await sink.start()
    add_orders(sink, range(95))
    assert not sink.backlogged
    add_orders(sink, range(95, 100))
    assert sink.backlogged
    assert sink.pending_offset(TP) == 0
    await sink.flush()
    assert converted == [30, 30, 30, 10]  # three while the batch filled, the rest at flush
    assert sink.metrics.batches == 1
    assert sink.durable_offset(TP) == 99
    assert sink.pending_offset(TP) is None
    await sink.stop()
    ids = read_with_pyarrow(tmp_path / "d", sink).column("id").to_pylist()
    assert ids == list(range(100))


async def test_an_unchecked_value_that_does_not_fit_fails_the_flush_and_writes_nothing(
        tmp_path: Path) -> None:
    """Without add_parquet_sink's check before it, a value the schema cannot hold fails its
    chunk's conversion: the flush raises naming the record, the sink fails, no file is
    written, and no commit may pass the chunk's first row."""
    sink = ParquetSink(tmp_path / "d", Order, engine="pyarrow", batch_rows=100,
                       convert_rows=10)
    await sink.start()
    add_orders(sink, range(10, 15))
    bad = make_order(15).model_copy(update={"id": 2**70})  # beyond Parquet's int64
    sink.add(ExternalRecord("parquet", TP, 15, "15", bad, 0.0))
    add_orders(sink, range(16, 25))
    with pytest.raises(SerializationError, match=r"orders-0@15 does not fit the Parquet"):
        await sink.flush()
    assert sink.state is SinkState.FAILED
    assert sink.pending_offset(TP) == 10
    await sink.stop()
    assert committed_files(tmp_path / "d") == []


def test_a_sink_asks_for_its_write_early_enough_to_be_durable_within_batch_interval(
        tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path / "d", Order, engine="pyarrow", batch_rows=100,
                       batch_interval=60.0)
    sink._move_to(SinkState.RUNNING)  # add() buffers only in a running sink
    add_orders(sink, range(1))
    assert not sink.backlogged  # the row has waited ~0 of its 60 s
    sink.metrics.batches, sink.metrics.last_flush_seconds = 1, 60.0  # a write took 60 s
    assert sink.backlogged  # so this one must start now

    untimed = ParquetSink(tmp_path / "e", Order, engine="pyarrow", batch_rows=100,
                          batch_interval=FIRST_WRITE_GUESS)
    untimed._move_to(SinkState.RUNNING)
    add_orders(untimed, range(1))
    assert untimed.backlogged  # before any write, one is assumed to take FIRST_WRITE_GUESS


def test_backlogged_turns_true_at_batch_rows(tmp_path: Path) -> None:
    sink = ParquetSink(tmp_path / "d", Order, engine="pyarrow", batch_rows=3,
                       batch_interval=3600.0)
    sink._move_to(SinkState.RUNNING)  # add() buffers only in a running sink
    add_orders(sink, range(2))
    assert not sink.backlogged
    add_orders(sink, range(2, 3))
    assert sink.backlogged
