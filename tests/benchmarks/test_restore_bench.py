"""The restore benchmark end to end at a tiny size, on the real broker: the replay of a
changelog leaves one row per key in the SQLite store, and Kafka Streams' side restores
every record of the same changelog into RocksDB."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from aiostreams.state.store_spec import changelog_topic
from benchmarks.peers.topics import create_topics
from benchmarks.restore import STORE, time_kafka_streams, time_restore, write_changelog

pytestmark = pytest.mark.kafka


async def test_a_changelog_restores_into_sqlite_with_one_row_per_key(
        kafka_bootstrap: str, topic_name) -> None:  # type: ignore[no-untyped-def]
    topic = topic_name("changelog")
    await create_topics(kafka_bootstrap, [topic], 1)
    await write_changelog(kafka_bootstrap, topic, 2_000, 150)
    with tempfile.TemporaryDirectory() as tmp:
        seconds, rows = await time_restore(kafka_bootstrap, topic, Path(tmp))
    assert rows == 150
    assert seconds > 0


async def test_kafka_streams_restores_the_same_changelog_into_rocksdb(
        kafka_bootstrap: str, topic_name) -> None:  # type: ignore[no-untyped-def]
    app = topic_name("ks-restore")
    changelog = changelog_topic(app, STORE)
    await create_topics(kafka_bootstrap, [changelog, f"{app}-input"], 1)
    await write_changelog(kafka_bootstrap, changelog, 2_000, 150)
    with tempfile.TemporaryDirectory() as tmp:
        seconds, cpu, restored = await time_kafka_streams(kafka_bootstrap, app, f"{app}-input",
                                                     Path(tmp), timeout=120)
    assert restored == 2_000
    assert seconds > 0 and cpu > 0
