"""The scale-out path: a Spark Structured Streaming job from a Kafka topic to Parquet.

Where one aiostreams process is not enough, or the dataset lives on an object store, Spark
itself reads the topic (its Kafka source, ``spark-sql-kafka-0-10``), parses each value as JSON
into the model's schema (the same :class:`~aiostreams.spark.schema.RowSchema` the Parquet
sink uses), and writes Parquet with its file sink. Exactly once comes from Spark's checkpoint
(the Kafka offsets of each micro-batch) and its ``_spark_metadata`` log (the files of each
committed batch), which Spark's readers honour.

::

    run_structured_job("127.0.0.1:9092", "orders", "/data/orders", Order, "/data/orders.ckpt")

    python -m aiostreams.spark.structured --bootstrap 127.0.0.1:9092 --topic orders \\
        --path /data/orders --model shop.models:Order --checkpoint /data/orders.ckpt

The connector is ``org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark's version>``, resolved
at session start through ``spark.jars.packages`` (``~/.m2`` first, then Maven Central). If that
version is not published, pass ``connector_version`` (``--connector-version``); see
:func:`kafka_connector_config`.

Values are parsed with ``mode=FAILFAST``: a value that is not JSON of the model stops the
query with Spark's error (nothing of that micro-batch is committed), never a half-null row.
``bytes`` fields must be base64 in the JSON (``ser_json_bytes="base64"`` on the model).

The session is the process's one SparkSession (:mod:`aiostreams.spark.session`); the job
blocks the calling thread, so run it from a thread or its own process, not an event loop.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from aiostreams.errors import ConfigError
from aiostreams.spark.schema import METADATA_COLUMNS, RowSchema, to_spark_schema
from aiostreams.spark.session import SparkConfig, get_session

__all__ = ["StructuredRun", "kafka_connector", "kafka_connector_config", "main",
           "run_structured_job"]

log = logging.getLogger("aiostreams.spark")

CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"


def kafka_connector(version: str | None = None) -> str:
    """Maven coordinates of Spark's Kafka source; ``version`` defaults to pyspark's (the
    connector must match the Spark it runs in)."""
    if version is None:
        import pyspark

        version = pyspark.__version__
    return f"{CONNECTOR}:{version}"


def kafka_connector_config(base: SparkConfig | None = None, *,
                           connector_version: str | None = None,
                           exclude: Sequence[str] = (),
                           jars: Sequence[str] = ()) -> SparkConfig:
    """``base`` (default :class:`SparkConfig`) plus the Kafka connector in
    ``spark.jars.packages``. ``exclude`` (``group:artifact``) and ``jars`` (local jar paths)
    work around a connector whose transitive dependencies are not published."""
    base = base or SparkConfig()
    missing = [jar for jar in jars if not Path(jar).is_file()]
    if missing:
        raise ConfigError(f"jar(s) {missing} do not exist (Spark would skip them silently)")
    conf = dict(base.conf)
    if exclude:
        conf["spark.jars.excludes"] = ",".join(exclude)
    if jars:
        conf["spark.jars"] = ",".join(jars)
    return base.model_copy(update={
        "packages": (*base.packages, kafka_connector(connector_version)), "conf": conf})


@dataclass(frozen=True)
class StructuredRun:
    """What a run of the job did: micro-batches and input rows, from Spark's progress."""

    batches: int
    input_rows: int
    seconds: float


def run_structured_job(
    bootstrap: str,
    topic: str,
    path: str,
    model: type[BaseModel],
    checkpoint: str,
    *,
    trigger_once: bool = True,
    processing_time: float | None = None,
    timeout: float | None = None,
    partition_by: Sequence[str] = (),
    include: Sequence[str] = (),
    starting_offsets: str = "earliest",
    spark: SparkConfig | None = None,
    connector_version: str | None = None,
    kafka_options: dict[str, str] | None = None,
) -> StructuredRun:
    """Read ``topic`` from the Kafka cluster at ``bootstrap`` and append its values (JSON of
    ``model``) to the Parquet dataset at ``path``, with Spark's checkpoint at
    ``checkpoint``. ``trigger_once``: process what is in the topic now, then return
    (Spark's ``availableNow``); else ``processing_time`` seconds per micro-batch, until
    ``timeout`` seconds have passed (forever if None). Blocks. ``spark``: the session config;
    the connector (``connector_version``, default pyspark's) is added unless ``spark``
    already lists it (see :func:`kafka_connector_config`). Raises :class:`ConfigError` for
    bad arguments and if another session already runs in this process without the
    connector."""
    if trigger_once == (processing_time is not None):
        raise ConfigError("choose trigger_once=True or processing_time=<seconds> (and "
                          "trigger_once=False)")
    if processing_time is not None and processing_time <= 0:
        raise ConfigError(f"processing_time must be > 0 seconds, got {processing_time}")
    schema = RowSchema(model, include=include)
    for column in partition_by:
        if column not in schema.column_names:
            raise ConfigError(f"partition_by: {column!r} is not a column of {schema.column_names}")
    config = spark or SparkConfig()
    if not any(p.startswith(CONNECTOR + ":") for p in config.packages):
        config = kafka_connector_config(config, connector_version=connector_version)
    session = _start(config)
    query = _start_query(session, bootstrap, topic, path, schema, checkpoint,
                         trigger_once=trigger_once, processing_time=processing_time,
                         partition_by=partition_by, starting_offsets=starting_offsets,
                         kafka_options=kafka_options or {})
    started = time.monotonic()
    try:
        if trigger_once or timeout is None:
            query.awaitTermination()
        else:
            query.awaitTermination(timeout)
    finally:
        if query.isActive:
            query.stop()
    progress = [p for p in query.recentProgress if p is not None]
    error = query.exception()
    if error is not None:
        raise RuntimeError(f"the Structured Streaming query from {topic!r} to {path} failed: "
                           f"{error}")
    return StructuredRun(batches=sum(1 for p in progress if p.get("numInputRows", 0) > 0),
                         input_rows=sum(int(p.get("numInputRows", 0)) for p in progress),
                         seconds=time.monotonic() - started)


