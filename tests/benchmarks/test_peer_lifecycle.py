"""Issue 23's scenarios of the peer benchmark, end to end at tiny sizes on the real broker:
exactly-once against at-least-once, start-up, and a worker joining and leaving; and the
pause measure (``scale_out.longest_gap``) on hand-made times."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.peers import report
from benchmarks.peers.contenders import Contender
from benchmarks.peers.scale_out import longest_gap, pause, scale_out
from benchmarks.peers.scenarios import Bench, Sizes
from benchmarks.peers.startup import startup
from benchmarks.peers.targets import targets
from benchmarks.peers.topics import OutputRecord, offset_reader


def test_a_pause_belongs_to_the_window_in_which_output_resumed() -> None:
    times = [0.0, 0.1, 0.2, 3.2, 3.3, 4.0]
    assert longest_gap(times, 0.15, 3.0) == pytest.approx(0.1)  # 3.2 comes after 3.0
    assert longest_gap(times, 3.0, 5.0) == pytest.approx(3.0)  # 0.2 -> 3.2, counted whole


def test_output_that_never_resumes_is_paused_to_the_window_end() -> None:
    assert longest_gap([0.0, 0.1, 1.0], 0.5, 4.0) == pytest.approx(3.0)
    assert longest_gap([], 1.0, 4.0) == pytest.approx(3.0)


def test_one_paused_partition_is_the_pause_even_while_others_flow() -> None:
    flowing = [OutputRecord(0, i, b"k", b"{}", 100 * i) for i in range(50)]  # every 0.1 s
    stuck = [OutputRecord(1, 0, b"j", b"{}", 0), OutputRecord(1, 1, b"j", b"{}", 4_000)]
    worst, merged = pause(flowing + stuck, 1.0, 5.0)
    assert worst == pytest.approx(4.0)
    assert merged == pytest.approx(0.1)


@given(st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=40),
       st.floats(0, 50), st.floats(0.1, 60))
def test_no_gap_that_ends_in_the_window_is_longer_than_the_reported_one(
        raw: list[float], start: float, width: float) -> None:
    times, end = sorted(raw), start + width
    reported = longest_gap(times, start, end)
    for a, b in itertools.pairwise(times):
        if start < b <= end:
            assert b - a <= reported
    assert reported <= max(end, times[-1]) - min(times[0], start)


@pytest.mark.kafka
async def test_exactly_once_runs_to_the_end_and_reports_its_ratio(
        kafka_bootstrap: str) -> None:
    # one round (the order of rounds: below; the judging: test_standalone_scenarios)
    sizes = Sizes(p1=600, p2=3_000, keys=100, eos_rounds=1)
    async with offset_reader(kafka_bootstrap) as reader:
        bench = Bench(kafka_bootstrap, reader, sizes, peers_python=None, say=lambda _: None)
        await bench.eos()
        warm_up = f"bench-warm-up-{bench.stamp}"  # its transactions committed, untimed
        assert await reader.committed(warm_up, warm_up) == {p: 10 for p in range(8)}
    assert len(bench.rows) == 4
    for row in bench.rows:
        assert row.result.error is None, (row.scenario, row.result.error)
        assert row.verdict is not None
        assert (row.verdict.missing, row.verdict.duplicates) == (0, 0), row.scenario
        assert row.verdict.key_order_violations == 0
        assert row.ok and row.result.rate > 0
    found = [t for t in targets(bench.rows) if t.scenario.startswith("EOS")]
    assert [t.scenario for t in found] == ["EOS P1 sleep"] * 2 + ["EOS P2"] * 2
    # runs this short may use too little CPU to read (clock ticks): the CPU ratio can be
    # unmeasured here, the rates' ratio cannot
    for by_cpu, by_rate in (found[:2], found[2:]):
        assert "CPU per record" in by_cpu.claim and not by_cpu.judged  # one round
        assert by_rate.measured is not None and by_rate.measured > 0, by_rate.claim
    assert "`python -m benchmarks eos`" in report.current_table(bench.rows, found)


async def test_exactly_once_rounds_alternate_the_guarantees_and_flip_their_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[tuple[str, str]] = []

    async def case(self: Bench, scenario: str, contender: Contender, *args: object,
                   **kwargs: object) -> None:
        runs.append((scenario, contender.label))

    async def warm(*args: object) -> None:
        pass

    monkeypatch.setattr(Bench, "case", case)
    monkeypatch.setattr("benchmarks.peers.scenarios.warm_transactions", warm)
    bench = Bench("unused:9092", None, Sizes(), peers_python=None,  # type: ignore[arg-type]
                  say=lambda _: None)
    await bench.eos()
    eos, alo = "aiostreams exactly_once", "aiostreams"
    assert runs == [(f"EOS {s} #{i}", label)
                    for i, pair in ((1, (eos, alo)), (2, (alo, eos)), (3, (eos, alo)))
                    for label in pair for s in ("P1 sleep", "P2")]


@pytest.mark.kafka
async def test_start_up_is_measured_per_start_and_its_median_is_judged(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    async with offset_reader(kafka_bootstrap) as reader:
        bench = Bench(kafka_bootstrap, reader, Sizes(keys=100), peers_python=None,
                      say=lambda _: None)
        await startup(bench, 2)
    assert [r.scenario for r in bench.rows] == ["Start-up #1", "Start-up #2"]
    for row in bench.rows:
        assert row.result.error is None, row.result.error
        assert 0 < row.figures["first output s"] < 30
    (target,) = [t for t in targets(bench.rows) if t.scenario == "Start-up"]
    assert target.unit == "s" and target.measured is not None
    assert target.measured == pytest.approx(
        sorted(r.figures["first output s"] for r in bench.rows)[0] / 2
        + sorted(r.figures["first output s"] for r in bench.rows)[1] / 2)
    table = report.current_table(bench.rows, [target])
    assert f"| Start-up | {target.measured:.2f} s |" in table
    assert "`python -m benchmarks startup`" in table
    report.chart(bench.rows, tmp_path / "peers.png")
    assert (tmp_path / "peers.png").stat().st_size > 0


@pytest.mark.kafka
@pytest.mark.chaos  # about 30 s: two workers, two rebalances, a live input
async def test_a_worker_joining_and_leaving_keeps_every_output_and_reports_the_pauses(
        kafka_bootstrap: str) -> None:
    sizes = Sizes(keys=100, live_rate=500, settle=1.0, window=1.0)
    async with offset_reader(kafka_bootstrap) as reader:
        bench = Bench(kafka_bootstrap, reader, sizes, peers_python=None, say=lambda _: None)
        await scale_out(bench)
    (row,) = bench.rows
    assert row.result.error is None, row.result.error
    assert row.verdict is not None and row.verdict.missing == 0 and row.verdict.received > 0
    assert row.verdict.key_order_violations == 0 and row.ok
    assert {"baseline gap s", "join pause s", "leave pause s"} <= set(row.figures)
    found = [t for t in targets(bench.rows) if t.scenario == "Scale-out"]
    assert [t.measured for t in found] == [row.figures["join pause s"],
                                           row.figures["leave pause s"]]
    assert "`python -m benchmarks scaleout`" in report.current_table(bench.rows, found)
