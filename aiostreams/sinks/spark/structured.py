"""The scale-out path: a Spark Structured Streaming job from a Kafka topic to Parquet.

Where one aiostreams process is not enough, or the dataset lives on an object store, Spark
itself reads the topic (its Kafka source, ``spark-sql-kafka-0-10``), parses each value as JSON
into the model's schema (the same :class:`~aiostreams.sinks.schema.RowSchema` the Parquet
sink uses), and writes Parquet with its file sink. Exactly once comes from Spark's checkpoint
(the Kafka offsets of each micro-batch) and its ``_spark_metadata`` log (the files of each
committed batch), which Spark's readers honour.

::

    run_structured_job("127.0.0.1:9092", "orders", "/data/orders", Order, "/data/orders.ckpt")

    python -m aiostreams.sinks.spark.structured --bootstrap 127.0.0.1:9092 --topic orders \\
        --path /data/orders --model shop.models:Order --checkpoint /data/orders.ckpt

The connector is ``org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark's version>``, always:
it is built against Spark's internal APIs, so it must be exactly the version of the Spark it
runs in (:func:`kafka_connector` derives it from ``pyspark.__version__``). It is resolved at
session start through ``spark.jars.packages`` (``~/.m2`` first, then Maven Central), with its
dependencies (``spark-token-provider-kafka-0-10``, ``kafka-clients``, ``commons-pool2``).
That is why the ``spark`` extra pins pyspark: when this was written, Maven Central had
``spark-sql-kafka-0-10`` up to 4.2.0 but ``spark-token-provider-kafka-0-10`` for 4.0.0 only,
so 4.0.0 is the newest Spark whose connector resolves completely. A pyspark without a
resolvable connector fails at session start with an error naming the coordinates.

The source reads with ``kafka.isolation.level=read_committed`` (:data:`DEFAULT_SOURCE_OPTIONS`)
unless the caller sets it: records of aborted transactions, which an ``exactly_once`` app
leaves behind whenever an attempt is killed or fenced, never reach the dataset. ``--option``
passes any other option of Spark's Kafka source, ``--conf`` a Spark setting, ``--packages``
more Maven packages (``hadoop-aws`` for ``s3a://``). ``--path`` and ``--checkpoint`` are
parsed strictly (:mod:`aiostreams.sinks.paths`; relative paths are made absolute here, not
left to Spark's default filesystem). Bad options, and a path Spark has no filesystem for,
end the command with one ``error:`` line and exit code 2.

Values are parsed with ``mode=FAILFAST``: a value that is not JSON of the model stops the
query with Spark's error (nothing of that micro-batch is committed), never a half-null row.
``bytes`` fields must be base64 in the JSON (``ser_json_bytes="base64"`` on the model).

The session is the process's one SparkSession (:mod:`aiostreams.sinks.spark.session`); the job
blocks the calling thread, so run it from a thread or its own process, not an event loop.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from aiostreams.errors import ConfigError
from aiostreams.sinks.paths import parse_table_path
from aiostreams.sinks.schema import METADATA_COLUMNS, RowSchema, to_spark_schema
from aiostreams.sinks.spark.session import SparkConfig, get_session
from aiostreams.sinks.spark.spark_errors import explain_setup_failure

__all__ = ["DEFAULT_SOURCE_OPTIONS", "StructuredRun", "kafka_connector",
           "kafka_connector_config", "main", "run_structured_job", "source_options"]

log = logging.getLogger("aiostreams.sinks")

CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"

ISOLATION_LEVEL = "kafka.isolation.level"
DEFAULT_SOURCE_OPTIONS = {ISOLATION_LEVEL: "read_committed"}
"""Options of Spark's Kafka source that the job sets unless the caller sets them: records of
aborted transactions (an ``exactly_once`` app's zombie or killed attempts) are never read."""

_RESERVED_OPTIONS = {
    "kafka.bootstrap.servers": "--bootstrap (bootstrap=)",
    "subscribe": "--topic (topic=)",
    "subscribePattern": "--topic (topic=)",
    "assign": "--topic (topic=)",
    "startingOffsets": "--starting-offsets (starting_offsets=)",
    "path": "--path (path=)",
    "checkpointLocation": "--checkpoint (checkpoint=)",
}


_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")


def kafka_connector() -> str:
    """Maven coordinates of Spark's Kafka source for the installed pyspark (the connector
    must be exactly the version of the Spark it runs in). Raises :class:`ConfigError` if
    pyspark's version is not a release (a dev or local build has no connector on Maven
    Central)."""
    import pyspark

    version = pyspark.__version__
    if not _RELEASE.match(version):
        raise ConfigError(
            f"pyspark {version} is not a release, so {CONNECTOR}:{version} is not on Maven "
            "Central; install a released pyspark (the spark extra pins the version whose "
            "connector resolves), or put the connector built with your Spark in ~/.m2")
    return f"{CONNECTOR}:{version}"


def kafka_connector_config(base: SparkConfig | None = None) -> SparkConfig:
    """``base`` (default :class:`SparkConfig`) with the Kafka connector of pyspark's version
    (:func:`kafka_connector`) in ``spark.jars.packages``. Raises :class:`ConfigError` if
    ``base`` already lists a connector of another version."""
    base = base or SparkConfig()
    connector = kafka_connector()
    listed = [p for p in base.packages if p.startswith(CONNECTOR + ":")]
    if any(p != connector for p in listed):
        raise ConfigError(
            f"SparkConfig.packages lists {listed}, but this Spark needs exactly {connector} "
            "(the connector must match pyspark's version); leave it out and it is added")
    if listed:
        return base
    return base.model_copy(update={"packages": (*base.packages, connector)})


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
    kafka_options: dict[str, str] | None = None,
) -> StructuredRun:
    """Read ``topic`` from the Kafka cluster at ``bootstrap`` and append its values (JSON of
    ``model``) to the Parquet dataset at ``path``, with Spark's checkpoint at
    ``checkpoint``. ``trigger_once``: process what is in the topic now, then return
    (Spark's ``availableNow``); else ``processing_time`` seconds per micro-batch, until
    ``timeout`` seconds have passed (forever if None). Blocks. ``spark``: the session config;
    the connector of pyspark's version is added to it (:func:`kafka_connector_config`).
    ``kafka_options``: options of Spark's Kafka source (``kafka.<consumer setting>``,
    ``maxOffsetsPerTrigger``, ...) over :data:`DEFAULT_SOURCE_OPTIONS`: the job reads with
    ``kafka.isolation.level=read_committed`` unless this sets it explicitly.
    Raises :class:`ConfigError` for bad arguments, for options or a path Spark refuses when
    the query starts (:class:`~aiostreams.sinks.spark.spark_errors.MissingFileSystemError` when
    Spark has no filesystem for the path's scheme), and if another session already runs in
    this process without the connector; :class:`RuntimeError` if the query fails later."""
    if trigger_once == (processing_time is not None):
        raise ConfigError("choose trigger_once=True or processing_time=<seconds> (and "
                          "trigger_once=False)")
    if processing_time is not None and processing_time <= 0:
        raise ConfigError(f"processing_time must be > 0 seconds, got {processing_time}")
    schema = RowSchema(model, include=include)
    for column in partition_by:
        if column not in schema.column_names:
            raise ConfigError(f"partition_by: {column!r} is not a column of {schema.column_names}")
    options = source_options(kafka_options or {})
    path, checkpoint = parse_table_path(path).uri, parse_table_path(checkpoint).uri
    config = kafka_connector_config(spark)
    session = _start(config)
    try:
        query = _start_query(session, bootstrap, topic, path, schema, checkpoint,
                             trigger_once=trigger_once, processing_time=processing_time,
                             partition_by=partition_by, starting_offsets=starting_offsets,
                             kafka_options=options)
    except Exception as e:  # Spark refused an option or the path: say which, on one line
        raise explain_setup_failure(e, path, _hadoop_version(session)) from e
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


