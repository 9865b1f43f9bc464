"""The public way in and out: ``app.send``, ``app.producer()``, ``app.consumer()``."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from aiostreams import App, ConfigError, DeserializationError, SerializationError


class Order(BaseModel):
    id: str
    amount: float


def make_app(**settings: object) -> App:
    return App("clients", broker=f"memory://clients-{uuid.uuid4().hex[:8]}", **settings)


async def test_send_before_start_creates_the_topic_and_reads_back_typed() -> None:
    app = make_app()
    orders = app.topic("orders", key=str, value=Order, partitions=3)
    await app.send(orders, "o-1", Order(id="o-1", amount=2.5),
                   headers={"source": "test"}, timestamp=1_700_000_000.25)
    await app.send("orders", "o-2", Order(id="o-2", amount=1.0))
    async with app.consumer("orders") as records:
        got = await records.read_to_end()
        assert len(records.partitions) == 3  # created with the declared partitions
    await app.stop()  # closes send's producer (the app never ran)
    by_key = {r.key: r for r in got}
    assert by_key["o-1"].value == Order(id="o-1", amount=2.5)
    assert by_key["o-1"].headers == (("source", b"test"),)
    assert by_key["o-1"].timestamp == pytest.approx(1_700_000_000.25, abs=0.001)
    assert by_key["o-2"].value.amount == 1.0


async def test_send_while_running_is_processed_and_after_stop_still_works() -> None:
    app = make_app(commit_interval_ms=20)
    src = app.topic("words", key=str, value=str, partitions=2)
    dst = app.topic("upper", key=str, value=str, partitions=2)
    app.stream(src).map_values(str.upper).to(dst)
    async with app:
        for i in range(20):
            await app.send(src, f"k{i}", f"w{i}")
        await app.wait_until_caught_up(timeout=30)
    await app.send(src, "late", "after")  # reopens a producer after the run
    await app.stop()
    async with app.consumer(dst) as records:
        out = await records.read_to_end()
    assert sorted(r.value for r in out) == sorted(f"W{i}" for i in range(20))
    assert (await _all(app, "words"))[-1] == "after"


async def _all(app: App, topic: str) -> list[object]:
    async with app.consumer(topic) as records:
        return [r.value for r in await records.read_to_end()]


async def test_producer_keeps_send_order_per_partition_across_batches() -> None:
    app = make_app()
    topic = app.topic("seq", key=str, value=int, partitions=1)
    async with app.producer() as producer:
        for i in range(1234):  # more than one SEND_BATCH
            await producer.send(topic, "k", i)
    assert await _all(app, "seq") == list(range(1234))


async def test_consumer_from_the_end_sees_only_later_records() -> None:
    app = make_app()
    topic = app.topic("t", key=str, value=str, partitions=1)
    await app.send(topic, "a", "before")
    async with app.consumer(topic, from_beginning=False) as records:
        await app.send(topic, "b", "after")
        got = await records.getmany(timeout=5)
    await app.stop()
    assert [r.value for r in got] == ["after"]


async def test_send_to_an_undeclared_name_says_how_to_declare_it() -> None:
    app = make_app()
    with pytest.raises(ConfigError, match=r"app.topic\('nope', key=..., value=...\)"):
        await app.send("nope", "k", "v")


async def test_send_of_a_wrong_type_raises_a_serialization_error_naming_the_topic() -> None:
    app = make_app()
    app.topic("orders", key=str, value=Order)
    with pytest.raises(SerializationError) as caught:
        await app.send("orders", "k", "not an order")
    assert caught.value.topic == "orders"
    await app.stop()


async def test_consumer_names_the_record_it_cannot_decode() -> None:
    app = make_app()
    raw = app.topic("raw", key=str, value=bytes, partitions=1)
    await app.send(raw, "k", b"{not json")
    typed = App("reader", broker=app.settings.broker).topic("raw", key=str, value=Order)
    async with app.consumer(typed) as records:
        with pytest.raises(DeserializationError, match=r"value of raw\[0\]@0"):
            await records.read_to_end()
    await app.stop()


@settings(max_examples=40, deadline=None)
@given(records=st.lists(st.tuples(st.text(max_size=5), st.integers(-2**63, 2**63 - 1)),
                        max_size=60),
       partitions=st.integers(1, 3))
def test_what_is_sent_reads_back_equal_and_in_send_order_per_key(
        records: list[tuple[str, int]], partitions: int) -> None:
    async def roundtrip() -> list[tuple[str, int]]:
        app = make_app()
        topic = app.topic("prop", key=str, value=int, partitions=partitions)
        async with app.producer() as producer:
            for key, value in records:
                await producer.send(topic, key, value)
        await app.send(topic, "last", 0)  # creates the topic even when records is empty
        async with app.consumer(topic) as consumer:
            got = await consumer.read_to_end()
        await app.stop()
        return [(r.key, r.value) for r in sorted(got, key=lambda r: (r.partition, r.offset))]

    got = asyncio.run(roundtrip())
    assert sorted(got) == sorted([*records, ("last", 0)])
    for key in {k for k, _ in records}:
        assert [v for k, v in got if k == key] == [v for k, v in records if k == key]
