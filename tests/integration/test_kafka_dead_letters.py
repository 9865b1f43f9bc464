"""Fuzzed input on the real broker: bad records go to the dead-letter topic with their
reasons, good ones to the output, and the worker never stops."""

from __future__ import annotations

import random

import pytest
from appkit import create_topic, produce, read_exactly
from pydantic import BaseModel

import aiostreams as ais
from aiostreams.transport.kafka import KafkaTransport

pytestmark = pytest.mark.kafka


class Order(BaseModel):
    id: int
    customer_id: str
    amount: float


class Echo(ais.Processor[str, Order]):
    """Doubles the customer id: an order with a huge one yields an oversized output."""

    def process(self, record: ais.Record[str, Order]) -> None:
        order = record.value
        self.context.forward(record.with_value(
            {"id": order.id, "customer": order.customer_id, "echo": order.customer_id}))


def fuzz(n: int, seed: int) -> tuple[list[tuple[bytes | None, bytes | None]], dict[int, str]]:
    """Valid orders mixed with bad ones; returns the inputs and {index: kind} of the bad."""
    rng = random.Random(seed)
    items: list[tuple[bytes | None, bytes | None]] = []
    bad: dict[int, str] = {}
    for i in range(n):
        key: bytes | None = f"k{i % 50}".encode()
        value: bytes | None = Order(id=i, customer_id=f"c{i % 7}", amount=i).model_dump_json(
        ).encode()
        roll = rng.random()
        if roll < 0.03:
            value, bad[i] = b'{"id": ' + str(i).encode() + b', "customer_id": "c"', "malformed"
        elif roll < 0.06:
            value, bad[i] = b'{"id": "x", "customer_id": 1, "amount": []}', "wrong types"
        elif roll < 0.09:
            value, bad[i] = rng.randbytes(rng.randrange(1, 200)), "random bytes"
        elif roll < 0.10:
            big = Order(id=i, customer_id="c" * 600_000, amount=1.0)
            value, bad[i] = big.model_dump_json().encode(), "oversized output"
        elif roll < 0.12:
            value, bad[i] = None, "null value"
        elif roll < 0.15:
            key = None  # a null key is valid input: it must come out like any other
        items.append((key, value))
    return items, bad


async def test_fuzzed_input_is_dead_lettered_with_reasons_and_nothing_else_is_lost(
        kafka_bootstrap: str, topic_name) -> None:  # type: ignore[no-untyped-def]
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, dlq = topic_name("in"), topic_name("out"), topic_name("dlq")
    await create_topic(transport, src, 3)
    inputs, bad = fuzz(3000, seed=5)
    await produce(transport, src, inputs)
    app = ais.App(topic_name("app"), broker=f"kafka://{kafka_bootstrap}",
                  dead_letter_topic=dlq)
    app.topic(src, key=str, value=Order)
    app.topic(dst, key=str, value=dict, partitions=3)
    app.topology.add_source("src", src).add_processor("echo", Echo, "src").add_sink(
        "sink", dst, "echo")
    async with app:
        dead = await read_exactly(transport, dlq, len(bad), timeout=120)
        good = await read_exactly(transport, dst, len(inputs) - len(bad), timeout=120)
        assert (worker := app.status().worker) is not None and worker.failure is None
    positions = {}  # (partition, offset) of each input, as the broker assigned them
    src_records = await read_exactly(transport, src, len(inputs))
    for r in src_records:
        positions[(r.partition, r.offset)] = r
    assert len(dead) == len(bad)
    kinds_seen: set[str] = set()
    import json

    for d in dead:
        h = {k: v.decode() for k, v in d.headers}
        origin = positions[(int(h["aiostreams.dlq.partition"]), int(h["aiostreams.dlq.offset"]))]
        assert (d.key, d.value) == (origin.key, origin.value)  # original bytes, untouched
        assert h["aiostreams.dlq.topic"] == src
        assert h["aiostreams.dlq.attempts"] == "1"
        assert h["aiostreams.dlq.exception"] in {"aiostreams.errors.DeserializationError",
                                                 "aiostreams.errors.SerializationError",
                                                 "AttributeError"}
        assert h["aiostreams.dlq.message"] and h["aiostreams.dlq.traceback"]
        assert h["aiostreams.dlq.processor"] in {"src", "echo", "sink"}
        kinds_seen.add(h["aiostreams.dlq.exception"])
    assert "aiostreams.errors.SerializationError" in kinds_seen  # the oversized output
    good_ids = sorted(json.loads(r.value)["id"] for r in good if r.value)
    assert good_ids == sorted(set(range(len(inputs))) - set(bad))
    assert sum(1 for r in good if r.key is None) > 0  # null keys came through
