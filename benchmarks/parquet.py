"""Parquet and Delta sink throughput and latency, against ``pyarrow.parquet.write_table``.

    python -m benchmarks.parquet [--rows 1000000] [--engines pyarrow spark delta delta-spark]
                                 [--rounds 3]
                                 [--batch-rows N] [--batch-interval 5.0]

(a) baseline: the same rows (pydantic models) converted with the fastest path this package
    has (:meth:`RowSchema.to_table`) and written with one ``pq.write_table``: rows/s.
(b) the sink: every row handed to ``add()`` in retire-sized chunks, ``flush()`` awaited
    whenever the sink says it is backlogged (as the worker commits early) and at the end:
    rows/s from the first ``add`` to the last durable log entry.
(c) with ``spark`` or ``delta-spark``: the floor of any Spark-engine sink: per
    ``--batch-rows`` rows, the same conversion as (a) and the same Spark calls as the sink
    (sort by the partition column,
    ``createDataFrame(arrow_table).coalesce(1).write.partitionBy(...).parquet(...)``), without
    the sink's staging, fsync, rename and commit log.
latency, retire to durable file: rows arrive at ``--rate`` rows/s in 10 ms chunks, and a
    commit runs every ``--commit-interval`` seconds or earlier when the sink is backlogged;
    as the worker's at-least-once commit does, it awaits a flush only when the sink is
    backlogged (and at the end); per row, the time from its ``add()`` to the end of the flush
    that made it durable.
``--batch-rows`` defaults to the sink's own default for each engine
(``DEFAULT_BATCH_ROWS``: 50k rows for pyarrow, 500k for Spark; the Delta sink 50k).
Engine ``delta`` is :class:`DeltaSink` (one Delta commit per batch, through delta-rs);
``delta-spark`` is ``DeltaSink(engine="spark")`` (Spark writes the files, delta-rs commits
them), at the Spark batch size unless ``--batch-rows`` is given.

Targets: (b) >= 0.5 x (a); latency p99 <= batch_interval + 1 s. Every case runs once as a
warm-up first (untimed: the JVM's JIT, pyarrow's and Python's caches), then ``--rounds``
times, interleaved; each figure is the median of its rounds. The Spark session's start
(seconds) is excluded: it happens once per process. Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import enum
import json
import statistics
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pydantic import BaseModel, Field

from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks import DeltaSink, ParquetSink, RowSchema, SparkConfig, get_session
from aiostreams.sinks.parquet_sink import DEFAULT_BATCH_ROWS
from aiostreams.sinks.spark.spark_thread import call_on_spark_thread
from aiostreams.types import TopicPartition


class Tier(enum.Enum):
    BRONZE = "bronze"
    SILVER = "silver"
    GOLD = "gold"


class Address(BaseModel):
    city: str
    zip: int | None = None


class Order(BaseModel):
    id: int
    region: str
    amount: Decimal = Field(max_digits=12, decimal_places=2)
    placed_at: dt.datetime
    tier: Tier
    shipping: Address
    items: list[str]
    note: str | None = None


BASE = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
TP = TopicPartition("orders", 0)


def make_rows(n: int) -> list[Order]:
    tiers = list(Tier)
    return [Order(id=i, region=("eu", "us", "apac")[i % 3], amount=Decimal(i % 100_000) / 100,
                  placed_at=BASE + dt.timedelta(seconds=i), tier=tiers[i % 3],
                  shipping=Address(city=f"city-{i % 17}", zip=None if i % 4 == 0 else i % 900),
                  items=[f"sku-{j}" for j in range(i % 4)], note=None if i % 5 else "note")
            for i in range(n)]


def records(rows: list[Order], first_offset: int = 0) -> list[ExternalRecord]:
    return [ExternalRecord("parquet", TP, first_offset + i, str(r.id), r, 1.7e9 + i)
            for i, r in enumerate(rows)]


def baseline(rows: list[Order], directory: Path) -> float:
    schema = RowSchema(Order)
    directory.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    table = schema.to_table(rows)
    pq.write_table(table, directory / "baseline.parquet", compression="snappy")
    return len(rows) / (time.perf_counter() - began)


FLOOR_STEPS = ("to_table", "sort", "createDataFrame", "spark write job")


def spark_floor(rows: list[Order], directory: Path, batch_rows: int,
                steps: dict[str, float]) -> float:
    """(c); adds each step's seconds per batch to ``steps``."""
    schema = RowSchema(Order)
    spark = get_session()
    batches = range(0, len(rows), batch_rows)

    def write_all() -> None:
        for n, start in enumerate(batches):
            t0 = time.perf_counter()
            table = schema.to_table(rows[start:start + batch_rows])
            t1 = time.perf_counter()
            table = table.sort_by("region")
            t2 = time.perf_counter()
            df = spark.createDataFrame(table)
            t3 = time.perf_counter()
            (df.coalesce(1).write.partitionBy("region").option("compression", "snappy")
             .parquet((directory / f"batch-{n}").as_uri()))
            t4 = time.perf_counter()
            for step, seconds in zip(FLOOR_STEPS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3),
                                     strict=True):
                steps[step] = steps.get(step, 0.0) + seconds / len(batches)

    began = time.perf_counter()
    call_on_spark_thread(write_all)
    return len(rows) / (time.perf_counter() - began)


