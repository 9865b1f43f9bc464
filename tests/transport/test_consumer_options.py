"""One consumer configuration for every transport: :class:`ConsumerOptions`.

``Transport.consumer`` takes either a whole options object or a group id and keyword
settings; both ways must build the same consumer, on the memory and the Kafka transport
alike (creating a Kafka consumer does no I/O, so no broker is needed here).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.errors import ConfigError
from aiostreams.transport.base import ConsumerOptions, IsolationLevel, Transport
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord, TopicPartition

TRANSPORTS = {
    "memory": lambda: MemoryTransport(MemoryBroker()),
    "kafka": lambda: KafkaTransport("127.0.0.1:9"),
}

names = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=8)
settings = st.fixed_dictionaries({}, optional={
    "client_id": names,
    "isolation_level": st.sampled_from(IsolationLevel),
    "max_poll_records": st.integers(1, 10_000),
    "auto_offset_reset": st.sampled_from(["earliest", "latest"]),
    "offset_out_of_range": st.none() | st.sampled_from(["earliest", "latest", "fail"]),
})


@pytest.mark.parametrize("kind", sorted(TRANSPORTS))
@given(group_id=st.none() | names, given_settings=settings,
       static=st.booleans(), instance=names)
def test_keywords_and_an_options_object_configure_the_same_consumer(
    kind: str, group_id: str | None, given_settings: dict[str, Any], static: bool,
    instance: str,
) -> None:
    if static and group_id is not None:
        given_settings = {**given_settings, "group_instance_id": instance}
    transport: Transport = TRANSPORTS[kind]()
    expected = ConsumerOptions(group_id, **given_settings)
    by_keywords = transport.consumer(group_id, **given_settings)
    by_object = transport.consumer(options=expected)
    assert by_keywords.options == expected  # type: ignore[attr-defined]
    assert by_object.options is expected  # type: ignore[attr-defined]


def test_isolation_level_of_an_exactly_once_app_reads_committed_only() -> None:
    assert IsolationLevel.of(True) is IsolationLevel.READ_COMMITTED
    assert IsolationLevel.of(False) is IsolationLevel.READ_UNCOMMITTED
    assert ConsumerOptions(isolation_level=IsolationLevel.of(True)).read_committed


def test_unset_fields_take_the_documented_defaults() -> None:
    options = MemoryTransport().consumer("g").options
    assert options == ConsumerOptions(
        group_id="g", client_id="aiostreams", isolation_level=IsolationLevel.READ_UNCOMMITTED,
        group_instance_id=None, max_poll_records=2000, auto_offset_reset="earliest")


@pytest.mark.parametrize("kind", sorted(TRANSPORTS))
@pytest.mark.parametrize("extra", [{"group_id": "g"}, {"client_id": "x"}])
def test_an_options_object_with_keywords_as_well_is_refused(kind: str,
                                                            extra: dict[str, Any]) -> None:
    transport: Transport = TRANSPORTS[kind]()
    with pytest.raises(ConfigError, match="not both"):
        transport.consumer(options=ConsumerOptions("g"), **extra)


@pytest.mark.parametrize(("fields", "named"), [
    ({"group_id": ""}, "group_id"),
    ({"group_instance_id": "w1"}, "group_instance_id"),
    ({"max_poll_records": 0}, "max_poll_records"),
    ({"auto_offset_reset": "middle"}, "auto_offset_reset"),
    ({"offset_out_of_range": "none"}, "offset_out_of_range"),
])
def test_bad_options_are_refused_when_the_object_is_made(fields: dict[str, Any],
                                                         named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        ConsumerOptions(**fields)


def test_options_without_a_group_say_how_to_get_one() -> None:
    with pytest.raises(ConfigError, match=r"cannot commit without a group.*consumer\('my-group'\)"):
        ConsumerOptions().require_group("commit")
    assert ConsumerOptions("g").require_group("commit") == "g"


async def test_an_options_object_reaches_the_consumer_it_configures() -> None:
    broker = MemoryBroker()
    broker.create_topic("t", 1)
    transport = MemoryTransport(broker)
    producer = transport.producer()
    await producer.start()
    await producer.send_batch([OutgoingRecord("t", None, b"%d" % i) for i in range(5)])
    await producer.flush()
    await producer.stop()
    consumer = transport.consumer(
        options=ConsumerOptions(max_poll_records=2, auto_offset_reset="latest"))
    await consumer.start()
    try:
        consumer.assign([TopicPartition("t", 0)])
        assert await consumer.getmany(0) == {}  # "latest": starts past the five records
        consumer.seek(TopicPartition("t", 0), 0)
        batch = await consumer.getmany(0)
        assert [r.offset for r in batch[TopicPartition("t", 0)]] == [0, 1]  # two a call
    finally:
        await consumer.stop()