def _hadoop_version(session: Any) -> str:
    try:
        return str(session.sparkContext._jvm.org.apache.hadoop.util.VersionInfo.getVersion())
    except Exception:  # the gateway is gone: the message still names the package
        return "<Spark's Hadoop version>"


def _start(config: SparkConfig) -> Any:
    try:
        return get_session(config)
    except RuntimeError as e:
        connector = kafka_connector()
        raise RuntimeError(
            f"{e}\nIf Spark's log above says 'unresolved dependency', {connector} (which must "
            "match pyspark's version) or one of its dependencies is neither in ~/.m2 nor on "
            "Maven Central. Install the pyspark version that aiostreams' spark extra pins "
            "(pyproject.toml): its connector resolves. If it lists FAILED DOWNLOADS of jars "
            "under ~/.m2, those directories hold a pom without its jar (Spark does not fall "
            "back to Maven Central then): fetch each with mvn dependency:get "
            "-Dartifact=group:artifact:version, or delete the directory") from e


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


def source_options(options: dict[str, str]) -> dict[str, str]:
    """The Kafka source's options: ``options`` over :data:`DEFAULT_SOURCE_OPTIONS` (so
    ``kafka.isolation.level`` is ``read_committed`` unless set explicitly). Raises
    :class:`ConfigError` for a key the job sets from its own arguments, or an unknown
    isolation level."""
    for key in options:
        if key in _RESERVED_OPTIONS:
            raise ConfigError(f"option {key!r} is set by the job itself; use "
                              f"{_RESERVED_OPTIONS[key]} instead")
    merged = {**DEFAULT_SOURCE_OPTIONS, **options}
    level = merged[ISOLATION_LEVEL]
    if level not in ("read_committed", "read_uncommitted"):
        raise ConfigError(f"option {ISOLATION_LEVEL}={level!r}: use read_committed (the "
                          "default: aborted transactions are never read) or read_uncommitted")
    return merged


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


