"""The Structured Streaming job reads a real Kafka topic and writes Parquet once per record,
across runs (Spark's checkpoint), through its command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sparkkit import create_topic, make_order, order_records, produce

from aiostreams.transport.kafka import KafkaTransport

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(600)]

HERE = Path(__file__).parent
REPO = HERE.parent.parent


def run_job(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(REPO)])}
    return subprocess.run([sys.executable, "-m", "aiostreams.spark.structured", *args],
                          capture_output=True, text=True, env=env, timeout=400, check=False)


async def test_structured_job_writes_each_kafka_record_once_across_runs(
        kafka_bootstrap: str, topic_name: object, tmp_path: Path) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    topic = topic_name("orders")  # type: ignore[operator]
    await create_topic(transport, topic, 2)
    await produce(transport, topic, order_records(range(2000)))
    path, checkpoint = tmp_path / "orders", tmp_path / "orders.ckpt"
    args = ["--bootstrap", kafka_bootstrap, "--topic", topic, "--path", str(path),
            "--model", "sparkkit:Order", "--checkpoint", str(checkpoint),
            "--partition-by", "region", "--include", "partition", "offset",
            "--master", "local[2]"]

    first = run_job(args)
    assert first.returncode == 0, first.stderr[-4000:]
    import pyspark

    # Spark's dependency resolution ran with the connector of pyspark's own version
    assert f"spark-sql-kafka-0-10_2.13;{pyspark.__version__} in" in first.stderr
    assert json.loads(first.stdout.splitlines()[-1])["input_rows"] == 2000

    await produce(transport, topic, order_records(range(2000, 2500)))
    second = run_job(args)
    assert second.returncode == 0, second.stderr[-4000:]
    assert json.loads(second.stdout.splitlines()[-1])["input_rows"] == 500

    import pyarrow.dataset as ds

    table = ds.dataset(path, format="parquet", partitioning="hive").to_table()
    assert sorted(table.column("id").to_pylist()) == list(range(2500))
    assert table.num_rows == len(set(zip(table.column("partition").to_pylist(),
                                         table.column("offset").to_pylist(), strict=True)))
    assert {p.name for p in path.iterdir() if p.is_dir() and not p.name.startswith("_")} == {
        "region=eu", "region=us", "region=apac"}
    assert (path / "_spark_metadata").is_dir()
    first_row = table.filter(ds.field("id") == 1).to_pylist()[0]
    assert first_row["placed_at"] == make_order(1).placed_at
    assert first_row["amount"] == make_order(1).amount
