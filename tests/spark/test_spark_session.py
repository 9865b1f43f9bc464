"""One SparkSession per process, configured for local use; the bridge's public names."""

from __future__ import annotations

from typing import Any

import pytest

import aiostreams.sinks
from aiostreams import ConfigError
from aiostreams.sinks import SparkConfig, get_session
from aiostreams.sinks.spark.structured import kafka_connector, kafka_connector_config

pytestmark = pytest.mark.spark


def test_the_running_session_is_shared_and_another_config_is_refused(spark: Any) -> None:
    assert get_session() is spark
    with pytest.raises(ConfigError, match="one session per process"):
        get_session(SparkConfig(master="local[1]", app_name="other"))


def test_local_sessions_bind_to_loopback_without_ui_and_write_utc_micros(spark: Any) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.ui.enabled") == "false"
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert spark.conf.get("spark.sql.parquet.outputTimestampType") == "TIMESTAMP_MICROS"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    # createDataFrame(arrow_table) builds an RDD, never a driver-side LocalRelation
    assert spark.conf.get("spark.sql.execution.arrow.localRelationThreshold") == "0"


def test_cluster_masters_pass_through_and_unknown_ones_are_refused() -> None:
    conf = SparkConfig(master="spark://10.0.0.5:7077", conf={"spark.executor.cores": "4"})
    settings = conf.spark_conf()
    assert settings["spark.master"] == "spark://10.0.0.5:7077"
    assert "spark.driver.bindAddress" not in settings
    assert settings["spark.executor.cores"] == "4"
    with pytest.raises(ValueError, match="local\\[N\\]"):
        SparkConfig(master="locl[2]")


def test_the_kafka_connector_is_exactly_pysparks_version(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import pyspark

    connector = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
    assert kafka_connector() == connector
    base = SparkConfig(packages=("io.delta:delta-spark_2.13:4.0.0",))
    assert kafka_connector_config(base).packages == (*base.packages, connector)
    assert kafka_connector_config(SparkConfig(packages=(connector,))).packages == (connector,)
    with pytest.raises(ConfigError, match="must match pyspark's version"):
        kafka_connector_config(SparkConfig(
            packages=("org.apache.spark:spark-sql-kafka-0-10_2.13:3.5.0",)))
    monkeypatch.setattr(pyspark, "__version__", "4.1.0.dev0")
    with pytest.raises(ConfigError, match="not a release"):
        kafka_connector()


def test_the_pinned_pyspark_is_the_one_installed() -> None:
    """The connector resolves for the version pyproject.toml pins; a different pyspark would
    fail the Structured Streaming job at session start."""
    import tomllib
    from pathlib import Path

    import pyspark

    extras = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]["spark"]
    assert f"pyspark=={pyspark.__version__}" in extras, (
        f"pyspark {pyspark.__version__} is installed, the spark extra wants {extras}: "
        "pip install -e '.[spark]'")


def test_the_public_names_are_what_we_mean_to_export() -> None:
    assert sorted(aiostreams.sinks.__all__) == [
        "DatasetLockedError", "DatasetOwnerError", "DeltaSink", "DeltaStep", "ExternalRecord",
        "ExternalSink", "FlushStep",
        "IncompatibleSchemaError", "ParquetSink", "ParquetValidator", "RowSchema",
        "SchemaMismatch", "SinkFailedError", "SinkMetrics", "SinkState", "SparkConfig",
        "TableIdentityError", "TableMaintenance", "UnreachableFilesError", "add_delta_sink",
        "add_parquet_sink",
        "committed_files", "get_session", "stop_session", "to_spark_schema"]
