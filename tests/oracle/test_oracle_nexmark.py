"""The Nexmark queries (``benchmarks/nexmark/queries.py`` and ``benchmarks/kstreams/
Nexmark.java``) give Kafka Streams' results on a small generated input: each query runs in
aiostreams' TopologyTestDriver and in Kafka Streams' (one JVM for all of them), and the
outputs are compared in the query's form (every record, or the final value per key: see
``benchmarks/nexmark/topics.py``)."""

from __future__ import annotations

import asyncio

import pytest

from benchmarks.nexmark import jvm
from benchmarks.nexmark.drive import drive_aiostreams, input_lines
from benchmarks.nexmark.generator import Config
from benchmarks.nexmark.queries import QUERIES
from benchmarks.nexmark.topics import Pair, canonical

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(600)]

CONFIG = Config(2_400, rate=400, seed=11)
"""48 persons, 144 auctions, 2,208 bids over 6 s of event time: q2 keeps the bids of
auction 1107, q5's hopping windows close, q8's persons meet their auctions."""

@pytest.fixture(scope="module")
def kafka_streams() -> dict[str, list[Pair]]:
    """Every query's output in Kafka Streams' TopologyTestDriver, from one JVM."""
    return jvm.drive(list(QUERIES), input_lines(CONFIG))


@pytest.mark.parametrize("query", list(QUERIES))
def test_nexmark_query_gives_kafka_streams_results(
        kafka_streams: dict[str, list[Pair]], query: str) -> None:
    ours = canonical(query, asyncio.run(drive_aiostreams(query, CONFIG)))
    theirs = canonical(query, kafka_streams[query])
    assert theirs, f"{query} produced nothing: the comparison would prove nothing"
    assert ours == theirs, (f"{query}: {len(ours)} records against Kafka Streams' "
                            f"{len(theirs)}; only ours: {sorted(set(ours) - set(theirs))[:3]}"
                            f"; only theirs: {sorted(set(theirs) - set(ours))[:3]}")
