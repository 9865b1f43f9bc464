"""Reads an Iceberg table with Spark (Iceberg's Spark runtime from Maven Central, in a process
of its own: a JVM takes its packages only at start) and prints, as the last line of stdout,
JSON ``{"pairs": [[partition, offset], ...], "since": n}``: every row's source partition and
offset, and how many rows Spark's incremental read returns after snapshot ``start`` (the
appends that came later).

    python iceberg_spark_reader.py <metadata.json location> <start snapshot id>

Spark loads the table from its metadata file (no catalog needed to read)."""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

ICEBERG_SPARK = "org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.0"

if __name__ == "__main__":
    location, start = sys.argv[1], sys.argv[2]
    spark = (SparkSession.builder.master("local[1]").appName("iceberg-reader")
             .config("spark.driver.memory", "512m").config("spark.ui.enabled", "false")
             .config("spark.jars.packages", ICEBERG_SPARK).getOrCreate())
    try:
        rows = spark.read.format("iceberg").load(location).select("partition", "offset")
        pairs = [[int(r[0]), int(r[1])] for r in rows.collect()]
        since = (spark.read.format("iceberg").option("start-snapshot-id", start)
                 .load(location).count())
    finally:
        spark.stop()
    print(json.dumps({"pairs": pairs, "since": since}))
