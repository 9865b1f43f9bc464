"""The PySpark bridge: results to Parquet, durable before commit, exactly once.

* :class:`DeltaSink` + :func:`add_delta_sink`: a Delta Lake table as an external sink (the
  recommended format for new tables: one Delta commit per batch, idempotent by source offsets,
  exactly once for every Delta reader); :class:`TableIdentityError` when the table (or a
  Parquet dataset) belongs to another app, source, or incarnation of a source topic.
* :class:`ParquetSink` + :func:`add_parquet_sink`: a Parquet dataset as an external sink of an
  app (Spark or pyarrow writes, a commit log beside the data, replays dropped).
* :class:`RowSchema`: the Arrow schema of a pydantic model, and batches as Arrow tables.
* :class:`SparkConfig`, :func:`get_session`, :func:`stop_session`: the process's one
  SparkSession.
* :func:`committed_files`: the files a dataset's commit log lists.
* :class:`UnreachableFilesError` (executors wrote where the driver cannot read) and
  :class:`IncompatibleSchemaError` (the model no longer fits the dataset): the sink's loud
  refusals.
* :mod:`aiostreams.spark.structured`: the scale-out path, a Spark Structured Streaming job
  reading Kafka directly (imported on demand).

Requires the ``spark`` extra (``pyspark``, ``pyarrow``, ``deltalake``).
"""

from aiostreams.spark.attach import ParquetValidator, add_delta_sink, add_parquet_sink
from aiostreams.spark.commit_log import DatasetLockedError, DatasetOwnerError, committed_files
from aiostreams.spark.delta_identity import TableIdentityError
from aiostreams.spark.delta_sink import DeltaSink, DeltaStep
from aiostreams.spark.parquet_sink import FlushStep, ParquetSink
from aiostreams.spark.parquet_writer import UnreachableFilesError
from aiostreams.spark.schema import RowSchema, SchemaMismatch, to_spark_schema
from aiostreams.spark.schema_evolution import IncompatibleSchemaError
from aiostreams.spark.session import SparkConfig, get_session, stop_session
from aiostreams.spark.sink_state import SinkFailedError, SinkMetrics, SinkState

__all__ = [
    "DatasetLockedError",
    "DatasetOwnerError",
    "DeltaSink",
    "DeltaStep",
    "FlushStep",
    "IncompatibleSchemaError",
    "ParquetSink",
    "ParquetValidator",
    "RowSchema",
    "SchemaMismatch",
    "SinkFailedError",
    "SinkMetrics",
    "SinkState",
    "SparkConfig",
    "TableIdentityError",
    "UnreachableFilesError",
    "add_delta_sink",
    "add_parquet_sink",
    "committed_files",
    "get_session",
    "stop_session",
    "to_spark_schema",
]
