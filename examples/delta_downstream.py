"""Kafka → aiostreams → Delta → Spark Structured Streaming, exactly once end to end.

    python examples/delta_downstream.py                   # embedded default: memory:// broker
    python examples/delta_downstream.py --broker kafka://127.0.0.1:9092

1. an app reads ``orders``, keeps the positive ones, and writes them to a Delta table with
   ``stream.to_delta(...)`` (delta-rs; one Delta commit per batch carrying the source
   offsets, so a replay after a crash is a no-op), partitioned by region;
2. a Spark Structured Streaming job (Delta's jar from Maven Central) reads that table as a
   stream and keeps the total amount per region in a second Delta table; it runs a trigger
   after each round of orders, and its checkpoint makes each Delta commit count once;
3. the totals are compared with the orders produced: equal, whatever was replayed.

Needs the ``spark`` extra and Java. Its files live in a temporary directory (``--keep``
keeps it).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import aiostreams as ais

DELTA_PACKAGE = "io.delta:delta-spark_2.13:4.0.0"  # matches pyspark 4.0.0
REGIONS = ("eu", "us", "apac")


class Order(BaseModel):
    id: int
    region: str
    amount: float


def orders(first: int, count: int) -> list[Order]:
    return [Order(id=i, region=REGIONS[i % 3], amount=float(i % 50) - 5.0)
            for i in range(first, first + count)]


def build_app(broker: str, table: Path) -> tuple[ais.App, Any]:
    app = ais.App("delta-downstream", broker=broker, commit_interval_ms=200)
    source = app.topic("orders", key=str, value=Order, partitions=2)
    (app.stream(source)
        .filter(lambda key, order: order.amount > 0)
        .to_delta(table, Order, partition_by=["region"], batch_interval=0.5))
    return app, source


def spark_session() -> Any:
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master("local[2]").appName("delta-downstream")
            .config("spark.jars.packages", DELTA_PACKAGE)
            .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog",
                    "org.apache.spark.sql.delta.catalog.DeltaCatalog")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .getOrCreate())


def aggregate(spark: Any, table: Path, totals: Path, checkpoint: Path) -> None:
    """One trigger of the streaming aggregation: every new Delta commit of ``table``, once."""
    from pyspark.sql import functions as F

    stream = (spark.readStream.format("delta").load(str(table))
              .groupBy("region").agg(F.sum("amount").alias("total"),
                                     F.count("*").alias("orders")))
    query = (stream.writeStream.format("delta").outputMode("complete")
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start(str(totals)))
    query.awaitTermination()


async def run(args: argparse.Namespace, work: Path) -> None:
    table, totals = work / "orders", work / "totals"
    produced: list[Order] = []
    spark = await asyncio.to_thread(spark_session)
    app, source = build_app(args.broker, table)
    try:
        async with app, app.producer() as producer:
            for n in range(args.rounds):
                batch = orders(n * args.orders, args.orders)
                produced += batch
                for order in batch:
                    await producer.send(source, key=str(order.id), value=order)
                await app.wait_until_caught_up()  # every order of the round is in the table
                await asyncio.to_thread(aggregate, spark, table, totals, work / "checkpoint")
        rows = await asyncio.to_thread(
            lambda: spark.read.format("delta").load(str(totals)).collect())
        got = {r["region"]: (round(r["total"], 2), r["orders"]) for r in rows}
        kept = [o for o in produced if o.amount > 0]
        want = {region: (round(sum(o.amount for o in kept if o.region == region), 2),
                         sum(1 for o in kept if o.region == region)) for region in REGIONS}
        print(f"totals per region from Spark: {got}")
        print("exactly once end to end" if got == want else f"MISMATCH, expected {want}")
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", default="memory://")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--orders", type=int, default=3000, help="orders per round")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="aiostreams-delta-"))
    try:
        asyncio.run(run(args, work))
    finally:
        if args.keep:
            print(f"files kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
