"""Several writers of one Delta table (``--workers N``): a commit that loses a race with
another writer's commit is checked again against the newest snapshot and committed without
what the other writer made durable, so every source offset lands once, whoever wrote it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from deltakit import RacedDeltaSink, pairs, read_with_deltars, records
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sparkkit import Order, add_orders

from aiostreams.sinks import DeltaSink, SinkFailedError
from aiostreams.sinks.delta_sink import COMMIT_ATTEMPTS
from aiostreams.types import TopicPartition

ORDERS_0, ORDERS_1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def offsets_in(path: Path) -> Counter[tuple[int, int]]:
    return Counter(pairs(read_with_deltars(path)))


def seed(path: Path) -> None:
    """A table that exists, so commits are made against a snapshot."""
    DeltaSink(path, Order, include=("partition", "offset"))._write_batch(
        records(TopicPartition("orders", 2), range(1)))


@pytest.mark.parametrize("table_exists", [True, False], ids=["existing", "created-by-both"])
async def test_a_commit_that_lost_a_race_for_its_partition_writes_only_what_is_not_durable(
        tmp_path: Path, table_exists: bool) -> None:
    """A revoked worker finishing offsets 0-9 of a partition whose new owner committed 0-5
    meanwhile: the retry commits 6-9 only."""
    path = tmp_path / "d"
    if table_exists:
        seed(path)
    raced = RacedDeltaSink(path, Order, other=records(ORDERS_1, range(6)))
    await raced.start()
    add_orders(raced, range(10), ORDERS_1)  # type: ignore[arg-type]
    await raced.flush()
    assert raced.metrics.commit_conflicts == 1
    assert (raced.metrics.rows_written, raced.metrics.rows_replayed) == (4, 6)
    assert raced.durable_offset(ORDERS_1) == 9
    seen = offsets_in(path)
    assert {pair for pair in seen if pair[0] == 1} == {(1, i) for i in range(10)}
    assert max(seen.values()) == 1
    assert DeltaTable(str(path)).transaction_version("aiostreams:aiostreams:orders:1") == 9
    await raced.stop()


async def test_commits_of_other_partitions_in_between_need_no_second_check(
        tmp_path: Path) -> None:
    """Blind appends of other app transactions: delta-rs re-bases the commit by itself."""
    path = tmp_path / "d"
    seed(path)
    raced = RacedDeltaSink(path, Order, other=records(ORDERS_0, range(50)))
    await raced.start()
    add_orders(raced, range(10), ORDERS_1)  # type: ignore[arg-type]
    await raced.flush()
    assert raced.metrics.commit_conflicts == 0
    seen = offsets_in(path)
    assert sum(seen.values()) == 1 + 50 + 10 and max(seen.values()) == 1
    await raced.stop()


async def test_a_sink_that_loses_every_race_fails_without_committing_its_offsets(
        tmp_path: Path) -> None:
    path = tmp_path / "d"
    seed(path)
    raced = RacedDeltaSink(path, Order, other=records(ORDERS_1, range(1)),
                           races=COMMIT_ATTEMPTS)
    await raced.start()
    add_orders(raced, range(2000, 2010), ORDERS_1)  # type: ignore[arg-type]
    with pytest.raises(SinkFailedError, match="lost a race with other writers"):
        await raced.flush()
    assert raced.pending_offset(ORDERS_1) == 2000
    assert raced.metrics.commit_conflicts == COMMIT_ATTEMPTS - 1
    assert not any(p == (1, o) for p in offsets_in(path) for o in range(2000, 2010))
    await raced.stop()


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mine=st.tuples(st.integers(0, 30), st.integers(1, 30)),
       theirs=st.tuples(st.integers(0, 30), st.integers(1, 30)))
async def test_two_writers_of_overlapping_offset_ranges_leave_each_offset_once(
        tmp_path_factory: pytest.TempPathFactory, mine: tuple[int, int],
        theirs: tuple[int, int]) -> None:
    """Whatever the two ranges of one partition (the other writer's lands first), the table
    holds their union once, and the partition's version is its highest offset."""
    path = tmp_path_factory.mktemp("d") / "t"
    seed(path)
    their_range = range(theirs[0], theirs[0] + theirs[1])
    my_range = range(mine[0], mine[0] + mine[1])
    raced = RacedDeltaSink(path, Order, other=records(ORDERS_1, their_range))
    await raced.start()
    add_orders(raced, my_range, ORDERS_1)  # type: ignore[arg-type]
    await raced.flush()
    await raced.stop()
    seen = offsets_in(path)
    mine_written = {o for o in my_range if o > their_range[-1]}
    assert {o for (p, o) in seen if p == 1} == set(their_range) | mine_written
    assert max(seen.values()) == 1


async def test_a_partition_that_comes_back_lower_after_another_worker_had_it_is_taken_once(
        tmp_path: Path) -> None:
    """Worker A wrote offsets 0-9 and lost the partition; B wrote 10-19 and crashed before
    its offset commit; A gets the partition back from offset 10 (below nothing it holds)."""
    path = tmp_path / "d"
    a = DeltaSink(path, Order, include=("partition", "offset"))
    await a.start()
    add_orders(a, range(10), ORDERS_1)  # type: ignore[arg-type]
    await a.flush()
    b = DeltaSink(path, Order, include=("partition", "offset"))
    await b.start()
    add_orders(b, range(10, 20), ORDERS_1)  # type: ignore[arg-type]
    await b.stop()
    add_orders(a, range(5, 25), ORDERS_1)  # type: ignore[arg-type]  # replayed from 5
    await a.flush()
    assert a.metrics.rows_replayed == 15  # 5-9 known durable at add, 10-19 at the check
    seen = offsets_in(path)
    assert set(seen) == {(1, i) for i in range(25)} and max(seen.values()) == 1
    await a.stop()


async def test_a_partition_going_back_while_its_records_are_pending_is_a_bug_caught(
        tmp_path: Path) -> None:
    sink = DeltaSink(tmp_path / "d", Order)
    await sink.start()
    add_orders(sink, range(10), ORDERS_1)  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="went back from offset 9 to 3"):
        add_orders(sink, range(3, 4), ORDERS_1)  # type: ignore[arg-type]
    await sink.stop()
