"""A value that pydantic accepts but Parquet cannot hold takes the dead-letter path (or stops
the app with an error naming the record and the field); no file ever holds it."""

from __future__ import annotations

from pathlib import Path

import pytest
from sparkkit import (
    Order,
    WatchedSink,
    create_topic,
    make_app,
    make_order,
    order_records,
    produce,
    read_with_pyarrow,
    unique,
)

from aiostreams import AiostreamsError
from aiostreams.engine.failure import DLQ_HEADER_PREFIX
from aiostreams.sinks import committed_files
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

pytestmark = pytest.mark.spark

TOO_BIG = 2**70  # a valid Python int for pydantic, beyond Parquet's int64


def records_with_a_bad_one(bad_at: int, n: int) -> list[tuple[bytes | None, bytes | None]]:
    items = order_records(range(n))
    bad = make_order(bad_at).model_dump(mode="json")
    bad["id"] = TOO_BIG
    items[bad_at] = (str(bad_at).encode(), Order.model_validate(bad).model_dump_json().encode())
    return items


async def test_a_value_that_does_not_fit_the_schema_goes_to_the_dead_letter_topic(
        tmp_path: Path) -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic, dlq = unique("orders"), unique("orders-dlq")
    await create_topic(transport, topic, 1)
    await produce(transport, topic, records_with_a_bad_one(7, 20))
    sink = WatchedSink(tmp_path / "d", Order, engine="pyarrow")
    app = make_app(unique("bad"), transport, topic, sink, dead_letter_topic=dlq)
    async with app:
        await sink.durable_through({TopicPartition(topic, 0): 19}).wait()
    ids = sorted(read_with_pyarrow(tmp_path / "d", sink).column("id").to_pylist())
    assert ids == [i for i in range(20) if i != 7]
    [dead] = broker.records(dlq)
    headers = dict(dead.headers)
    assert headers[DLQ_HEADER_PREFIX + "exception"] == b"aiostreams.errors.SerializationError"
    message = headers[DLQ_HEADER_PREFIX + "message"].decode()
    assert "Order.id: expected an int within 64 bits" in message
    assert f"{topic}[0]@7" in message
    assert headers[DLQ_HEADER_PREFIX + "offset"] == b"7"
    assert headers[DLQ_HEADER_PREFIX + "processor"] == b"parquet-validate"


async def test_without_a_dead_letter_topic_a_bad_value_stops_the_app_with_a_clear_error(
        tmp_path: Path) -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    topic, group = unique("orders"), unique("bad")
    await create_topic(transport, topic, 1)
    await produce(transport, topic, records_with_a_bad_one(7, 20))
    sink = WatchedSink(tmp_path / "d", Order, engine="pyarrow")
    app = make_app(group, transport, topic, sink)
    await app.start()
    with pytest.raises(AiostreamsError) as failure:
        await app.wait()
    text = f"{failure.value} {failure.value.__cause__}"
    assert "Order.id: expected an int within 64 bits" in text, text
    assert broker.committed(group, TopicPartition(topic, 0)) in (None, 7)
    ids = sorted(read_with_pyarrow(tmp_path / "d", sink).column("id").to_pylist()) \
        if committed_files(tmp_path / "d") else []
    assert ids == list(range(len(ids)))
    assert set(ids) <= set(range(7))
