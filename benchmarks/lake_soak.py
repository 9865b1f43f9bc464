"""The lake soak (issue 38): a table written at one batch a second for a long time, with
compaction and vacuum on, stays as fast to read as it started and holds each input once.

    python -m benchmarks.lake_soak --minutes 30 --format delta|iceberg
                                   [--rate 200] [--compact-every 60] [--vacuum-every 120]
                                   [--retention 300] [--target-file-size 4194304]

A producer puts ``--rate`` orders a second (in 10 chunks) on a 2-partition topic of the
memory broker; an app writes them with ``to_delta``/``to_iceberg``, partitioned by region
(3 values), ``batch_interval=1.0`` (a batch a second, at-least-once: the commit that finds
the sink backlogged flushes it) and ``maintenance=TableMaintenance(...)``. Every minute
it prints the data files of the current snapshot per partition, the data files on disk,
and the seconds to read the whole table with pandas and with DuckDB (each read also
checks that no (partition, offset) appears twice: a reader during compaction and vacuum
never sees a duplicate). At the end it stops producing, waits until the table holds every
offset, and reads the table with every reader (delta-rs, pandas, DuckDB; pyiceberg for
Iceberg): each input must be there exactly once.

Verdict line: ``files bounded`` (the most live files of a partition in the second half
<= the bound: the batches between two compactions, ``compact_every / 1 s``, plus the
target-size files the data fills plus ``min_files``), ``read time flat`` (the mean
pandas read time of the whole table in the last 5 minutes <= :data:`FLAT_FACTOR` x that of
the first 5; halves for runs under 10 minutes) and ``exact``. The default rate is low (20
orders a second, 36,000 in 30 minutes) on purpose: a batch a second still makes a file per
partition per batch, but the rows stay few, so the read time measures what rot is (files
and metadata to open), not the table's growth in rows. Delta's retention is whole hours
(delta-rs), so a Delta soak shorter than an hour deletes no compacted file: its on-disk
count grows while the live count stays bounded. Prints one JSON line last.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import BaseModel

from aiostreams import App
from aiostreams.sinks import TableMaintenance
from aiostreams.transport.base import TopicSpec
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord, TopicPartition

FLAT_FACTOR = 2.0
"""Read time is flat when the last window's mean is at most this many times the first's."""
PARTITIONS = 2
REGIONS = ("eu", "us", "apac")
TABLE = "lake.orders"
BASE_TIME = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


class Order(BaseModel):
    id: int
    region: str
    customer: str
    amount: float
    placed_at: dt.datetime
    items: list[str]


def make_order(i: int) -> Order:
    return Order(id=i, region=REGIONS[i % 3], customer=f"c{i % 977}", amount=i * 0.25,
                 placed_at=BASE_TIME + dt.timedelta(seconds=i),
                 items=[f"sku-{j}" for j in range(i % 4)])


@dataclass
class Sample:
    minute: int
    rows: int
    live_files: dict[str, int]
    disk_files: int
    pandas_seconds: float
    duckdb_seconds: float

    @property
    def per_100k(self) -> float:
        """Seconds of the pandas read per 100,000 rows (the table grows all along)."""
        return self.pandas_seconds / max(1, self.rows) * 100_000


@dataclass
class Soak:
    fmt: str
    where: Path
    sink: Any = None
    samples: list[Sample] = field(default_factory=list)
    duplicates_seen: int = 0

    # -- reading the table (on a thread of its own, while the app writes) ----------------

    def read_pandas(self) -> list[tuple[int, int]]:
        if self.fmt == "delta":
            from deltalake import DeltaTable

            frame = DeltaTable(str(self.where / "orders")).to_pandas(
                columns=["partition", "offset"])
        else:
            table = self.sink.load()
            if table is None:
                return []
            frame = table.scan(selected_fields=("partition", "offset")).to_pandas()
        return list(zip(frame["partition"].tolist(), frame["offset"].tolist(), strict=True))

    def read_duckdb(self) -> list[tuple[int, int]]:
        import duckdb

        if self.fmt == "delta":
            from deltalake import DeltaTable

            data: Any = DeltaTable(str(self.where / "orders")).to_pyarrow_dataset()
        else:
            table = self.sink.load()
            if table is None:
                return []
            data = table.scan(selected_fields=("partition", "offset")).to_arrow()
        with duckdb.connect() as con:
            con.register("orders", data)
            rows = con.execute('SELECT "partition", "offset" FROM orders').fetchall()
        return [(int(p), int(o)) for p, o in rows]

    def read_native(self) -> list[tuple[int, int]]:
        """delta-rs' or pyiceberg's own Arrow read."""
        if self.fmt == "delta":
            from deltalake import DeltaTable

            data = DeltaTable(str(self.where / "orders")).to_pyarrow_table(
                columns=["partition", "offset"])
        else:
            data = self.sink.load().scan(selected_fields=("partition", "offset")).to_arrow()
        return _pairs(data)

    def sample(self, minute: int) -> Sample:
        began = time.perf_counter()
        seen = self.read_pandas()
        pandas_seconds = time.perf_counter() - began
        began = time.perf_counter()
        seen_duck = self.read_duckdb()
        duckdb_seconds = time.perf_counter() - began
        for rows in (seen, seen_duck):  # a reader during compaction and vacuum
            self.duplicates_seen += sum(n > 1 for n in Counter(rows).values())
        disk = sum(1 for _ in self.where.rglob("*.parquet"))
        return Sample(minute, len(seen), self.live_files(), disk, pandas_seconds,
                      duckdb_seconds)

    def live_files(self) -> dict[str, int]:
        """Data files of the current snapshot per partition (what a reader opens)."""
        if self.fmt == "delta":
            from aiostreams.sinks.delta_maintenance import DeltaMaintainer

            return DeltaMaintainer(str(self.where / "orders"), {}, "-").files_per_partition()
        from aiostreams.sinks.iceberg_maintenance import IcebergMaintainer

        return IcebergMaintainer(self.sink.load, "-").files_per_partition()


def _pairs(data: pa.Table) -> list[tuple[int, int]]:
    return list(zip(data.column("partition").to_pylist(), data.column("offset").to_pylist(),
                    strict=True))


def _once(seen: list[tuple[int, int]], expected: set[tuple[int, int]]) -> dict[str, int]:
    counts = Counter(seen)
    return {"rows": len(seen), "lost": len(expected - counts.keys()),
            "duplicated": sum(n > 1 for n in counts.values()),
            "foreign": len(counts.keys() - expected)}


async def produce(transport: MemoryTransport, rate: int, stop: asyncio.Event) -> int:
    """``rate`` orders a second in 10 chunks until ``stop``; returns how many."""
    producer = transport.producer()
    await producer.start()
    sent = 0
    loop = asyncio.get_running_loop()
    due = loop.time()
    try:
        while not stop.is_set():
            chunk = max(1, rate // 10)
            await producer.send_batch([
                OutgoingRecord("orders", str(i).encode(),
                               make_order(i).model_dump_json().encode())
                for i in range(sent, sent + chunk)])
            sent += chunk
            due += 0.1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, due - loop.time()))
        await producer.flush()
    finally:
        await producer.stop()
    return sent


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    where = Path(tempfile.mkdtemp(prefix=f"lake-soak-{args.format}-"))
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    admin = transport.admin()
    await admin.start()
    await admin.create_topics([TopicSpec("orders", PARTITIONS)])
    await admin.stop()
    maintenance = None if args.no_maintenance else TableMaintenance(
        compact_every=args.compact_every, vacuum_every=args.vacuum_every,
        retention=args.retention, target_file_size=args.target_file_size)
    app = App(f"lake-soak-{args.format}", transport=transport, commit_interval_ms=200)
    orders = app.topic("orders", key=str, value=Order)
    options: dict[str, Any] = dict(partition_by=("region",), include=("partition", "offset"),
                                   batch_interval=1.0, maintenance=maintenance)
    state = Soak(args.format, where)
    if args.format == "delta":
        state.sink = app.stream(orders).to_delta(where / "orders", Order, **options)
    else:
        state.sink = app.stream(orders).to_iceberg(TABLE, Order, warehouse=where, **options)
    stop = asyncio.Event()
    began = time.monotonic()
    async with app:
        producing = asyncio.create_task(produce(transport, args.rate, stop))
        for minute in range(1, args.minutes + 1):
            await asyncio.sleep(max(0.0, began + 60 * minute - time.monotonic()))
            s = await asyncio.to_thread(state.sample, minute)
            state.samples.append(s)
            print(f"min {minute:3d}  rows {s.rows:8d}  live files/partition "
                  f"{json.dumps(s.live_files, sort_keys=True)}  on disk {s.disk_files:5d}  "
                  f"read pandas {s.pandas_seconds:.3f}s ({s.per_100k:.3f}s/100k rows) "
                  f"duckdb {s.duckdb_seconds:.3f}s",
                  flush=True)
        stop.set()
        sent = await producing
        ends = {TopicPartition("orders", p): broker.end_offset(TopicPartition("orders", p)) - 1
                for p in range(PARTITIONS)}
        deadline = time.monotonic() + 120
        while any((state.sink.durable_offset(tp) or -1) < end for tp, end in ends.items()):
            if time.monotonic() > deadline:
                raise SystemExit(f"the table did not catch up with {ends} in 120 s")
            await app.wait_until_caught_up(timeout=60)
    expected = {(tp.partition, o) for tp, last in ends.items() for o in range(last + 1)}
    readers = {"pandas": state.read_pandas(), "duckdb": state.read_duckdb(),
               "delta-rs" if args.format == "delta" else "pyiceberg": state.read_native()}
    final = {name: _once(seen, expected) for name, seen in readers.items()}
    result = verdict(args, state, final, sent)
    shutil.rmtree(where, ignore_errors=True)
    return result


def verdict(args: argparse.Namespace, state: Soak, final: dict[str, dict[str, int]],
            sent: int) -> dict[str, Any]:
    samples = state.samples
    window = min(5, max(1, len(samples) // 2))
    first = statistics.mean(s.pandas_seconds for s in samples[:window])
    last = statistics.mean(s.pandas_seconds for s in samples[-window:])
    duck_first = statistics.mean(s.duckdb_seconds for s in samples[:window])
    duck_last = statistics.mean(s.duckdb_seconds for s in samples[-window:])
    health = state.sink.table_health
    data_bytes = sum(p.stat().st_size for p in state.where.rglob("*.parquet"))
    bound = (math.ceil(args.compact_every / 1.0)
             + math.ceil(data_bytes / len(REGIONS) / args.target_file_size) + 2)
    second_half = samples[len(samples) // 2:]
    most = max((max(s.live_files.values(), default=0) for s in second_half), default=0)
    exact = all(r["lost"] == r["duplicated"] == r["foreign"] == 0 and r["rows"] == sent
                for r in final.values()) and state.duplicates_seen == 0
    bounded = most <= bound
    flat = last <= FLAT_FACTOR * first
    line = (f"VERDICT {args.format}{' (no maintenance)' if args.no_maintenance else ''}: "
            f"files bounded {'yes' if bounded else 'NO'} (most per "
            f"partition in the second half {most} <= {bound}); read time flat "
            f"{'yes' if flat else 'NO'} (pandas, the whole table: last {window} min {last:.3f}s "
            f"vs first {first:.3f}s, factor {last / first:.2f} <= {FLAT_FACTOR}; DuckDB "
            f"{duck_last:.3f}s vs {duck_first:.3f}s); exact {'yes' if exact else 'NO'} "
            f"({sent} rows; every reader {sorted(final)} 0 lost 0 duplicated; "
            f"{state.duplicates_seen} duplicates in {2 * len(samples)} reads during the run)")
    print(line, flush=True)
    return {"format": args.format, "maintenance": not args.no_maintenance,
            "minutes": args.minutes, "rate": args.rate, "rows": sent,
            "compact_every": args.compact_every, "vacuum_every": args.vacuum_every,
            "retention": args.retention, "target_file_size": args.target_file_size,
            "samples": [{**vars(s), "per_100k": s.per_100k} for s in samples],
            "final": final,
            "health": vars(health) if health is not None else None,
            "bounded": bounded, "bound": bound, "most_files": most, "flat": flat,
            "read_first": first, "read_last": last, "duckdb_first": duck_first,
            "duckdb_last": duck_last, "exact": exact}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lake_soak", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--format", choices=("delta", "iceberg"), default="delta")
    parser.add_argument("--rate", type=int, default=20, help="orders a second")
    parser.add_argument("--no-maintenance", action="store_true",
                        help="the control: the same pipeline without maintenance")
    parser.add_argument("--compact-every", type=float, default=60.0)
    parser.add_argument("--vacuum-every", type=float, default=120.0)
    parser.add_argument("--retention", type=float, default=300.0)
    parser.add_argument("--target-file-size", type=int, default=4 * 1024 * 1024)
    args = parser.parse_args(argv)
    result = asyncio.run(soak(args))
    print(json.dumps(result, default=str))
    return 0 if result["exact"] and result["bounded"] and result["flat"] else 1


if __name__ == "__main__":
    sys.exit(main())