def _key_values(pairs: Sequence[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{flag} takes key=value, got {pair!r}")
        out[key.strip()] = value
    return out


def _packages(values: Sequence[str]) -> tuple[str, ...]:
    out = tuple(p.strip() for value in values for p in value.split(",") if p.strip())
    for package in out:
        if package.count(":") != 2 or not all(package.split(":")):
            raise ConfigError(f"--packages takes Maven coordinates group:artifact:version, "
                              f"got {package!r}")
    return out


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m aiostreams.sinks.spark.structured",
        description="Kafka topic (JSON values of a pydantic model) to Parquet, with Spark "
                    "Structured Streaming. Reads committed records only (aborted "
                    "transactions are skipped) unless --option kafka.isolation.level="
                    "read_uncommitted.")
    parser.add_argument("--bootstrap", required=True, help="host:port[,host:port]")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--path", required=True,
                        help="the Parquet dataset: /abs, relative, file:///abs, hdfs://..., "
                             "s3a://bucket/...")
    parser.add_argument("--model", required=True, help="module:Class of the values")
    parser.add_argument("--checkpoint", required=True, help="Spark's checkpoint (same forms)")
    parser.add_argument("--processing-time", type=float, default=None,
                        help="seconds per micro-batch; default: process what is there, exit")
    parser.add_argument("--timeout", type=float, default=None,
                        help="with --processing-time: stop after this many seconds")
    parser.add_argument("--partition-by", nargs="*", default=[])
    parser.add_argument("--include", nargs="*", default=[], choices=METADATA_COLUMNS)
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="an option of Spark's Kafka source (repeatable), e.g. "
                             "kafka.security.protocol=SSL or maxOffsetsPerTrigger=10000")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting (repeatable), e.g. "
                             "spark.hadoop.fs.s3a.endpoint=http://127.0.0.1:9000")
    parser.add_argument("--packages", action="append", default=[],
                        metavar="GROUP:ARTIFACT:VERSION[,...]",
                        help="Maven packages for the session (repeatable), e.g. "
                             "org.apache.hadoop:hadoop-aws:3.4.1 for s3a://")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line. Exit 0 with a JSON summary on stdout; 2 with one ``error:`` line on
    stderr for bad arguments, options or paths (Spark's refusal included); 1 when Spark did
    not start or the query failed while running."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines follow our error
    try:
        model = _load_model(args.model)
        base = SparkConfig(master=args.master, driver_memory=args.driver_memory,
                           app_name=f"aiostreams-structured-{args.topic}",
                           packages=_packages(args.packages),
                           conf=_key_values(args.conf, "--conf"))
        config = kafka_connector_config(base)
        run = run_structured_job(
            args.bootstrap, args.topic, args.path, model, args.checkpoint,
            trigger_once=args.processing_time is None, processing_time=args.processing_time,
            timeout=args.timeout, partition_by=args.partition_by, include=args.include,
            starting_offsets=args.starting_offsets, spark=config,
            kafka_options=_key_values(args.option, "--option"))
    except (ConfigError, ValidationError) as e:
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # Spark did not start, or the query failed: Spark's log is above
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps({"batches": run.batches, "input_rows": run.input_rows,
                      "seconds": round(run.seconds, 3)}))
    return 0


def _one_line(error: Exception) -> str:
    if isinstance(error, ValidationError):  # a SparkConfig field: say which and why
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                         for e in error.errors())
    return " ".join(str(error).split())


if __name__ == "__main__":
    sys.exit(main())
