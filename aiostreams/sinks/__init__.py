"""The lake: results to Delta and Parquet tables, durable before commit, exactly once.

* :class:`ExternalSink` and :class:`ExternalRecord`: the contract every sink keeps with the
  commit protocol (defined in :mod:`aiostreams.runtime.sink_contract`, so the engine can
  hold sinks without importing pyarrow or Spark).

* :class:`DeltaSink` + :func:`add_delta_sink`: a Delta Lake table as an external sink (the
  recommended format for new tables: one Delta commit per batch, idempotent by source offsets,
  exactly once for every Delta reader); :class:`TableIdentityError` when the table (or a
  Parquet dataset) belongs to another app, source, or incarnation of a source topic.
* :class:`ParquetSink` + :func:`add_parquet_sink`: a Parquet dataset as an external sink of an
  app (Spark or pyarrow writes, a commit log beside the data, replays dropped).
* :mod:`aiostreams.sinks.iceberg_sink`: ``IcebergSink`` + ``add_iceberg_sink``, an Apache
  Iceberg table through pyiceberg (one snapshot per batch, source offsets in its summary);
  not imported here, so this package needs no pyiceberg (the ``iceberg`` extra).
* :class:`TableMaintenance`: scheduled compaction and vacuum of a Delta or Iceberg sink's
  table (``maintenance=`` of ``to_delta``/``to_iceberg``; off by default).
* :class:`RowSchema`: the Arrow schema of a pydantic model, and batches as Arrow tables.
* :class:`SparkConfig`, :func:`get_session`, :func:`stop_session`: the process's one
  SparkSession.
* :func:`committed_files`: the files a dataset's commit log lists.
* :class:`UnreachableFilesError` (executors wrote where the driver cannot read) and
  :class:`IncompatibleSchemaError` (the model no longer fits the dataset): the sink's loud
  refusals.
* :mod:`aiostreams.sinks.spark` (the Spark backend) and
  :mod:`aiostreams.sinks.spark.structured`: the scale-out path, a Spark Structured Streaming job
  reading Kafka directly (imported on demand).

Requires the ``spark`` extra (``pyspark``, ``pyarrow``, ``deltalake``).
"""

from aiostreams.runtime.sink_contract import ExternalRecord, ExternalSink
from aiostreams.sinks.attach import ParquetValidator, add_delta_sink, add_parquet_sink
from aiostreams.sinks.commit_log import DatasetLockedError, DatasetOwnerError, committed_files
from aiostreams.sinks.delta_identity import TableIdentityError
from aiostreams.sinks.delta_sink import DeltaSink, DeltaStep
from aiostreams.sinks.maintenance import TableMaintenance
from aiostreams.sinks.parquet_sink import FlushStep, ParquetSink
from aiostreams.sinks.parquet_writer import UnreachableFilesError
from aiostreams.sinks.schema import RowSchema, SchemaMismatch, to_spark_schema
from aiostreams.sinks.schema_evolution import IncompatibleSchemaError
from aiostreams.sinks.sink_state import SinkFailedError, SinkMetrics, SinkState
from aiostreams.sinks.spark.session import SparkConfig, get_session, stop_session

__all__ = [
    "DatasetLockedError",
    "DatasetOwnerError",
    "DeltaSink",
    "DeltaStep",
    "ExternalRecord",
    "ExternalSink",
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
    "TableMaintenance",
    "UnreachableFilesError",
    "add_delta_sink",
    "add_parquet_sink",
    "committed_files",
    "get_session",
    "stop_session",
    "to_spark_schema",
]