def make_sink(path: Path, engine: str, batch_rows: int | None,
              batch_interval: float = 5.0) -> ParquetSink | DeltaSink:
    """The sink under test: ``engine`` "pyarrow" or "spark" (ParquetSink), "delta"
    (DeltaSink through delta-rs) or "delta-spark" (DeltaSink, Spark engine), partitioned by
    region, values checked upstream (as add_parquet_sink/add_delta_sink wire it)."""
    sink: ParquetSink | DeltaSink
    if engine in ("delta", "delta-spark"):
        spark = engine == "delta-spark"
        sink = DeltaSink(path, Order, batch_rows=batch_rows or DEFAULT_BATCH_ROWS[
                         "spark" if spark else "pyarrow"], batch_interval=batch_interval,
                         partition_by=("region",), engine="spark" if spark else "pyarrow")
    else:
        sink = ParquetSink(path, Order, engine=engine,  # type: ignore[arg-type]
                           batch_rows=batch_rows, batch_interval=batch_interval,
                           partition_by=("region",))
    sink.validated_upstream = True
    return sink


async def throughput(rows: list[Order], directory: Path, engine: str, batch_rows: int | None,
                     chunk: int = 1000) -> tuple[float, ParquetSink | DeltaSink]:
    sink = make_sink(directory / f"throughput-{engine}", engine, batch_rows)
    await sink.start()
    recs = records(rows)
    began = time.perf_counter()
    for start in range(0, len(recs), chunk):
        for r in recs[start:start + chunk]:
            sink.add(r)
        if sink.backlogged:
            await sink.flush()
    await sink.flush()
    rate = len(rows) / (time.perf_counter() - began)
    await sink.stop()
    assert sink.metrics.rows_written == len(rows)
    return rate, sink


