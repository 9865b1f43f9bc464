"""A table remembers which incarnation of each source topic it holds (issue 19, item 5): a
topic deleted and created again restarts its offsets at 0, and a sink that took the new
records for replays of the old offsets would drop them silently. Both sinks refuse such a
table loudly, before writing; the same incarnation continues; tables written before ids
were recorded are accepted and get them recorded."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deltakit import WatchedDeltaSink, make_delta_app, read_with_deltars
from deltalake import DeltaTable
from sparkkit import (
    Order,
    WatchedSink,
    add_orders,
    create_topic,
    make_app,
    order_records,
    produce,
    read_with_pyarrow,
    topic_of_orders,
    unique,
)

from aiostreams import App
from aiostreams.sinks import DeltaSink, ParquetSink, TableIdentityError
from aiostreams.sinks.commit_log import LOG_DIR
from aiostreams.sinks.delta_identity import TableIdentity
from aiostreams.transport.base import Transport, read_topic_ids
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

pytestmark = pytest.mark.spark

Kind = str  # "delta" or "parquet"
KINDS = ["delta", "parquet"]


def new_sink(kind: Kind, path: Path) -> WatchedSink | WatchedDeltaSink:
    if kind == "delta":
        return WatchedDeltaSink(path, Order, batch_rows=40, batch_interval=1.0)
    return WatchedSink(path, Order, engine="pyarrow", batch_rows=40, batch_interval=1.0)


def new_app(kind: Kind, name: str, transport: Transport, topic: str,
            sink: WatchedSink | WatchedDeltaSink) -> App:
    if isinstance(sink, WatchedDeltaSink):
        return make_delta_app(name, transport, topic, sink)
    return make_app(name, transport, topic, sink)


def ids_in_table(kind: Kind, path: Path) -> list[int]:
    if kind == "delta":
        return sorted(read_with_deltars(path).column("id").to_pylist())
    return sorted(read_with_pyarrow(path, ParquetSink(path, Order, engine="pyarrow"))
                  .column("id").to_pylist())


async def recreate(transport: Transport, topic: str) -> None:
    admin = transport.admin()
    await admin.start()
    try:
        await admin.delete_topics([topic])
    finally:
        await admin.stop()
    await create_topic(transport, topic, 1)


async def write_through(kind: Kind, path: Path, app_name: str, transport: Transport,
                        topic: str, last: int) -> None:
    sink = new_sink(kind, path)
    async with new_app(kind, app_name, transport, topic, sink):
        await sink.durable_through({TopicPartition(topic, 0): last}).wait()


async def refused_after_recreation(kind: Kind, path: Path, transport: Transport,
                                   make_name: Callable[[str], str]) -> None:
    """Write 100 rows, recreate the topic with 30 new ones, and check the restart is
    refused before writing, naming the topic, both ids and what to do."""
    topic, app_name = make_name("orders"), make_name("app")
    await topic_of_orders(transport, topic, 100, partitions=1)
    await write_through(kind, path, app_name, transport, topic, 99)
    [old_id] = (await read_topic_ids(transport, [topic])).values()

    await recreate(transport, topic)
    await produce(transport, topic, order_records(range(1000, 1030)))  # offsets 0..29
    [new_id] = (await read_topic_ids(transport, [topic])).values()
    assert old_id and new_id and old_id != new_id
    sink = new_sink(kind, path)
    with pytest.raises(TableIdentityError) as error:
        await new_app(kind, app_name, transport, topic, sink).start()
    message = str(error.value)
    assert f"topic {topic!r} with topic id {old_id}" in message
    assert f"now has topic id {new_id}" in message
    assert "new table path" in message and str(path) in message
    assert sink.metrics.rows_replayed == 0 and sink.metrics.rows_written == 0
    assert ids_in_table(kind, path) == list(range(100))  # nothing written, nothing lost


@pytest.mark.parametrize("kind", KINDS)
async def test_a_recreated_topic_is_refused_loudly_before_any_write(
        kind: Kind, tmp_path: Path) -> None:
    await refused_after_recreation(kind, tmp_path / "t", MemoryTransport(MemoryBroker()),
                                   unique)


@pytest.mark.parametrize("kind", KINDS)
async def test_the_same_incarnation_continues_after_a_restart(
        kind: Kind, tmp_path: Path) -> None:
    transport = MemoryTransport(MemoryBroker())
    topic, app_name = unique("orders"), unique("app")
    await topic_of_orders(transport, topic, 60, partitions=1)
    await write_through(kind, tmp_path / "t", app_name, transport, topic, 59)
    await produce(transport, topic, order_records(range(60, 90)))
    await write_through(kind, tmp_path / "t", app_name, transport, topic, 89)
    assert ids_in_table(kind, tmp_path / "t") == list(range(90))
    [topic_id] = (await read_topic_ids(transport, [topic])).values()
    assert recorded_ids(kind, tmp_path / "t") == {topic: topic_id}


def recorded_ids(kind: Kind, path: Path) -> dict[str, str]:
    if kind == "delta":
        identity = TableIdentity.from_description(
            DeltaTable(str(path)).metadata().description, str(path))
        assert identity is not None
        return identity.ids
    newest = max((path / LOG_DIR).glob("*.json"), key=lambda p: int(p.stem))
    ids: dict[str, str] = json.loads(newest.read_bytes())["topic_ids"]
    return ids


@pytest.mark.parametrize("kind", KINDS)
async def test_a_table_written_before_ids_were_recorded_is_accepted_and_gets_them(
        kind: Kind, tmp_path: Path) -> None:
    transport = MemoryTransport(MemoryBroker())
    topic, app_name = unique("orders"), unique("app")
    await topic_of_orders(transport, topic, 50, partitions=1)
    path, source = tmp_path / "t", TopicPartition(topic, 0)
    legacy: Any = (DeltaSink(path, Order, sources=[topic]) if kind == "delta"
                   else ParquetSink(path, Order, engine="pyarrow"))
    legacy.bind_app(app_name)  # as an app of an aiostreams without topic ids wrote it
    await legacy.start()
    add_orders(legacy, range(20), source)
    await legacy.stop()
    assert recorded_ids(kind, path) == {}

    await write_through(kind, path, app_name, transport, topic, 49)
    assert ids_in_table(kind, path) == list(range(50))  # 0..19 were replays
    [topic_id] = (await read_topic_ids(transport, [topic])).values()
    assert recorded_ids(kind, path) == {topic: topic_id}


def test_a_delta_identity_keeps_its_ids_through_the_description_and_adds_missing_ones(
        ) -> None:
    identity = TableIdentity.of("billing", ["b", "a"], {"a": "id-a", "b": None, "x": "id-x"})
    assert identity.ids == {"a": "id-a"}  # known ids of its own sources only
    assert TableIdentity.from_description(identity.to_description(), "t") == identity
    assert identity.with_topic_ids({"a": "other", "b": "id-b"}).ids == {
        "a": "id-a", "b": "id-b"}  # a recorded id is never replaced
    broken = json.dumps({"aiostreams": {"app": "x", "sources": ["a"], "topic_ids": ["a"]}})
    with pytest.raises(TableIdentityError, match="malformed"):
        TableIdentity.from_description(broken, "t")


@pytest.mark.kafka
@pytest.mark.parametrize("kind", KINDS)
async def test_a_topic_deleted_and_recreated_on_kafka_is_refused_loudly(
        kind: Kind, tmp_path: Path, kafka_bootstrap: str) -> None:
    from aiostreams.transport.kafka import KafkaTransport

    await refused_after_recreation(kind, tmp_path / "t", KafkaTransport(kafka_bootstrap),
                                   unique)
