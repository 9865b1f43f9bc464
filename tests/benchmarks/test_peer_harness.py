"""The peer benchmark's harness, end to end at a tiny size: P2, P1 with a tail and P1 with
Zipf keys for aiostreams and the raw aiokafka loop (no peers venv), each a process of its
own on the real broker."""

from __future__ import annotations

import pytest

from benchmarks.peers import contenders as c
from benchmarks.peers import report
from benchmarks.peers.runner import io_server
from benchmarks.peers.scenarios import Bench, Sizes
from benchmarks.peers.targets import targets
from benchmarks.peers.topics import offset_reader
from benchmarks.peers.workload import hottest_key_share, records


@pytest.mark.kafka
async def test_p2_outputs_are_complete_and_in_key_order(kafka_bootstrap: str) -> None:
    sizes = Sizes(p2=2_000, keys=100)
    async with offset_reader(kafka_bootstrap) as reader:
        bench = Bench(kafka_bootstrap, reader, sizes, peers_python=None, say=lambda _: None)
        await bench.p2([c.raw_aiokafka("batch"), c.aiostreams()])
    assert [row.contender.label for row in bench.rows] == [
        "raw aiokafka (batch API)", "aiostreams"]
    # the broker is the suite's own process here: its CPU is sampled beside each run's
    assert bench.broker_pid is not None
    for row in bench.rows:
        assert row.result.error is None, row.result.error
        assert row.result.broker_cpu is not None and row.result.broker_cpu >= 0
        assert row.verdict is not None
        assert (row.verdict.received, row.verdict.missing) == (2_000, 0)
        assert row.verdict.key_order_violations == 0
        assert row.result.rate > 0
        assert row.ok
    (ratio,) = [t for t in targets(bench.rows) if "raw aiokafka" in t.claim]
    assert ratio.measured is not None


def test_zipf_keys_put_a_hot_key_in_front_and_uniform_keys_do_not() -> None:
    zipf = hottest_key_share(20_000, 10_000, "zipf")
    uniform = hottest_key_share(20_000, 10_000, "uniform")
    assert zipf > 0.1 * 20_000  # Zipf(1.1) over 10k keys: the top key has ~15%
    assert uniform < 0.001 * 20_000
    keys = [k for k, _ in records(2_000, 100, skew="zipf")]
    assert keys.count(b"user-0") == max(keys.count(k) for k in set(keys))


@pytest.mark.kafka
async def test_p1_tail_and_zipf_scenarios_run_end_to_end_in_key_order(
        kafka_bootstrap: str) -> None:
    sizes = Sizes(p1_tail=400, p1_zipf=200, keys=100)
    async with offset_reader(kafka_bootstrap) as reader:
        bench = Bench(kafka_bootstrap, reader, sizes, peers_python=None, say=lambda _: None)
        for contender in (c.aiostreams(), c.raw_aiokafka()):
            await bench.case("P1 tail", contender, sizes.p1_tail, 1, io="tail",
                             track_commits=True)
        async with io_server(0.005) as url:
            await bench.p1_zipf(url)
    assert len(bench.rows) == 2 + 4 * 2
    for row in bench.rows:
        assert row.result.error is None, (row.scenario, row.result.error)
        assert row.verdict is not None and row.verdict.missing == 0
        assert row.verdict.key_order_violations == 0, row.scenario
        assert row.ok
    found = {t.scenario: t for t in targets(bench.rows) if t.measured is not None}
    assert {"P1 tail", "P1 sleep zipf", "P1 jitter zipf", "P1 tail zipf",
            "P1 http zipf"} <= set(found)
    assert all(r.limit is not None for r in bench.rows if r.scenario.endswith("zipf"))
    table = report.current_table(bench.rows, targets(bench.rows))
    assert table.count("\n") == 1 + len(targets(bench.rows))  # header, rule, a line each
    assert "| P1 tail zipf |" in table and "`python -m benchmarks p1`" in table


@pytest.mark.kafka
async def test_memory_scenarios_run_end_to_end_and_report_rss(kafka_bootstrap: str) -> None:
    sizes = Sizes(p5=100_000, stuck_seconds=3.0, keys=100)  # long enough for RSS samples
    async with offset_reader(kafka_bootstrap) as reader:
        bench = Bench(kafka_bootstrap, reader, sizes, peers_python=None, say=lambda _: None)
        await bench.p5()
    assert [row.scenario for row in bench.rows] == ["P5", "P5 async", "P5 stuck"]
    for row in bench.rows:
        assert row.result.error is None, (row.scenario, row.result.error)
        assert row.result.rss
    assert bench.rows[0].result.records == 100_000
    found = {t.scenario: t for t in targets(bench.rows)}
    assert found["P5"].unit == "MB" and found["P5"].measured is not None
    stuck = {t.claim.split(":")[0]: t for t in targets(bench.rows)
             if t.scenario == "P5 stuck"}
    held = stuck["what one stuck record holds"]
    assert held.measured is not None and held.threshold == 32.0
    # against the same async pipeline without the stuck record, not the sync P5 run
    assert held.measured == pytest.approx(
        (max(b for _, b in bench.rows[2].result.rss)
         - max(b for _, b in bench.rows[1].result.rss)) / 2**20)
