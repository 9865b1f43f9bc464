"""A dataset remembers which app wrote it: another app's sink refuses to start instead of
dropping its own records as replays of offsets the first app wrote (issue 19, item 5, for
apps; topic incarnations: test_topic_incarnation.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sparkkit import (
    Order,
    WatchedSink,
    add_orders,
    make_app,
    order_records,
    produce,
    read_with_pyarrow,
    topic_of_orders,
    unique,
)

from aiostreams.sinks import ParquetSink, committed_files
from aiostreams.sinks.commit_log import LOG_DIR, DatasetOwnerError
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

pytestmark = pytest.mark.spark


async def test_a_second_app_on_a_dataset_is_refused_not_silently_skipped(
        tmp_path: Path) -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic = unique("orders")
    await topic_of_orders(transport, topic, 100, partitions=1)
    path, last = tmp_path / "orders", {TopicPartition(topic, 0): 99}
    first_app = unique("first")
    sink = WatchedSink(path, Order, engine="pyarrow")
    async with make_app(first_app, transport, topic, sink):
        await sink.durable_through(last).wait()
    [entry] = sorted((path / LOG_DIR).glob("*.json"))
    assert json.loads(entry.read_bytes())["app"] == first_app

    other = WatchedSink(path, Order, engine="pyarrow")
    second_app = unique("second")
    with pytest.raises(DatasetOwnerError) as error:
        await make_app(second_app, transport, topic, other).start()
    message = str(error.value)
    assert f"written by app {first_app!r}" in message and f"app {second_app!r}" in message
    assert str(path) in message
    assert len(committed_files(path)) == 1

    # the app that wrote it continues (its replays are dropped, as before)
    await produce(transport, topic, order_records(range(100, 150)))
    again = WatchedSink(path, Order, engine="pyarrow")
    async with make_app(first_app, transport, topic, again):
        await again.durable_through({TopicPartition(topic, 0): 149}).wait()
    assert sorted(read_with_pyarrow(path, again).column("id").to_pylist()) == list(range(150))


async def test_a_sink_outside_any_app_is_refused_on_an_apps_dataset_and_legacy_logs_load(
        tmp_path: Path) -> None:
    tp = TopicPartition("orders", 0)
    legacy = ParquetSink(tmp_path / "d", Order, engine="pyarrow")
    await legacy.start()
    add_orders(legacy, range(5), tp)
    await legacy.stop()
    entry = tmp_path / "d" / LOG_DIR / "0.json"
    doc = json.loads(entry.read_bytes())
    assert doc["app"] is None
    doc["version"] = 1  # as written before entries named their app
    del doc["app"]
    entry.write_text(json.dumps(doc))

    owned = ParquetSink(tmp_path / "d", Order, engine="pyarrow")
    owned.bind_app("billing")
    await owned.start()
    assert owned.durable_offset(tp) == 4
    add_orders(owned, range(5, 10), tp)
    await owned.stop()

    stray = ParquetSink(tmp_path / "d", Order, engine="pyarrow")
    with pytest.raises(DatasetOwnerError, match="a sink outside any app"):
        await stray.start()
    await stray.stop()
