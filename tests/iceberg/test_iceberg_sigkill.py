"""Exactly once for every Iceberg reader through real crashes on a real broker:

* one worker process SIGKILLs itself at each point of a batch (before its write, after its
  data files, after its snapshot, after its offset commit); a fresh app finishes the input;
* a worker SIGKILLed again and again at random points of random batches of one table
  (:data:`RANDOM_KILLS`, 3; ``ICEBERG_KILLS=20`` for a long run), then a fresh app;
* ``aiostreams run --workers 3`` writing one table, under both guarantees, while kills (in
  whichever workers reach the kill point) move partitions between workers and a reader scans
  every new snapshot: no read ever sees a duplicate, a gap, or a row past the offsets its
  own snapshot records;

then pyiceberg's Arrow scan, pandas and DuckDB each count every input once (and Spark, with
Iceberg's Spark runtime, after the random kills: a full and an incremental read)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from iceberg_chaos_worker import DONE_LINE, KILL_POINTS, chaos_app
from icebergkit import (
    REPO,
    TABLE,
    Order,
    WatchedIcebergSink,
    assert_every_reader_sees_each_input_once,
    end_offsets,
    expected_pairs,
    run_until_sigkilled,
    seen_once,
    topic_of_orders,
    worker_env,
)
from pyiceberg.table import Table

from aiostreams.sinks.iceberg_table import APP_KEY, OFFSETS_KEY, WRITER_KEY, decode_offsets
from aiostreams.transport.kafka import KafkaTransport

pytestmark = [pytest.mark.kafka, pytest.mark.chaos, pytest.mark.timeout(300)]

N = 4_000
NTH = 3  # the worker dies at its third batch (400 rows each)


def snapshots_of(table: Table) -> int:
    return len(table.metadata.snapshots)


@pytest.mark.parametrize("kill_point", KILL_POINTS)
async def test_a_worker_killed_at_each_point_of_a_batch_leaves_each_input_once_for_every_reader(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path, kill_point: str) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    topic, group = topic_name("orders"), topic_name("iceberg-chaos")
    await topic_of_orders(transport, topic, range(N))
    warehouse = tmp_path / "lake"
    await run_until_sigkilled("iceberg_chaos_worker.py", kafka_bootstrap, topic, group,
                              str(warehouse), kill_point, str(NTH))
    sink = WatchedIcebergSink(TABLE, Order, warehouse=warehouse,
                              include=("partition", "offset"), batch_interval=0.5)
    table = sink.load()
    assert table is not None
    assert snapshots_of(table) == (NTH if kill_point in ("after_write", "after_commit")
                                   else NTH - 1)
    if kill_point == "after_files":  # the killed write's files: on disk, in no snapshot
        listed = {t.file.file_path.removeprefix("file://") for t in table.scan().plan_files()}
        on_disk = {str(p) for p in warehouse.rglob("*.parquet")}
        assert on_disk - listed, "the killed write left no orphan data file"

    ends = await end_offsets(transport, topic)
    async with chaos_app(kafka_bootstrap, topic, group, sink,  # the killed member's place
                         group_instance_id="worker-1"):
        await sink.durable_through(ends).wait()
    if kill_point == "after_write":
        assert sink.metrics.rows_replayed > 0  # the last batch came again and was dropped
    expected = expected_pairs(ends)
    assert len(expected) == N
    assert_every_reader_sees_each_input_once(sink, expected)


RANDOM_KILLS = int(os.environ.get("ICEBERG_KILLS", "3"))


async def read_with_spark(location: str, start: int) -> dict[str, Any]:
    """What ``iceberg_spark_reader.py`` prints for the table at ``location``."""
    reader = await asyncio.create_subprocess_exec(
        sys.executable, str(REPO / "tests" / "iceberg" / "iceberg_spark_reader.py"), location,
        str(start), env=worker_env(), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(reader.communicate(), 240)
    assert reader.returncode == 0, err.decode()[-3000:]
    found: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return found


@pytest.mark.spark
async def test_random_kills_of_one_writer_leave_each_input_once_for_every_reader(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    topic, group = topic_name("orders"), topic_name("iceberg-random")
    n = max(N, 1_200 * RANDOM_KILLS)  # each run writes 1 to 3 batches of 400 before dying
    await topic_of_orders(transport, topic, range(n))
    warehouse = tmp_path / "lake"
    chance = random.Random(os.environ.get("ICEBERG_KILLS_SEED"))
    for _ in range(RANDOM_KILLS):
        await run_until_sigkilled("iceberg_chaos_worker.py", kafka_bootstrap, topic, group,
                                  str(warehouse), chance.choice(KILL_POINTS),
                                  str(chance.randint(1, 3)))
    sink = WatchedIcebergSink(TABLE, Order, warehouse=warehouse,
                              include=("partition", "offset"), batch_interval=0.5)
    ends = await end_offsets(transport, topic)
    async with chaos_app(kafka_bootstrap, topic, group, sink, group_instance_id="worker-1"):
        await sink.durable_through(ends).wait()
    expected = expected_pairs(ends)
    assert_every_reader_sees_each_input_once(sink, expected)
    table = sink.load()
    assert table is not None
    for snapshot in table.metadata.snapshots:  # and so did every snapshot on the way
        check_snapshot(table, snapshot.snapshot_id, sink.app)

    first = table.metadata.snapshots[0]  # Spark: a full read, and an incremental one
    in_first = len(table.scan(snapshot_id=first.snapshot_id).to_arrow())
    read = await read_with_spark(table.metadata_location, first.snapshot_id)
    assert seen_once([tuple(p) for p in read["pairs"]], expected) == (0, 0, len(expected))
    assert read["since"] == len(expected) - in_first


def check_snapshot(table: Table, snapshot_id: int, app: str) -> tuple[int, int]:
    """Read one snapshot: its rows per source partition must be exactly the offsets 0 to
    what its own summary records (no duplicate, no gap, nothing past it). (rows, dups)."""
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary.get(APP_KEY) == app
    recorded = decode_offsets(str(snapshot.summary[OFFSETS_KEY]))
    data = table.scan(snapshot_id=snapshot_id, selected_fields=("partition", "offset")).to_arrow()
    seen = Counter(zip(data.column("partition").to_pylist(), data.column("offset").to_pylist(),
                       strict=True))
    dups = sum(n > 1 for n in seen.values())
    want = {(tp.partition, o) for tp, last in recorded.items() for o in range(last + 1)}
    assert dups == 0 and set(seen) == want, (snapshot_id, dups, len(seen), len(want))
    return len(seen), dups


async def read_every_snapshot(load: Any, app: str, stop: asyncio.Event) -> int:
    """Until ``stop``, scan each new snapshot of the table as a reader would (in a thread);
    returns how many reads were checked."""
    checked: set[int] = set()
    while not stop.is_set():
        table = await asyncio.to_thread(load)
        if table is not None:
            for snapshot in table.metadata.snapshots:
                if snapshot.snapshot_id not in checked:
                    await asyncio.to_thread(check_snapshot, table, snapshot.snapshot_id, app)
                    checked.add(snapshot.snapshot_id)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.2)  # polling the catalog: nothing announces
    return len(checked)


async def run_until(command: list[str], env: dict[str, str], line: str,
                    timeout: float) -> tuple[int, str]:
    """Run ``command`` until its stderr has ``line``, then SIGINT it; its exit code and
    stderr."""
    proc = await asyncio.create_subprocess_exec(
        *command, cwd=REPO, env=env, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, start_new_session=True)
    assert proc.stderr is not None
    seen: list[str] = []

    async def read_until_done() -> None:
        assert proc.stderr is not None
        async for raw in proc.stderr:
            seen.append(raw.decode(errors="replace"))
            if line in seen[-1]:
                return
        raise AssertionError("the supervisor ended first:\n" + "".join(seen[-80:]))

    try:
        try:
            await asyncio.wait_for(read_until_done(), timeout)
        except TimeoutError:
            raise AssertionError(f"no {line!r} within {timeout} s:\n"
                                 + "".join(seen[-60:])) from None
        proc.send_signal(signal.SIGINT)
        rest = await asyncio.wait_for(proc.stderr.read(), 120)
        seen.append(rest.decode(errors="replace"))
        return await proc.wait(), "".join(seen)
    except BaseException:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        raise


KILLS = 3


WORKER_KILLS = ([("at_least_once", p) for p in KILL_POINTS]
                + [("exactly_once", p) for p in KILL_POINTS if p != "after_commit"]
                if "ICEBERG_KILLS" in os.environ  # a long run: every point, both guarantees
                else [("at_least_once", "after_write"), ("exactly_once", "after_files")])
"""(guarantee, kill point) of the ``--workers`` test. Under exactly-once the offsets go with
the transaction, not a consumer commit, so ``after_commit`` is an at-least-once point."""


@pytest.mark.parametrize(("guarantee", "kill_point"), WORKER_KILLS)
async def test_three_workers_killed_during_rebalances_leave_each_input_once_for_every_reader(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path, guarantee: str,
        kill_point: str) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    topic = topic_name("orders")
    await topic_of_orders(transport, topic, range(N), partitions=3)
    ends = await end_offsets(transport, topic, partitions=3)
    tokens = tmp_path / "kill-tokens"
    tokens.mkdir()
    for i in range(KILLS):
        (tokens / f"kill-{i}").touch()
    warehouse = tmp_path / "lake"
    env = worker_env()
    env.update(IW_BOOTSTRAP=kafka_bootstrap, IW_TOPIC=topic, IW_WAREHOUSE=str(warehouse),
               IW_KILL_POINT=kill_point, IW_NTH="2", IW_TOKENS=str(tokens), IW_GUARANTEE=guarantee,
               IW_ENDS=json.dumps([ends[tp] for tp in sorted(ends)]))
    command = [sys.executable, "-m", "aiostreams", "run", "iceberg_chaos_worker:app",
               "--workers", "3", "--broker", f"kafka://{kafka_bootstrap}"]
    reader = WatchedIcebergSink(TABLE, Order, warehouse=warehouse,
                                include=("partition", "offset"))
    reader.bind_app(f"iw-{topic}")
    stop = asyncio.Event()
    reads = asyncio.create_task(read_every_snapshot(reader.load, reader.app, stop))
    try:
        code, stderr = await run_until(command, env, DONE_LINE, timeout=240)
    finally:
        stop.set()
        checked = await reads

    assert code == 130, stderr[-4000:]  # every worker stopped gracefully after Ctrl-C
    assert list(tokens.iterdir()) == [], stderr[-4000:]  # every kill happened
    assert len(re.findall(r"restarted worker \d", stderr)) == KILLS, stderr[-4000:]
    assert checked >= 5, checked  # the reader saw the table grow through the kills
    assert_every_reader_sees_each_input_once(reader, expected_pairs(ends))
    table = reader.load()
    assert table is not None
    writers = Counter((s.summary or {}).get(WRITER_KEY) for s in table.metadata.snapshots)
    assert None not in writers and len(writers) >= 4, writers  # three workers and restarts
