"""``app.send``, ``app.producer()`` and ``app.consumer()`` against a real Kafka broker,
including an exactly-once app's output, whose transaction markers take offsets."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from aiostreams import App

pytestmark = pytest.mark.kafka


async def test_send_and_read_back_an_exactly_once_apps_output_on_kafka(
        kafka_bootstrap: str, topic_name: Callable[[str], str]) -> None:
    src, dst = topic_name("in"), topic_name("out")
    app = App(topic_name("clients"), broker=f"kafka://{kafka_bootstrap}",
              processing_guarantee="exactly_once", commit_interval_ms=100)
    source = app.topic(src, key=str, value=int, partitions=2)
    sink = app.topic(dst, key=str, value=int, partitions=2)
    app.stream(source).map_values(lambda n: n * 10).to(sink)
    await app.send(source, "k0", 0, headers={"h": "v"})  # before the run: creates the topic
    async with app:
        async with app.producer() as producer:
            for i in range(1, 30):
                await producer.send(source, f"k{i % 7}", i)
        await app.wait_until_caught_up(timeout=60)
    async with app.consumer(dst) as records:
        out = await records.read_to_end()  # ends despite the commit markers at the end
    async with app.consumer(src) as records:
        inputs = await records.read_to_end()
    await app.stop()
    assert sorted(r.value for r in out) == [i * 10 for i in range(30)]
    assert [r.headers for r in inputs if r.key == "k0" and r.value == 0] == [(("h", b"v"),)]
    by_key: dict[str, list[int]] = {}
    for r in sorted(out, key=lambda r: (r.partition, r.offset)):
        by_key.setdefault(r.key, []).append(r.value)
    assert all(values == sorted(values) for values in by_key.values())