def _start(config: SparkConfig) -> Any:
    try:
        return get_session(config)
    except RuntimeError as e:
        raise RuntimeError(
            f"{e}\nIf Spark's log above says 'unresolved dependency', the Kafka connector "
            f"({', '.join(config.packages)}) or one of its dependencies is neither in ~/.m2 nor "
            "on Maven Central: pass connector_version= (--connector-version) of a published "
            "connector of your Spark line") from e


def _start_query(spark: Any, bootstrap: str, topic: str, path: str, schema: RowSchema,
                 checkpoint: str, *, trigger_once: bool, processing_time: float | None,
                 partition_by: Sequence[str], starting_offsets: str,
                 kafka_options: dict[str, str]) -> Any:
    from pyspark.sql import functions as F

    value_schema = to_spark_schema(_model_part(schema))
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", starting_offsets))
    for key, value in kafka_options.items():
        reader = reader.option(key, value)
    raw = reader.load()
    parsed = F.from_json(F.col("value").cast("string"), value_schema, {"mode": "FAILFAST"})
    columns = [parsed.alias("v")]
    sources = {"key": F.col("key").cast("string"), "topic": F.col("topic"),
               "partition": F.col("partition"), "offset": F.col("offset"),
               "timestamp": F.col("timestamp")}
    for column in schema.include:
        columns.append(sources[column].alias(schema.metadata_names[column]))
    rows = raw.select(*columns).select("v.*", *[schema.metadata_names[c]
                                                for c in schema.include])
    writer = (rows.writeStream.format("parquet")
              .option("path", path)
              .option("checkpointLocation", checkpoint)
              .outputMode("append"))
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    if trigger_once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{processing_time} seconds")
    return writer.start()


def _model_part(schema: RowSchema) -> Any:
    import pyarrow as pa

    names = set(schema.metadata_names.values())
    return pa.schema([f for f in schema.arrow_schema if f.name not in names])


def _load_model(spec: str) -> type[BaseModel]:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"--model takes module:Class, got {spec!r}")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"--model {spec}: {e}") from None
    if not (isinstance(target, type) and issubclass(target, BaseModel)):
        raise ConfigError(f"--model {spec} is not a pydantic BaseModel subclass")
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aiostreams.spark.structured",
        description="Kafka topic (JSON values of a pydantic model) to Parquet, with Spark "
                    "Structured Streaming.")
    parser.add_argument("--bootstrap", required=True, help="host:port[,host:port]")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--path", required=True, help="the Parquet dataset (any Spark path)")
    parser.add_argument("--model", required=True, help="module:Class of the values")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--processing-time", type=float, default=None,
                        help="seconds per micro-batch; default: process what is there, exit")
    parser.add_argument("--timeout", type=float, default=None,
                        help="with --processing-time: stop after this many seconds")
    parser.add_argument("--partition-by", nargs="*", default=[])
    parser.add_argument("--include", nargs="*", default=[], choices=METADATA_COLUMNS)
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--connector-version", default=None,
                        help="spark-sql-kafka version (default: pyspark's)")
    parser.add_argument("--exclude-package", action="append", default=[],
                        help="group:artifact to leave out of the connector's dependencies")
    parser.add_argument("--jar", action="append", default=[], help="an extra local jar")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        model = _load_model(args.model)
        base = SparkConfig(master=args.master, driver_memory=args.driver_memory,
                           app_name=f"aiostreams-structured-{args.topic}")
        config = kafka_connector_config(base, connector_version=args.connector_version,
                                        exclude=args.exclude_package, jars=args.jar)
        run = run_structured_job(
            args.bootstrap, args.topic, args.path, model, args.checkpoint,
            trigger_once=args.processing_time is None, processing_time=args.processing_time,
            timeout=args.timeout, partition_by=args.partition_by, include=args.include,
            starting_offsets=args.starting_offsets, spark=config)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"batches": run.batches, "input_rows": run.input_rows,
                      "seconds": round(run.seconds, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
