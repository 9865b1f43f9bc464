"""Lineage on a real broker, exactly-once: a windowed count behind a repartition topic
writes outputs whose lineage header ``aiostreams explain`` (the command, in a subprocess)
walks back to the payment that produced them, past the repartition records the purge
deleted once they were committed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from appkit import create_topic, produce, read_exactly
from clikit import cli

import aiostreams as ais
from aiostreams.runtime.lineage import chain_of
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import TopicPartition
from aiostreams.windows import TimeWindowedSerde, TumblingWindows

pytestmark = pytest.mark.kafka

CARDS = ["c1", "c2", "c3"]


async def test_explain_names_the_payment_behind_a_windowed_count_on_a_real_broker(
        kafka_bootstrap: str, topic_name: Any) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, group = topic_name("payments"), topic_name("counts"), topic_name("app")
    await create_topic(transport, src, 2)
    payments = [(f"p{i}".encode(), json.dumps({"card": CARDS[i % 3]}).encode())
                for i in range(30)]
    await produce(transport, src, payments)
    app = ais.App(group, broker=f"kafka://{kafka_bootstrap}", lineage=True,
                  processing_guarantee="exactly_once", commit_interval_ms=100,
                  repartition_purge_interval_ms=0)
    source = app.topic(src, key=str, value="json")
    out = app.topic(dst, key=TimeWindowedSerde(str, size=3600.0), value=int, partitions=2)
    (app.stream(source).group_by(lambda _k, p: p["card"], name="by-card")
     .windowed_by(TumblingWindows(3600.0, grace=3600.0)).count(materialized="counts")
     .to_stream().to(out))
    async with app:
        await app.wait_until_caught_up(timeout=120)
        worker = app.inspect().worker  # internal: a commit now, which purges
        assert worker is not None
        await worker.commit()
    outputs = await read_exactly(transport, dst, len(payments), read_committed=True)
    assert len(outputs) == len(payments)
    chains = [chain_of(r.headers) for r in outputs]
    repartition = f"{group}-by-card-repartition"
    assert all([o.topic for o in chain] == [repartition, src] for chain in chains)
    named = {chain[-1] for chain in chains}
    assert len(named) == len(payments)  # each output names its own payment

    last = max(outputs, key=lambda r: int.from_bytes(r.value or b"", "big", signed=True))
    done = cli("explain", dst, str(last.partition), str(last.offset), "--json",
               "--broker", f"kafka://{kafka_bootstrap}")
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)["steps"]
    assert [s["topic"] for s in steps] == [dst, repartition, src]
    # the repartition record was purged once committed; its output's chain goes on
    starts = await _beginning(transport, repartition)
    assert sum(starts.values()) == len(payments)
    assert "deleted" in steps[1]["missing"]
    payment = steps[2]
    window = out.key_serde.deserialize(dst, last.key)
    assert payment["came_from"] is None
    index = int(payment["key"].removeprefix("p"))
    assert CARDS[index % 3] == window.key


async def _beginning(transport: KafkaTransport, topic: str) -> dict[int, int]:
    consumer = transport.consumer(None)
    await consumer.start()
    try:
        starts = await consumer.beginning_offsets(
            [TopicPartition(topic, p) for p in range(2)])
        return {tp.partition: offset for tp, offset in starts.items()}
    finally:
        await consumer.stop()
