"""The peer benchmark's harness, end to end at a tiny size: P2 for aiostreams and the raw
aiokafka loop (no peers venv), each a process of its own on the real broker."""

from __future__ import annotations

import pytest

from benchmarks.peers import contenders as c
from benchmarks.peers.scenarios import Bench, Sizes
from benchmarks.peers.targets import targets
from benchmarks.peers.topics import offset_reader

pytestmark = pytest.mark.kafka


async def test_p2_outputs_are_complete_and_in_key_order(kafka_bootstrap: str) -> None:
    sizes = Sizes(p2=2_000, keys=100)
    async with offset_reader(kafka_bootstrap) as reader:
        bench = Bench(kafka_bootstrap, reader, sizes, peers_python=None, say=lambda _: None)
        await bench.p2([c.raw_aiokafka("batch"), c.aiostreams()])
    assert [row.contender.label for row in bench.rows] == [
        "raw aiokafka (batch API)", "aiostreams"]
    for row in bench.rows:
        assert row.result.error is None, row.result.error
        assert row.verdict is not None
        assert (row.verdict.received, row.verdict.missing) == (2_000, 0)
        assert row.verdict.key_order_violations == 0
        assert row.result.rate > 0
        assert row.ok
    (ratio,) = [t for t in targets(bench.rows) if "raw aiokafka" in t.claim]
    assert ratio.measured is not None
