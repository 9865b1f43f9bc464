"""The Structured Streaming job reads a real Kafka topic and writes Parquet once per record,
across runs (Spark's checkpoint), through its command line; it reads committed records only,
and refuses bad options and paths with one line (issue 19, item 4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sparkkit import create_topic, make_order, order_records, produce

from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import OutgoingRecord

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(600)]

HERE = Path(__file__).parent
REPO = HERE.parent.parent


def run_job(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(REPO)])}
    return subprocess.run([sys.executable, "-m", "aiostreams.sinks.spark.structured", *args],
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


def read_ids(path: Path) -> list[int]:
    import pyarrow.dataset as ds

    return sorted(ds.dataset(path, format="parquet").to_table().column("id").to_pylist())


async def test_records_of_aborted_transactions_never_reach_the_dataset(
        kafka_bootstrap: str, topic_name: object, tmp_path: Path) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    topic = topic_name("orders")  # type: ignore[operator]
    await create_topic(transport, topic, 1)
    producer = transport.producer(transactional_id=topic_name("tx"))  # type: ignore[operator]
    await producer.start()
    try:
        for ids, commit in ((range(0, 300), True), (range(300, 500), False),
                            (range(500, 800), True), (range(800, 900), False)):
            await producer.begin_transaction()
            await producer.send_batch([OutgoingRecord(topic, k, v)
                                       for k, v in order_records(ids)])
            if commit:
                await producer.commit_transaction()
            else:
                await producer.abort_transaction()
    finally:
        await producer.stop()

    def args(name: str, *extra: str) -> list[str]:
        return ["--bootstrap", kafka_bootstrap, "--topic", topic, "--path",
                str(tmp_path / name), "--model", "sparkkit:Order", "--checkpoint",
                str(tmp_path / f"{name}.ckpt"), "--master", "local[1]", *extra]

    committed = run_job(args("committed"))
    assert committed.returncode == 0, committed.stderr[-4000:]
    assert read_ids(tmp_path / "committed") == [*range(300), *range(500, 800)]
    # the default is only a default: an explicit option wins (and shows the test can tell)
    everything = run_job(args("everything", "--option",
                              "kafka.isolation.level=read_uncommitted"))
    assert everything.returncode == 0, everything.stderr[-4000:]
    assert read_ids(tmp_path / "everything") == list(range(900))


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert result.returncode == 2, result.stderr[-4000:]
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), result.stderr[-2000:]
    for fragment in fragments:
        assert fragment in last, last
    return last


def test_malformed_options_are_one_line_errors_before_spark_starts(tmp_path: Path) -> None:
    base = ["--bootstrap", "127.0.0.1:1", "--topic", "t", "--path", str(tmp_path / "d"),
            "--model", "sparkkit:Order", "--checkpoint", str(tmp_path / "c")]
    assert_one_line_error(run_job([*base, "--option", "maxOffsetsPerTrigger"]),
                          "--option takes key=value", "'maxOffsetsPerTrigger'")
    assert_one_line_error(run_job([*base, "--option", "subscribe=other"]),
                          "'subscribe' is set by the job itself", "--topic")
    assert_one_line_error(run_job([*base, "--option", "kafka.isolation.level=dirty"]),
                          "read_committed")
    assert_one_line_error(run_job([*base, "--packages", "hadoop-aws"]),
                          "group:artifact:version")
    assert_one_line_error(run_job([*base, "--conf", "=x"]), "--conf takes key=value")


def test_an_option_or_a_path_spark_refuses_is_one_line_error(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    base = ["--bootstrap", kafka_bootstrap, "--topic", "t", "--model", "sparkkit:Order",
            "--checkpoint", str(tmp_path / "c"), "--master", "local[1]"]
    import pyspark  # noqa: F401  (the connector's version is pyspark's)

    no_s3a = run_job([*base, "--path", "s3a://bucket/orders"])
    assert_one_line_error(no_s3a, "s3a://", "S3AFileSystem",
                          "--packages org.apache.hadoop:hadoop-aws:")
    refused = run_job([*base, "--path", str(tmp_path / "d"), "--option",
                       "kafka.auto.offset.reset=latest"])
    assert_one_line_error(refused, "Spark refused", "auto.offset.reset")
