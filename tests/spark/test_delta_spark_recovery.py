"""The Delta sink's Spark engine in an app, on a standalone cluster: a write interrupted after
its check, after Spark wrote its files, or after its Delta commit commits no Kafka offset
past it, and a fresh app replaying from the committed offsets leaves each input in the table
once (the files of the interrupted write are in no commit)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from conftest import cluster_session
from deltakit import (
    CrashingDeltaSink,
    WatchedDeltaSink,
    make_delta_app,
    pairs,
    read_with_deltars,
)
from deltalake import DeltaTable
from localcluster import LocalSparkCluster
from sparkkit import Order, SimulatedCrash, create_topic, order_records, produce, unique

from aiostreams import AiostreamsError
from aiostreams.sinks import DeltaStep, SinkState, SparkConfig
from aiostreams.sinks.spark.delta_spark import BATCH_DIR_PREFIX, SparkDeltaEngine
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.chaos, pytest.mark.timeout(600)]

PHASE = 1500
STEPS = ("checked", "written", "committed")


class CrashAfterWrite(SparkDeltaEngine):
    armed = False

    def files_written(self, batch_dir: Path, files: Sequence[Path]) -> None:
        if self.armed:
            self.armed = False
            raise SimulatedCrash(f"crash after Spark wrote {len(files)} file(s)")


@pytest.fixture(scope="module")
def cluster(spark_cluster: LocalSparkCluster) -> Iterator[SparkConfig]:
    config = spark_cluster.config(app_name="aiostreams-delta-spark-recovery")
    for _ in cluster_session(config):
        yield config


def ends_of(broker: MemoryBroker, topic: str) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, p): broker.end_offset(TopicPartition(topic, p))
            for p in range(2)}


@pytest.mark.parametrize("step", STEPS)
async def test_a_write_interrupted_at_each_step_commits_no_offset_past_it_and_replays_once(
        tmp_path: Path, cluster: SparkConfig, step: str) -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic, group = unique("orders"), unique("spark-eo")
    await create_topic(transport, topic, 2)
    path = tmp_path / "orders"
    await produce(transport, topic, order_records(range(PHASE)))
    first = {tp: end - 1 for tp, end in ends_of(broker, topic).items()}
    crashing = CrashingDeltaSink(path, Order, include=("partition", "offset"), batch_interval=0.5,
                            engine="spark", spark=cluster)
    engine = CrashAfterWrite(cluster)
    crashing.spark_engine = engine
    app = make_delta_app(group, transport, topic, crashing)
    await app.start()
    await crashing.durable_through(first).wait()
    version_before = DeltaTable(str(path)).version()
    if step == "written":
        engine.armed = True
    else:
        crashing.crash_at = DeltaStep(step)
    await produce(transport, topic, order_records(range(PHASE, 2 * PHASE)))
    with pytest.raises(AiostreamsError):
        await app.wait()
    assert crashing.state is SinkState.STOPPED
    end = ends_of(broker, topic)
    committed = {tp: broker.committed(group, tp) or 0 for tp in end}
    durable = {tp: crashing.table_durable(tp) + 1 for tp in end}
    assert all(committed[tp] <= durable[tp] for tp in end), (committed, durable)
    assert committed != end
    assert (DeltaTable(str(path)).version() > version_before) is (step == "committed")
    if step == "written":  # Spark's files of the lost write are there, in no commit
        on_disk = {p.name for p in path.glob(f"{BATCH_DIR_PREFIX}*/**/*.parquet")}
        listed = {uri.rsplit("/", 1)[1] for uri in DeltaTable(str(path)).file_uris()}
        assert on_disk - listed

    sink = WatchedDeltaSink(path, Order, include=("partition", "offset"), batch_interval=0.5,
                            engine="spark", spark=cluster)
    async with make_delta_app(group, transport, topic, sink):
        last = {tp: e - 1 for tp, e in end.items()}
        await sink.durable_through(last).wait()
        await sink.retired_through(last).wait()
    assert {tp: broker.committed(group, tp) for tp in end} == end
    table = read_with_deltars(path)
    assert sorted(table.column("id").to_pylist()) == list(range(2 * PHASE))
    assert max(Counter(pairs(table)).values()) == 1
