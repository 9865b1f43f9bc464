"""The memory broker's append and partition resolution, as the producers use them per batch:
records built field by field equal the constructed ones, offsets stay dense, and a keyed
record of a one-partition topic skips the chooser without changing anyone's partitions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.transport.memory_broker import MemoryBroker
from aiostreams.transport.partitioner import KeyPartitioner
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition

TOPICS = {"one": 1, "three": 3}

records = st.builds(
    OutgoingRecord,
    topic=st.sampled_from(sorted(TOPICS)),
    key=st.none() | st.binary(max_size=4),
    value=st.none() | st.binary(max_size=4),
    timestamp=st.none() | st.floats(0, 2e9),
    headers=st.tuples() | st.tuples(st.tuples(st.text(max_size=2), st.binary(max_size=2))),
    partition=st.none(),
)


def fresh_broker() -> MemoryBroker:
    broker = MemoryBroker()
    for topic, partitions in TOPICS.items():
        broker.create_topic(topic, partitions)
    return broker


@given(batches=st.lists(st.lists(records, max_size=6), max_size=4))
def test_appended_records_equal_constructed_ones_at_dense_offsets(
        batches: list[list[OutgoingRecord]]) -> None:
    broker = fresh_broker()
    expected: dict[TopicPartition, list[RawRecord]] = {}
    chooser = KeyPartitioner()
    for batch in batches:
        placed = broker.resolve_partitions(batch, chooser.partition_for)
        broker.append(placed)
        for record, partition in placed:
            log = expected.setdefault(TopicPartition(record.topic, partition), [])
            stored = broker.records(record.topic, partition)[len(log)]
            timestamp = stored.timestamp if record.timestamp is None else record.timestamp
            log.append(RawRecord(record.topic, partition, len(log), timestamp, record.key,
                                 record.value, record.headers))
    for tp, log in expected.items():
        assert broker.records(tp.topic, tp.partition) == log
        assert broker.end_offset(tp) == len(log)


def test_a_missing_timestamp_is_the_append_time_and_a_given_one_is_kept() -> None:
    broker = fresh_broker()
    broker.append([(OutgoingRecord("one", b"k", b"v", None), 0),
                   (OutgoingRecord("one", b"k", b"v", 5.0), 0)])
    first, second = broker.records("one", 0)
    assert first.timestamp > 1e9 and second.timestamp == 5.0


@given(keys=st.lists(st.none() | st.binary(max_size=3), max_size=12))
def test_one_partition_topic_skips_the_chooser_only_for_keyed_records(
        keys: list[bytes | None]) -> None:
    """The null-key round robin must still advance for a one-partition topic: a producer
    shares its counter over topics, so skipping it would move other topics' records."""
    asked: list[tuple[str, bytes | None, int]] = []

    def choose(topic: str, key: bytes | None, count: int) -> int:
        asked.append((topic, key, count))
        return 0

    placed = fresh_broker().resolve_partitions(
        [OutgoingRecord("one", key, b"v") for key in keys], choose)
    assert [p for _, p in placed] == [0] * len(keys)
    assert asked == [("one", None, 1) for key in keys if key is None]


def test_null_keys_round_robin_across_topics_as_without_the_shortcut() -> None:
    chooser = KeyPartitioner()
    batch = [OutgoingRecord(t, None, b"v") for t in ("three", "one", "three", "one", "three")]
    placed = fresh_broker().resolve_partitions(batch, chooser.partition_for)
    # the shared counter runs 0..4 over all five records, "one" taking 1 and 3
    assert [p for _, p in placed] == [0, 0, 2, 0, 1]


def test_an_explicit_partition_out_of_range_names_the_topic_and_appends_nothing() -> None:
    broker = fresh_broker()
    with pytest.raises(ValueError, match="partition 3 of topic 'three' does not exist"):
        broker.resolve_partitions([OutgoingRecord("three", b"k", b"v", partition=3)],
                                  KeyPartitioner().partition_for)
    assert broker.end_offset(TopicPartition("three", 0)) == 0
