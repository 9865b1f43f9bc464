"""Write throughput of the table sinks (Parquet, Delta, Iceberg) against
``pyarrow.parquet.write_table`` of the same batches.

    python -m benchmarks.sink_throughput [--rows 1000000] [--batch-rows 10000 50000 200000]
                                         [--sinks parquet delta iceberg] [--rounds 1]
                                         [--pipeline-rows 200000] [--profile SINK]

Per batch size B (``--batch-rows``), the same ``--rows`` pydantic orders (the nested model of
:mod:`benchmarks.parquet`: decimal, enum, struct, list, optional), from 4 source partitions:

``write_table``   the Arrow tables of the batches, built beforehand, each written with one
                  ``pq.write_table`` (snappy): the floor of writing Parquet here.
``to_table+write`` per batch, the conversion every sink makes
                  (:meth:`RowSchema.to_table`) and one ``pq.write_table``.
``<sink>``        the sink through its real path, as a pipeline's worker drives it: every row
                  handed to ``add()`` in retire-sized chunks of 1,000, ``flush()`` awaited when
                  the sink says it is backlogged (B rows: ``batch_interval`` is an hour) and at
                  the end; checked afterwards: every row written and each source partition's
                  durable offset recorded (the Parquet sink's commit log, Delta's app
                  transactions, Iceberg's snapshot summary). Partitioned by region (3 values),
                  so a sink writes 3 files per batch where ``write_table`` writes 1.

Each case reports rows/s (wall clock from the first ``add`` to the last durable write),
its ratio to ``to_table+write`` and to ``write_table``, and CPU µs per row (the process's
CPU time, every thread, over the rows: the writer thread, delta-rs' and pyarrow's threads).
On a loaded machine the wall clock stretches and CPU time does not: the load average at the
start and the end is printed with the table.
A warm-up round at the smallest B runs first, untimed; figures are medians of ``--rounds``.

``--pipeline-rows N`` (0 to skip) also times the whole pipeline per sink: N orders produced
to a ``memory://`` topic of 4 partitions beforehand, then an app ``stream(topic).to_<sink>(...)``
(the DSL's validation step, deserialization, the engine, at-least-once commits; batch_rows
50k, ``batch_interval`` 1 s) from start until every offset is durable in the table; and the
same app with ``foreach`` instead of a sink until it saw every record: the engine's own cost.

``--history-batches N`` (0 to skip) writes N batches of ``--history-rows`` rows through each
sink into a new table and prints the CPU ms per ``flush()`` of the first 25 and the last 25:
how a commit's cost grows with the table's history.

``--profile SINK`` runs that sink once at the largest B under cProfile (the event loop thread
and the writer thread, each profiled on its own thread) and prints the top functions by
cumulative time of each.

Prints one table (markdown) and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from aiostreams import App
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.sinks import DeltaSink, ParquetSink, RowSchema
from aiostreams.sinks.iceberg_sink import IcebergSink
from aiostreams.sinks.spark.spark_thread import call_on_spark_thread
from aiostreams.types import TopicPartition
from benchmarks.parquet import Order, make_rows

SINKS = ("parquet", "delta", "iceberg")
SOURCES = tuple(TopicPartition("orders", p) for p in range(4))
CHUNK = 1000  # rows handed to add() between two looks at backlogged
Sink = ParquetSink | DeltaSink | IcebergSink


@dataclass
class Timed:
    seconds: float
    cpu: float  # process CPU seconds, every thread

    def figures(self, rows: int) -> dict[str, float]:
        return {"rows_per_s": rows / self.seconds, "cpu_us_per_row": self.cpu / rows * 1e6}


def timed(fn: Callable[[], Any]) -> Timed:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return Timed(time.perf_counter() - wall, time.process_time() - cpu)


async def timed_async(fn: Callable[[], Any]) -> Timed:
    wall, cpu = time.perf_counter(), time.process_time()
    await fn()
    return Timed(time.perf_counter() - wall, time.process_time() - cpu)


def records(rows: list[Order]) -> list[ExternalRecord]:
    """Order ``i`` as the retired result of source partition ``i % 4`` at offset ``i // 4``."""
    n = len(SOURCES)
    return [ExternalRecord("bench", SOURCES[i % n], i // n, str(r.id), r, 1.7e9 + i)
            for i, r in enumerate(rows)]


def batches(rows: list[Order], size: int) -> list[list[Order]]:
    return [rows[i:i + size] for i in range(0, len(rows), size)]


def write_tables(tables: list[pa.Table], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for n, table in enumerate(tables):
        pq.write_table(table, directory / f"part-{n}.parquet", compression="snappy")


def convert_and_write(rows: list[Order], size: int, directory: Path) -> None:
    schema = RowSchema(Order)
    directory.mkdir(parents=True, exist_ok=True)
    for n, batch in enumerate(batches(rows, size)):
        pq.write_table(schema.to_table(batch), directory / f"part-{n}.parquet",
                       compression="snappy")


def make_sink(kind: str, directory: Path, batch_rows: int, batch_interval: float) -> Sink:
    """The sink under test, partitioned by region, its values checked upstream (as the
    DSL wires it)."""
    sink: Sink
    if kind == "parquet":
        sink = ParquetSink(directory / "parquet", Order, engine="pyarrow", batch_rows=batch_rows,
                           batch_interval=batch_interval, partition_by=("region",))
    elif kind == "delta":
        sink = DeltaSink(directory / "delta", Order, batch_rows=batch_rows,
                         batch_interval=batch_interval, partition_by=("region",))
    else:
        sink = IcebergSink("bench.orders", Order, warehouse=directory / "iceberg",
                           batch_rows=batch_rows, batch_interval=batch_interval,
                           partition_by=("region",))
    sink.validated_upstream = True
    return sink


async def drive(sink: Sink, recs: list[ExternalRecord]) -> None:
    """What the worker does: add retired results, flush when backlogged, and at the end."""
    for start in range(0, len(recs), CHUNK):
        for r in recs[start:start + CHUNK]:
            sink.add(r)
        if sink.backlogged:
            await sink.flush()
    await sink.flush()


async def run_sink(kind: str, rows: list[Order], batch_rows: int, directory: Path) -> Timed:
    sink = make_sink(kind, directory, batch_rows, batch_interval=3600.0)
    await sink.start()
    recs = records(rows)
    took = await timed_async(lambda: drive(sink, recs))
    await sink.stop()
    check_durable(sink, recs, kind)
    return took


def check_durable(sink: Sink, recs: list[ExternalRecord], kind: str) -> None:
    assert sink.metrics.rows_written == len(recs), (kind, sink.metrics)
    lasts: dict[TopicPartition, int] = {}
    for r in recs:
        lasts[r.source] = r.offset
    for source, last in lasts.items():
        assert sink.durable_offset(source) == last, (kind, source, sink.durable_offset(source))


async def run_pipeline(kind: str | None, rows: list[Order], directory: Path) -> Timed:
    """memory:// topic → DSL → sink (``kind``; None: ``foreach``, no sink): seconds from the
    app's start until every offset is durable in the table (None: every record processed)."""
    name = f"bench-{kind or 'none'}-{directory.name}"
    app = App(name, broker=f"memory://{name}", commit_interval_ms=1000)
    topic = app.topic("orders", key=str, value=Order, partitions=len(SOURCES))
    stream = app.stream(topic)
    sink: Sink | None = None
    options: dict[str, Any] = {"partition_by": ["region"], "batch_interval": 1.0}
    if kind == "parquet":
        sink = stream.to_parquet(directory / "parquet", Order, engine="pyarrow", **options)
    elif kind == "delta":
        sink = stream.to_delta(directory / "delta", Order, **options)
    elif kind == "iceberg":
        sink = stream.to_iceberg("bench.orders", Order, warehouse=directory / "iceberg",
                                 **options)
    else:
        seen = 0
        all_seen = asyncio.Event()

        def count(key: Any, value: Any) -> None:
            nonlocal seen
            seen += 1
            if seen == len(rows):
                all_seen.set()

        stream.foreach(count)
    async with app.producer() as producer:
        for order in rows:
            await producer.send(topic, key=str(order.id), value=order)
    ends: dict[TopicPartition, int] = {}
    durable = asyncio.Event()

    def caught_up() -> bool:
        assert sink is not None
        return all((sink.durable_offset(tp) or -1) >= last for tp, last in ends.items())

    if sink is not None:
        flush = sink.flush

        async def flush_and_look() -> None:  # the worker calls sink.flush: watch it land
            await flush()
            if ends and caught_up():
                durable.set()

        sink.flush = flush_and_look  # type: ignore[method-assign]

    async def until_done() -> None:
        async with app:
            if sink is None:
                await all_seen.wait()
                return
            if not ends:
                consumer = app.transport.consumer(None)
                await consumer.start()
                try:
                    found = await consumer.end_offsets(
                        [TopicPartition("orders", p) for p in range(len(SOURCES))])
                finally:
                    await consumer.stop()
                ends.update({tp: end - 1 for tp, end in found.items() if end})
            if not caught_up():
                await durable.wait()

    took = await timed_async(until_done)
    if sink is not None:
        assert sink.metrics.rows_written == len(rows), (kind, sink.metrics)
    return took


async def profile(kind: str, rows: list[Order], batch_rows: int, directory: Path,
                  top: int) -> str:
    """cProfile of one run of ``kind``: the event loop thread and the writer thread."""
    loop_profile, writer_profile = cProfile.Profile(), cProfile.Profile()
    call_on_spark_thread(writer_profile.enable)
    loop_profile.enable()
    try:
        await run_sink(kind, rows, batch_rows, directory)
    finally:
        loop_profile.disable()
        call_on_spark_thread(writer_profile.disable)
    out = io.StringIO()
    for title, prof in (("event loop thread", loop_profile),
                        ("writer thread (aiostreams-spark)", writer_profile)):
        out.write(f"--- {kind} sink, {title}: top {top} by cumulative time\n")
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


async def history(kind: str, batches: int, size: int, directory: Path,
                  window: int = 25) -> dict[str, float]:
    """CPU ms per ``flush()`` of ``size`` rows, the mean of the first ``window`` batches and
    of the last ``window`` of ``batches``: how a commit's cost grows with the table's
    history (snapshots, log entries, files)."""
    recs = records(make_rows(batches * size))
    sink = make_sink(kind, directory, size, batch_interval=3600.0)
    await sink.start()
    cpu: list[float] = []
    for n in range(batches):
        for r in recs[n * size:(n + 1) * size]:
            sink.add(r)
        began = time.process_time()
        await sink.flush()
        cpu.append(time.process_time() - began)
    await sink.stop()
    window = min(window, batches)
    return {"first_ms": statistics.mean(cpu[:window]) * 1000,
            "last_ms": statistics.mean(cpu[-window:]) * 1000}


def median(samples: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(s[k] for s in samples) for k in samples[0]}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    rows = make_rows(args.rows)
    out: dict[str, Any] = {"rows": args.rows, "rounds": args.rounds,
                           "load_average_at_start": os.getloadavg()[0], "cases": {}}
    with tempfile.TemporaryDirectory(prefix="sink-throughput-") as tmp:
        root = Path(tmp)
        warm = rows[: min(len(rows), min(args.batch_rows) * 2)]
        write_tables([RowSchema(Order).to_table(warm)], root / "warm" / "baseline")
        for kind in args.sinks:  # untimed: imports, pyarrow's and pyiceberg's caches
            await run_sink(kind, warm, min(args.batch_rows), root / "warm" / kind)
        for size in args.batch_rows:
            tables = [RowSchema(Order).to_table(b) for b in batches(rows, size)]
            samples: dict[str, list[dict[str, float]]] = {}
            for round_ in range(args.rounds):
                here = root / f"b{size}-r{round_}"
                cases: dict[str, Timed] = {
                    "write_table": timed(partial(write_tables, tables, here / "floor")),
                    "to_table+write": timed(
                        partial(convert_and_write, rows, size, here / "convert"))}
                for kind in args.sinks:
                    cases[kind] = await run_sink(kind, rows, size, here)
                for case, took in cases.items():
                    samples.setdefault(case, []).append(took.figures(args.rows))
            figures = {case: median(s) for case, s in samples.items()}
            for fig in figures.values():
                fig["x_to_table_write"] = (fig["rows_per_s"]
                                           / figures["to_table+write"]["rows_per_s"])
                fig["x_write_table"] = fig["rows_per_s"] / figures["write_table"]["rows_per_s"]
            out["cases"][str(size)] = figures
        if args.pipeline_rows:
            prows = rows[: args.pipeline_rows]
            pipeline: dict[str, dict[str, float]] = {}
            for kind in (None, *args.sinks):
                took = await run_pipeline(kind, prows, root / f"pipeline-{kind or 'none'}")
                pipeline[kind or "foreach (no sink)"] = took.figures(len(prows))
            out["pipeline"] = {"rows": len(prows), "cases": pipeline}
        if args.history_batches:
            out["history"] = {"batches": args.history_batches, "rows": args.history_rows,
                              "cases": {kind: await history(kind, args.history_batches,
                                                            args.history_rows,
                                                            root / f"history-{kind}")
                                        for kind in args.sinks}}
        out["load_average_at_end"] = os.getloadavg()[0]
        if args.profile:
            out["profile"] = await profile(args.profile, rows, max(args.batch_rows),
                                           root / "profile", args.profile_top)
    return out


def print_table(out: dict[str, Any]) -> None:
    print(f"{out['rows']:,} rows, median of {out['rounds']} round(s); load average "
          f"{out['load_average_at_start']:.1f} at start, {out['load_average_at_end']:.1f} at "
          f"end ({os.cpu_count()} cores: rows/s is wall clock, CPU µs/row is not)")
    print("| batch rows | writer | rows/s | x to_table+write | x write_table | CPU µs/row |")
    print("|---|---|---|---|---|---|")
    for size, figures in out["cases"].items():
        for case, fig in figures.items():
            print(f"| {int(size):,} | {case} | {fig['rows_per_s']:,.0f} | "
                  f"{fig['x_to_table_write']:.2f} | {fig['x_write_table']:.2f} | "
                  f"{fig['cpu_us_per_row']:.1f} |")
    if "pipeline" in out:
        pipeline = out["pipeline"]
        print(f"\nwhole pipeline (memory:// → DSL → sink), {pipeline['rows']:,} rows")
        print("| pipeline | rows/s | CPU µs/row |")
        print("|---|---|---|")
        for case, fig in pipeline["cases"].items():
            print(f"| {case} | {fig['rows_per_s']:,.0f} | {fig['cpu_us_per_row']:.1f} |")


def print_history(out: dict[str, Any]) -> None:
    growth = out["history"]
    print(f"\nCPU ms per flush as the table's history grows ({growth['batches']} batches of "
          f"{growth['rows']} rows; mean of the first 25 and the last 25)")
    print("| sink | first | last |")
    print("|---|---|---|")
    for kind, fig in growth["cases"].items():
        print(f"| {kind} | {fig['first_ms']:.1f} | {fig['last_ms']:.1f} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch-rows", type=int, nargs="+", default=[10_000, 50_000, 200_000])
    parser.add_argument("--sinks", nargs="+", default=list(SINKS), choices=SINKS)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--pipeline-rows", type=int, default=200_000,
                        help="rows through the whole pipeline per sink (0: skip)")
    parser.add_argument("--history-batches", type=int, default=400,
                        help="batches for the commit-cost-over-history table (0: skip)")
    parser.add_argument("--history-rows", type=int, default=100,
                        help="rows per batch of that table")
    parser.add_argument("--profile", choices=SINKS, default=None)
    parser.add_argument("--profile-top", type=int, default=25)
    args = parser.parse_args(argv)
    if args.rows < 1 or args.rounds < 1 or min(args.batch_rows) < 1:
        parser.error("--rows, --rounds and --batch-rows must be >= 1")
    out = asyncio.run(main_async(args))
    print_table(out)
    if "history" in out:
        print_history(out)
    if "profile" in out:
        print(out.pop("profile"))
    print(json.dumps(rounded(out)))


def rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


if __name__ == "__main__":
    main()