async def latency(rows: list[Order], directory: Path, engine: str, rate: float,
                  commit_interval: float, batch_rows: int | None, batch_interval: float
                  ) -> list[float]:
    sink = make_sink(directory / f"latency-{engine}", engine, batch_rows, batch_interval)
    await sink.start()
    recs = records(rows)
    added_at: list[float] = []
    durable_at: list[float] = []
    commit_due = asyncio.Event()
    done = False

    async def retire() -> None:
        nonlocal done
        chunk = max(1, int(rate * 0.01))
        began = time.perf_counter()
        for start in range(0, len(recs), chunk):
            target = began + start / rate
            delay = target - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            now = time.perf_counter()
            for r in recs[start:start + chunk]:
                sink.add(r)
                added_at.append(now)
            if sink.backlogged:
                commit_due.set()
        done = True
        commit_due.set()

    async def commit() -> None:
        while True:
            with contextlib.suppress(TimeoutError):  # the commit interval elapsed
                await asyncio.wait_for(commit_due.wait(), commit_interval)
            commit_due.clear()
            finished = done
            if not (finished or sink.backlogged):
                continue  # the commit leaves the sink's rows buffered
            pending = len(added_at) - len(durable_at)
            await sink.flush()
            now = time.perf_counter()
            durable_at.extend([now] * pending)
            if finished and len(durable_at) == len(added_at):
                return

    await asyncio.gather(retire(), commit())
    await sink.stop()
    return [d - a for a, d in zip(added_at, durable_at, strict=True)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    rows = make_rows(args.rows)
    out: dict[str, Any] = {"rows": args.rows, "batch_rows": args.batch_rows,
                           "batch_interval": args.batch_interval,
                           "commit_interval": args.commit_interval, "rate": args.rate,
                           "rounds": args.rounds}
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        uses_spark = bool({"spark", "delta-spark"} & set(args.engines))
        if uses_spark:
            conf = dict(item.split("=", 1) for item in args.spark_conf)
            get_session(SparkConfig(master="local[*]", driver_memory="2g", conf=conf))
        for round_ in range(args.rounds + 1):  # round 0 is the warm-up, not counted
            here = directory / f"round-{round_}"
            figures = {"pyarrow_write_table_rows_per_s": baseline(rows, here / "baseline")}
            for engine in args.engines:
                rate, sink = await throughput(rows, here, engine, args.batch_rows)
                figures[f"{engine}_sink_rows_per_s"] = rate
                out[f"{engine}_sink_batches"] = sink.metrics.batches
                out[f"{engine}_batch_rows"] = sink.batch_rows
            if uses_spark:
                steps: dict[str, float] = {}
                figures["spark_floor_rows_per_s"] = spark_floor(
                    rows, here / "floor", args.batch_rows or DEFAULT_BATCH_ROWS["spark"], steps)
                for step, seconds in steps.items():
                    figures[f"spark_floor_ms_per_batch_{step.replace(' ', '_')}"] = (
                        seconds * 1000)
            if round_:
                for key, value in figures.items():
                    samples.setdefault(key, []).append(value)
        for key, values in samples.items():
            out[key] = statistics.median(values)
        base = out["pyarrow_write_table_rows_per_s"]
        for engine in args.engines:
            out[f"{engine}_ratio"] = out[f"{engine}_sink_rows_per_s"] / base
        if uses_spark:
            out["spark_floor_ratio"] = out["spark_floor_rows_per_s"] / base
        for engine in args.engines:
            lat_rows = rows[: int(args.rate * args.latency_seconds)]
            lat = await latency(lat_rows, directory, engine, args.rate, args.commit_interval,
                                args.batch_rows, args.batch_interval)
            out[f"{engine}_latency_p50_s"] = statistics.median(lat)
            out[f"{engine}_latency_p99_s"] = percentile(lat, 0.99)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--engines", nargs="+", default=["pyarrow", "spark"],
                        choices=["pyarrow", "spark", "delta", "delta-spark"])
    parser.add_argument("--batch-rows", type=int, default=None,
                        help="rows per write (default: the sink's default for the engine)")
    parser.add_argument("--batch-interval", type=float, default=5.0)
    parser.add_argument("--commit-interval", type=float, default=1.0)
    parser.add_argument("--rate", type=float, default=20_000.0, help="rows/s for the latency run")
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--spark-conf", nargs="*", default=[], metavar="KEY=VALUE",
                        help="extra Spark settings (to compare a setting within one run)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="timed rounds after the warm-up; figures are their medians")
    args = parser.parse_args()
    out = asyncio.run(main_async(args))
    target_p99 = args.batch_interval + 1.0
    print(f"{'case':<44}{'value':>14}  target")
    print(f"{'(a) pq.write_table (incl. conversion) rows/s':<44}"
          f"{out['pyarrow_write_table_rows_per_s']:>14,.0f}")
    if {"spark", "delta-spark"} & set(args.engines):
        print(f"{'(c) bare Spark write (the floor) rows/s':<44}"
              f"{out['spark_floor_rows_per_s']:>14,.0f}  {out['spark_floor_ratio']:.2f} x (a)")
        for step in FLOOR_STEPS:
            ms = out[f"spark_floor_ms_per_batch_{step.replace(' ', '_')}"]
            print(f"{f'    (c) ms per batch: {step}':<44}{ms:>14.1f}")
    for engine in args.engines:
        ratio = out[f"{engine}_ratio"]
        p99 = out[f"{engine}_latency_p99_s"]
        print(f"{f'(b) sink engine={engine} rows/s':<44}{out[f'{engine}_sink_rows_per_s']:>14,.0f}"
              f"  {ratio:.2f} x (a) {'met' if ratio >= 0.5 else 'NOT met'} (>= 0.5 x)")
        p50 = out[f"{engine}_latency_p50_s"]
        print(f"{f'latency {engine} retire->durable p50 s':<44}{p50:>14.3f}")
        print(f"{f'latency {engine} retire->durable p99 s':<44}{p99:>14.3f}"
              f"  {'met' if p99 <= target_p99 else 'NOT met'} (<= {target_p99:.1f} s)")
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}))


if __name__ == "__main__":
    main()
