"""Issue 24, item 1, on the real broker: a failing record near Kafka's 1 MiB limit (or with
a key that size) is dead-lettered cut to fit, and the app keeps going."""

from __future__ import annotations

from hashlib import sha256

import pytest
from appkit import create_topic, produce, read_exactly

import aiostreams as ais
from aiostreams.transport.kafka import KafkaTransport

pytestmark = pytest.mark.kafka

BIG = 1_040_000  # fits the broker (message.max.bytes 1,048,588); its dead letter did not


class RejectBig(ais.Processor[bytes, bytes]):
    def process(self, record: ais.Record[bytes, bytes]) -> None:
        if len(record.key or b"") + len(record.value or b"") > 100_000:
            raise ValueError("too big to process: " + "!" * 30_000)  # long error headers
        self.context.forward(record)


async def test_near_limit_failures_are_dead_lettered_and_later_records_go_out_once(
        kafka_bootstrap: str, topic_name) -> None:  # type: ignore[no-untyped-def]
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, dlq = topic_name("in"), topic_name("out"), topic_name("dlq")
    await create_topic(transport, src, 1)
    big_value, big_key = b"v" * BIG, b"k" * 1_047_500
    inputs: list[tuple[bytes | None, bytes | None]] = [(b"a", b"0"), (b"a", big_value)]
    inputs += [(b"a", str(i).encode()) for i in range(1, 20)]
    await produce(transport, src, inputs)
    await produce(transport, src, [(big_key, b"x")])
    await produce(transport, src, [(b"a", str(i).encode()) for i in range(20, 40)])
    app = ais.App(topic_name("app"), broker=f"kafka://{kafka_bootstrap}",
                  dead_letter_topic=dlq, commit_interval_ms=100)
    app.topic(src, key=bytes, value=bytes)
    app.topic(dst, key=bytes, value=bytes)
    app.topology.add_source("src", src).add_processor("reject", RejectBig, "src").add_sink(
        "sink", dst, "reject")
    async with app:
        dead = await read_exactly(transport, dlq, 2, timeout=60)
        good = await read_exactly(transport, dst, 40, timeout=60)
        assert (worker := app.status().worker) is not None and worker.failure is None
    assert sorted(int(r.value or b"") for r in good) == list(range(40))  # each exactly once
    by_offset = {int(dict(d.headers)["aiostreams.dlq.offset"]): d for d in dead}
    value_letter, key_letter = by_offset[1], by_offset[21]
    h = dict(value_letter.headers)
    assert h["aiostreams.dlq.value.sha256"] == sha256(big_value).hexdigest().encode()
    assert h["aiostreams.dlq.value.size"] == str(BIG).encode()
    assert value_letter.value and big_value.startswith(value_letter.value)
    h = dict(key_letter.headers)
    assert h["aiostreams.dlq.truncated"].endswith(b"key")
    assert h["aiostreams.dlq.key.sha256"] == sha256(big_key).hexdigest().encode()
