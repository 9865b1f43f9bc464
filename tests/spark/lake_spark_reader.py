"""The downstream Spark job of docs/guides/spark.md ("The whole pipeline"), as a process the
test drives: it reads the Delta table and the Iceberg table aiostreams writes, incrementally,
one round per line on stdin.

    python lake_spark_reader.py CONFIG_JSON       # then, on stdin: "round" ... "last"

CONFIG_JSON: ``delta`` (the table's path), ``iceberg_db`` and ``iceberg_warehouse`` (the
sink's SQL catalog: ``<warehouse>/catalog.db`` and the warehouse's URI), ``iceberg_table``
(``namespace.table``), ``work`` (a directory for the job's outputs and checkpoints), and
optionally ``rest_uri``: a REST catalog holding ``lake.orders`` too, which Spark then reads
with Iceberg's streaming source (``rest`` in the rounds and in ``FINAL``).

Per ``round``: Delta's streaming source with ``trigger(availableNow=True)`` (every commit
not read yet, then stop: how a scheduled job reads a table incrementally; its checkpoint
remembers where it stopped), and Iceberg's incremental read of the appends between the last
snapshot the job read (kept in a file of its own) and the current one. Prints ``ROUND
{"delta": n, "iceberg": m}``: the rows Delta's stream read, and 1 if Iceberg had a new
snapshot (0 if not). ``last`` runs a round, then prints ``FINAL``: every (partition, offset)
pair of the Delta output, and every (partition, offset, after) of the Iceberg output
(``after``: the snapshot its round started after, 0 for the first), and ends.

Its own process: a JVM takes ``spark.jars.packages`` only when it starts. The code between
the ``--8<--`` marks is the guide's, word for word (tests/spark/test_lake_pipeline.py checks).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession


def session(config: dict[str, Any]) -> Any:
    """The guide's session, on ``local[2]`` with a test's small settings."""
    builder = (SparkSession.builder.master("local[2]").config("spark.driver.memory", "768m")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    if config.get("rest_uri"):
        rest_uri = config["rest_uri"]
        # --8<-- [start:rest_session]
        builder = (builder  # the sink's REST catalog, as Spark's catalog "lake"
                   .config("spark.sql.catalog.lake", "org.apache.iceberg.spark.SparkCatalog")
                   .config("spark.sql.catalog.lake.type", "rest")
                   .config("spark.sql.catalog.lake.uri", rest_uri))
        # --8<-- [end:rest_session]
    # --8<-- [start:session]
    spark = (builder.appName("orders-downstream")
             .config("spark.jars.packages", ",".join([
                 "io.delta:delta-spark_2.13:4.0.0",               # Delta for pyspark 4.0.0
                 "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.0"]))
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
             .config("spark.sql.catalog.spark_catalog",
                     "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .getOrCreate())
    # --8<-- [end:session]
    return spark


def delta_round(spark: Any, delta_table: str, work: str) -> int:
    # --8<-- [start:delta]
    query = (spark.readStream.format("delta").load(delta_table)    # each commit once
             .writeStream.format("delta")
             .option("checkpointLocation", f"{work}/checkpoints/orders-from-delta")
             .trigger(availableNow=True)                           # what is new, then stop
             .start(f"{work}/orders-from-delta"))
    query.awaitTermination()
    # --8<-- [end:delta]
    return sum(int(p["numInputRows"]) for p in query.recentProgress)


def iceberg_round(spark: Any, table_name: str, work: str, catalog_db: str,
                  warehouse: str) -> int:
    # --8<-- [start:iceberg]
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("aiostreams", uri=f"sqlite:///{catalog_db}", warehouse=warehouse)
    done = Path(work, "orders-from-iceberg.last-snapshot")       # the job's own checkpoint
    table = catalog.load_table(table_name)                       # the newest metadata
    current = table.current_snapshot()
    last = int(done.read_text()) if done.exists() else None
    if current is not None and current.snapshot_id != last:
        reader = spark.read.format("iceberg")
        if last is None:
            reader = reader.option("snapshot-id", current.snapshot_id)   # the table so far
        else:
            reader = (reader.option("start-snapshot-id", last)           # appends after it
                      .option("end-snapshot-id", current.snapshot_id))   # up to this one
        new = reader.load(table.metadata_location)
        # one directory per starting point, overwritten if a crash repeats the round
        new.write.mode("overwrite").parquet(f"{work}/orders-from-iceberg/after={last or 0}")
        done.write_text(str(current.snapshot_id))
    # --8<-- [end:iceberg]
    return int(current is not None and current.snapshot_id != last)  # (rows: see FINAL)


def rest_round(spark: Any, work: str) -> int:
    # --8<-- [start:rest_stream]
    query = (spark.readStream.format("iceberg").load("lake.lake.orders")  # each append once
             .writeStream.format("parquet")
             .option("checkpointLocation", f"{work}/checkpoints/orders-from-rest")
             .trigger(availableNow=True)
             .start(f"{work}/orders-from-rest"))
    query.awaitTermination()
    # --8<-- [end:rest_stream]
    return sum(int(p["numInputRows"]) for p in query.recentProgress)


def pairs(rows: Any) -> list[list[int]]:
    return [[int(r["partition"]), int(r["offset"])] for r in rows.collect()]


def main() -> None:
    config = json.loads(sys.argv[1])
    spark = session(config)
    work = config["work"]
    try:
        for line in sys.stdin:
            command = line.strip()
            counts = {"delta": delta_round(spark, config["delta"], work),
                      "iceberg": iceberg_round(spark, config["iceberg_table"], work,
                                               config["iceberg_db"],
                                               config["iceberg_warehouse"])}
            if config.get("rest_uri"):
                counts["rest"] = rest_round(spark, work)
            print("ROUND " + json.dumps(counts), flush=True)
            if command == "last":
                delta = spark.read.format("delta").load(f"{work}/orders-from-delta")
                iceberg = spark.read.parquet(f"{work}/orders-from-iceberg")
                print("FINAL " + json.dumps({
                    "delta": pairs(delta.select("partition", "offset")),
                    "iceberg": [[int(r["partition"]), int(r["offset"]), int(r["after"])]
                                for r in iceberg.select("partition", "offset", "after")
                                .collect()],
                    "rest": pairs(spark.read.parquet(f"{work}/orders-from-rest")
                                  .select("partition", "offset"))
                    if config.get("rest_uri") else []}), flush=True)
                return
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
