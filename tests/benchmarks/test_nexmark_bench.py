"""The Nexmark benchmark: its generator is deterministic and keeps Nexmark's proportions and
q4's premise (every bid within its auction's lifetime), and its harness runs end to end at
a tiny size on the real broker, both frameworks' outputs read back and found equal (q7: a
repartition, a windowed store, windowed keys on the wire; one query keeps it to a JVM and a
Python process)."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.nexmark.bench import UNCACHED_REFERENCE, Row, measure, table_line
from benchmarks.nexmark.generator import Config, check_lifetimes, events
from benchmarks.nexmark.jvm import Timed
from benchmarks.nexmark.model import Auction, Bid, Person
from benchmarks.nexmark.topics import encoded


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 3_000), rate=st.sampled_from([1, 10, 1_000, 100_000]),
       seed=st.integers(0, 2**32))
def test_every_bid_falls_within_its_auctions_lifetime(n: int, rate: int, seed: int) -> None:
    check_lifetimes(Config(n, rate, seed))


@settings(max_examples=25, deadline=None)
@given(epochs=st.integers(1, 40), seed=st.integers(0, 2**32))
def test_fifty_events_are_one_person_three_auctions_and_46_bids(epochs: int,
                                                                seed: int) -> None:
    kinds = Counter(type(e).__name__ for e in events(Config(50 * epochs, seed=seed)))
    assert kinds == {"Person": epochs, "Auction": 3 * epochs, "Bid": 46 * epochs}


def test_the_same_seed_gives_the_same_bytes_and_time_never_decreases() -> None:
    config = Config(5_000, rate=2_000, seed=7)
    first = [encoded(e) for e in events(config)]
    assert first == [encoded(e) for e in events(config)]
    assert first != [encoded(e) for e in events(Config(5_000, rate=2_000, seed=8))]
    times = [e.date_time for e in events(config)]
    assert times == sorted(times)
    assert times[-1] - times[0] == 4_999 * 1000 // 2_000


def test_bids_and_auctions_refer_to_earlier_events() -> None:
    persons: set[int] = set()
    auctions: set[int] = set()
    for e in events(Config(10_000, seed=3)):
        if isinstance(e, Person):
            persons.add(e.id)
        elif isinstance(e, Auction):
            assert e.seller in persons
            auctions.add(e.id)
        else:
            assert isinstance(e, Bid)
            assert e.auction in auctions and e.bidder in persons


@pytest.mark.kafka
@pytest.mark.timeout(300)
async def test_the_harness_runs_both_frameworks_and_finds_their_outputs_equal(
        kafka_bootstrap: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = await measure(kafka_bootstrap, Config(2_000, rate=200), 2, ["q7"],
                             timeout=120, profile=Path(tmp))
        assert (Path(tmp) / "nexmark-q7.prof").stat().st_size > 0
    bids = sum(isinstance(e, Bid) for e in events(Config(2_000, rate=200)))
    assert [row.query for row in rows] == ["q7"]
    for row in rows:
        assert row.equal, f"{row.query}: the outputs differ"
        assert row.compared > 0
        assert row.aiostreams.inputs == bids and row.kafka_streams is not None
        assert row.kafka_streams.inputs == bids
        assert row.aiostreams.cpu_seconds > 0 and row.kafka_streams.cpu_seconds > 0


def test_a_query_whose_kafka_streams_answer_moves_with_its_cache_shows_both_comparisons(
        ) -> None:
    ours, theirs = Timed(1_000, 10, 1.0, 0.02), Timed(1_000, 8, 1.0, 0.04)
    differs_from_cached = Row("q4", ours, theirs, False, 8, 1_000, equal_uncached=True)
    line = table_line(differs_from_cached)
    assert line.endswith("| ✗ (✔ against Kafka Streams with its cache off) |")
    assert differs_from_cached.as_dict()["equal_to_uncached_kafka_streams"] is True
    # a query compared with the cached run only keeps its one mark
    assert table_line(Row("q5", ours, theirs, True, 8, 1_000)).endswith("| ✔ |")
    assert "q4" in UNCACHED_REFERENCE and "q5" not in UNCACHED_REFERENCE
