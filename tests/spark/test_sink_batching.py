"""The table sinks' shared batching (aiostreams.sinks.sink_batching): the committable-offset
rule against a model of what was added and written, chunking, back-pressure by rows, and
replays dropped against the durable offsets."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks.sink_batching import Batch, Batcher
from aiostreams.sinks.sink_state import SinkMetrics
from aiostreams.types import TopicPartition

SOURCES = [TopicPartition("in", 0), TopicPartition("in", 1)]

Records = list[ExternalRecord]


def batcher(batch_rows: int = 1000, chunk_rows: int = 3) -> Batcher[Records]:
    return Batcher("test", batch_rows=batch_rows, batch_interval=3600.0,
                   chunk_rows=chunk_rows, metrics=SinkMetrics(),
                   hand_off=lambda records, firsts, lasts: records)


def record(source: TopicPartition, offset: int) -> ExternalRecord:
    return ExternalRecord("sink", source, offset, None, offset, 0.0)


# an operation: ("add", partition, gap) | ("take",) | ("done", which taken batch)
operations = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, 1), st.integers(0, 2)),
    st.tuples(st.just("take")),
    st.tuples(st.just("done"), st.integers(0, 5)),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_pending_offset_is_the_first_offset_added_and_not_yet_written(
        ops: list[tuple[int | str, ...]]) -> None:
    """Commit each input partition only up to its first row still buffered or being
    written: the model keeps every added offset until a write that holds it is done, and a
    done write means every write taken before it is done too (FIFO)."""
    b = batcher()
    next_offset = [0, 0]
    taken: list[Batch[Records]] = []  # not done yet, oldest first
    pending: set[tuple[TopicPartition, int]] = set()
    in_batch: list[set[tuple[TopicPartition, int]]] = []
    buffered: set[tuple[TopicPartition, int]] = set()
    for op in ops:
        if op[0] == "add":
            partition, gap = int(op[1]), int(op[2])
            source = SOURCES[partition]
            offset = next_offset[partition] + gap  # gaps: transaction markers, filtered
            next_offset[partition] = offset + 1
            b.add(record(source, offset), keep=True)
            pending.add((source, offset))
            buffered.add((source, offset))
        elif op[0] == "take":
            batch = b.take()
            assert {(r.source, r.offset) for p in batch.payloads for r in p} == buffered
            assert batch.rows == len(buffered)
            taken.append(batch)
            in_batch.append(buffered)
            buffered = set()
        elif taken:
            which = int(op[1]) % len(taken)
            b.done(taken[which])
            for written in in_batch[:which + 1]:
                pending -= written
            del taken[:which + 1], in_batch[:which + 1]
        for source in SOURCES:
            mine = [o for s, o in pending if s == source]
            assert b.pending_offset(source) == (min(mine) if mine else None)


def test_rows_are_handed_off_in_chunks_and_backlog_at_batch_rows() -> None:
    chunks: list[tuple[int, dict[TopicPartition, int], dict[TopicPartition, int]]] = []

    def hand_off(records: Records, firsts: dict[TopicPartition, int],
                 lasts: dict[TopicPartition, int]) -> int:
        chunks.append((len(records), dict(firsts), dict(lasts)))
        return len(chunks)

    b: Batcher[int] = Batcher("test", batch_rows=7, batch_interval=3600.0, chunk_rows=3,
                              metrics=SinkMetrics(), hand_off=hand_off)
    for offset in range(6):
        b.add(record(SOURCES[0], offset), keep=True)
    assert chunks == [(3, {SOURCES[0]: 0}, {SOURCES[0]: 2}),
                      (3, {SOURCES[0]: 3}, {SOURCES[0]: 5})]
    assert not b.backlogged  # 6 of 7 rows
    b.add(record(SOURCES[0], 6), keep=True)
    assert b.backlogged
    batch = b.take()
    assert batch.payloads == [1, 2, 3] and batch.rows == 7 and not b.backlogged


def test_replays_are_dropped_and_a_failed_sink_still_holds_back_the_commit() -> None:
    b = batcher()
    b.advance(SOURCES[0], 4)
    for offset in range(8):
        b.add(record(SOURCES[0], offset), keep=True)
    assert b.metrics.rows_replayed == 5
    assert b.pending_offset(SOURCES[0]) == 5
    assert b.take().rows == 3
    failed = batcher()
    failed.add(record(SOURCES[1], 10), keep=False)  # dropped: the sink is FAILED
    assert failed.buffered == 0 and failed.pending_offset(SOURCES[1]) == 10
