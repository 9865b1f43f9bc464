"""The Spark backend of the lake sinks: the process's one SparkSession
(:mod:`~aiostreams.sinks.spark.session`), the writer thread every sink's blocking writes run
on (:mod:`~aiostreams.sinks.spark.spark_thread`), Delta through Spark
(:mod:`~aiostreams.sinks.spark.delta_spark`), Spark's errors made readable, and the
scale-out path, a Structured Streaming job reading Kafka directly
(:mod:`~aiostreams.sinks.spark.structured`, imported on demand).

Only these modules import pyspark (lazily); the sinks above them work without a JVM where
their format allows (Delta through delta-rs, Parquet through pyarrow).
"""
