"""The scenarios ``python -m benchmarks all`` runs besides the contenders - the engine
against its limits, restore against Kafka Streams, P1 http's bare-client limit - end to end
on small inputs (not timed: the rates are reported, not judged here), and the targets and
header the table shows for them."""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest

from benchmarks._broker import listening_pid
from benchmarks.peers import report
from benchmarks.peers.harness import ALL
from benchmarks.peers.runner import io_server
from benchmarks.peers.scenarios import IO_SECONDS, Bench, Row, Sizes, zipf_wait
from benchmarks.peers.standalone import (
    API_FLOOR_ASYNC,
    API_FLOOR_SYNC,
    ENGINE_ASYNC,
    ENGINE_SYNC,
    HTTP_LEVELS,
    HTTP_LIMIT,
    KAFKA_STREAMS,
    RESTORE,
    _row,
    engine,
    http_client_rate,
    http_limit,
    restore,
)
from benchmarks.peers.targets import Target, X, targets


def bench_on(bootstrap: str, sizes: Sizes) -> Bench:
    reader: Any = None  # the standalone scenarios read no topics
    return Bench(bootstrap, reader, sizes, peers_python=None, say=lambda _: None)


def rate(rows: list[Row], scenario: str, label: str) -> float:
    (row,) = [r for r in rows if r.scenario == scenario and r.contender.label == label]
    return row.result.rate


def test_all_runs_the_engine_and_restore_scenarios() -> None:
    assert {"engine", "restore"} <= set(ALL)


async def test_the_engine_scenario_reports_b_and_a_against_their_limits_and_api_floors(
        ) -> None:
    bench = bench_on("unused:9092", Sizes(engine_records=3_000, engine_async_records=2_000,
                                          engine_rounds=1))
    await engine(bench)
    assert all(row.ok for row in bench.rows), [r.result.error for r in bench.rows]
    b2 = rate(bench.rows, ENGINE_ASYNC, "bare asyncio (b'')")
    b_api = rate(bench.rows, ENGINE_ASYNC, API_FLOOR_ASYNC)
    ours = next(r for r in bench.rows if r.scenario == ENGINE_ASYNC)
    found = [t for t in targets(bench.rows) if t.scenario.startswith("Engine")]
    over_api, floor, api_floor, cpu, sync, sync_over_hand, sync_api_floor = found
    # issue 40's targets: the engine over the processor API's floors, judged
    assert (over_api.threshold, over_api.measured) == (0.75, ours.figures["b_ratio_api_median"])
    assert over_api.judged and over_api.met is not None
    assert over_api.limit == f"{b_api:,.0f}/s (b*)" and "(b*)" in over_api.claim
    # one round: the median ratio is that round's (b) over the (b*) row's rate
    b = rate(bench.rows, ENGINE_ASYNC, "aiostreams")
    assert over_api.measured == pytest.approx(b / b_api, rel=1e-3)
    # issue 23's ratios to bare asyncio and the API's floor over it: figures, never judged
    assert floor.measured == pytest.approx(b / b2, rel=1e-3) and floor.met is None
    assert floor.limit == f"{b2:,.0f}/s (b'')"
    assert api_floor.measured == pytest.approx(b_api / b2, rel=1e-3) and api_floor.met is None
    assert cpu.measured == ours.figures["cpu_ratio_median"] and cpu.met is None
    a, a1 = rate(bench.rows, ENGINE_SYNC, "aiostreams"), rate(bench.rows, ENGINE_SYNC,
                                                              "hand-rolled loop (a')")
    a_api = rate(bench.rows, ENGINE_SYNC, API_FLOOR_SYNC)
    assert sync.threshold == 0.7 and sync.met is not None and "(a*)" in sync.claim
    assert sync.measured == pytest.approx(a / a_api, rel=1e-3)
    assert sync_over_hand.measured == pytest.approx(a / a1, rel=1e-3)
    assert sync_api_floor.measured == pytest.approx(a_api / a1, rel=1e-3)
    assert sync_api_floor.met is None and sync_over_hand.met is None
    table = report.current_table(bench.rows, found)
    assert table.count("`python -m benchmarks engine`") == 7


@pytest.mark.kafka
async def test_the_restore_scenario_compares_sqlite_with_kafka_streams_on_the_harness_broker(
        kafka_bootstrap: str) -> None:
    bench = bench_on(kafka_bootstrap, Sizes(restore_updates=2_000, restore_keys=150))
    await restore(bench)
    assert all(row.ok for row in bench.rows), [r.result.error for r in bench.rows]
    ours, theirs = rate(bench.rows, RESTORE, "aiostreams"), rate(bench.rows, RESTORE,
                                                                 KAFKA_STREAMS)
    assert ours > 0 and theirs > 0
    (target,) = targets(bench.rows)
    assert target.threshold == 0.5
    assert target.measured == pytest.approx(ours / theirs, rel=1e-3)
    (line,) = report.current_table(bench.rows, [target]).splitlines()[2:]
    assert f"| {theirs:,.0f} |" in line and line.endswith("`python -m benchmarks restore` |")


async def test_the_bare_aiohttp_client_limit_is_measured_against_the_io_server() -> None:
    bench = bench_on("unused:9092", Sizes())
    async with io_server(0.005) as url:
        before = await http_client_rate(bench, url, 300)
        await http_limit(bench, url, 300, before)
    (row,) = bench.rows
    assert (row.scenario, row.contender.label, row.result.error) == ("P1 http", HTTP_LIMIT,
                                                                    None)
    # one at a time, a GET takes the server's sleep and a round trip: never less
    assert IO_SECONDS <= row.figures["sequential s"] < 1.0
    assert not isinstance(before, str)
    assert [run["in_flight"] for run in before["levels"]] == list(HTTP_LEVELS)
    assert row.result.rate == pytest.approx(
        max(before["rate"], row.figures["after per s"]), abs=1)
    # 300 requests of 5 ms each, many at once: far above one at a time (200/s)
    assert row.result.rate > 1_000
    # the server's CPU is read from the server: it did work for every request
    client, server = row.figures["client cpu us"], row.figures["server cpu us"]
    assert client > 0 and server > 0
    assert row.figures["cpu ceiling per s"] == pytest.approx(
        row.figures["cores"] * 1e6 / (client + server))
    # the ceiling takes each side's least CPU per request over the levels
    least_client = min(level["client_cpu_us"] for level in before["levels"])
    least_server = min(level["server_cpu_us"] for level in before["levels"])
    assert (before["client_cpu_us"], before["server_cpu_us"]) == (least_client, least_server)
    assert before["cpu_ceiling"] == pytest.approx(
        before["cores"] * 1e6 / (least_client + least_server))


def by_claim(found: list[Target], scenario: str, words: str) -> Target:
    (target,) = [t for t in found if t.scenario == scenario and words in t.claim]
    return target


def test_issue_8s_superseded_targets_are_gone_and_their_figures_stay_as_figures() -> None:
    bench = bench_on("unused:9092", Sizes())
    for scenario, label, value in [
            ("P1 sleep", "aiostreams", 45_000.0), ("P1 sleep", "raw aiokafka", 40_000.0),
            ("P1 http", "aiostreams", 12_000.0), ("P1 http", "raw aiokafka", 10_000.0),
            ("P1 http", "quixstreams", 160.0),
            ("P6", "aiostreams", 100_000.0), ("P6", "aiostreams --workers 2", 160_000.0)]:
        _row(bench, scenario, label, "test", value)
    _row(bench, "P1 http", HTTP_LIMIT, "test", 24_000.0).figures.update({
        "cpu ceiling per s": 15_000.0, "client cpu us": 80.0, "server cpu us": 53.3,
        "cores": 2.0})
    found = targets(bench.rows)
    assert not [t for t in found if "min(" in t.claim or "1.7" in t.claim]
    gather = by_claim(found, "P1 sleep", "gather loop (which keeps no key order)")
    assert (gather.threshold, gather.measured) == (0.9, 45_000 / 40_000)
    quix = by_claim(found, "P1 http", "issue 40 replaced")
    assert (quix.measured, quix.judged, quix.met) == (12_000 / 160, False, None)
    assert not [t for t in found if t.scenario == "P1 http" and "≥ 100" in t.claim
                and t.judged]
    limit = by_claim(found, "P1 http", HTTP_LIMIT)
    assert (limit.judged, limit.met, limit.limit) == (False, None, "24,000/s")
    assert limit.measured == 12_000 / 24_000
    assert f"100 {X} quixstreams = 16,000/s is within it" in limit.claim
    ceiling = by_claim(found, "P1 http", "CPU ceiling")
    assert (ceiling.judged, ceiling.met, ceiling.limit) == (True, True, "15,000/s (CPU)")
    assert (ceiling.measured, ceiling.threshold) == (12_000 / 15_000, 0.8)
    assert "2 cores ÷ (client 80 µs + server 53 µs" in ceiling.claim
    assert f"100 {X} quixstreams = 16,000/s is beyond it" in ceiling.claim
    (p6_rate,) = [t for t in found if t.scenario == "P6" and not t.judged]
    assert p6_rate.measured == 1.6 and "not a target" in p6_rate.claim
    assert [t.threshold for t in found if t.scenario == "P6" and t.judged] == [1.1]
    assert "| figure (no target) |" in report.current_table(bench.rows, [p6_rate])


def test_the_brokers_cpu_per_record_caps_what_any_client_can_reach_of_the_pairs_ceiling(
        ) -> None:
    bench = bench_on("unused:9092", Sizes())
    ours = _row(bench, "P1 http", "aiostreams", "test", 12_000.0)
    ours.result.cpu, ours.result.broker_cpu = 12_000 * 81e-6, 12_000 * 37e-6
    _row(bench, "P1 http", HTTP_LIMIT, "test", 16_000.0).figures.update({
        "cpu ceiling per s": 2e6 / 108, "client cpu us": 62.0, "server cpu us": 46.0,
        "cores": 2.0})
    found = targets(bench.rows)
    cap = by_claim(found, "P1 http", "the most any Kafka client can reach")
    with_broker = 2e6 / (62 + 46 + 37)
    assert cap.measured == pytest.approx(with_broker / (2e6 / 108))
    assert (cap.judged, cap.met) == (False, None)
    assert "spent 37 µs of CPU per record" in cap.claim and f"{with_broker:,.0f}/s" in cap.claim
    over = by_claim(found, "P1 http", "with the broker's CPU paid")
    assert over.measured == pytest.approx(12_000 / with_broker)
    # one event loop: 12,000/s at 81 µs a record keeps 0.97 of its one core busy
    core = by_claim(found, "P1 http", "its one core's ceiling")
    assert core.measured == pytest.approx(12_000 * 81e-6)
    assert core.limit == "12,346/s (one core)" and not core.judged
    assert "needs ≤ 68 µs per record" in core.claim and "HTTP alone takes 62 µs" in core.claim
    # the restated target itself is still judged against the pair's ceiling
    assert by_claim(found, "P1 http", "CPU ceiling of the bare").judged


def test_no_broker_figure_without_the_brokers_cpu() -> None:
    bench = bench_on("unused:9092", Sizes())
    ours = _row(bench, "P1 http", "aiostreams", "test", 12_000.0)
    ours.result.cpu = 1.0
    _row(bench, "P1 http", HTTP_LIMIT, "test", 16_000.0).figures.update({
        "cpu ceiling per s": 18_000.0, "client cpu us": 62.0, "server cpu us": 46.0,
        "cores": 2.0})
    assert not [t for t in targets(bench.rows) if "broker" in t.claim]


def test_the_broker_process_is_found_by_its_listening_port() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert listening_pid(f"127.0.0.1:{port}") == os.getpid()
    assert listening_pid(f"127.0.0.1:{port}") is None


def test_a_failed_bare_client_still_shows_its_figure_unmeasured_and_no_ceiling() -> None:
    bench = bench_on("unused:9092", Sizes())
    _row(bench, "P1 http", "aiostreams", "test", 12_000.0)
    _row(bench, "P1 http", HTTP_LIMIT, "test", 0.0, error="before: refused; after: refused")
    found = targets(bench.rows)
    (limit,) = [t for t in found if HTTP_LIMIT in t.claim]
    assert (limit.measured, limit.limit, limit.judged) == (None, "—", False)
    assert not [t for t in found if "CPU ceiling" in t.claim]


def test_the_hottest_keys_http_bound_uses_the_measured_get_and_the_sleep_without_it() -> None:
    assert zipf_wait("http", 0.0062)[0] == 0.0062
    assert "a GET one at a time" in zipf_wait("http", 0.0062)[1]
    assert zipf_wait("http", None)[0] == IO_SECONDS  # not measured: the sleep alone
    assert zipf_wait("sleep", 0.0062)[0] == IO_SECONDS  # a GET's time is for http only


def test_the_header_gives_the_load_average_at_the_start_and_at_the_end() -> None:
    text = report.section([], [], "python -m benchmarks all", Sizes(), "x.png",
                          loads=(0.4, 1.6))
    assert "load average at the start: 0.4, at the end: 1.6" in text
    assert "shared with other engineers" not in text
    printed = report.table([], [], (0.4, 1.6))
    assert printed.startswith("load average at the start: 0.4, at the end: 1.6")


def eos_rounds(cpu_us: list[tuple[float, float]], rates: list[tuple[float, float]]) -> Bench:
    """EOS P2 rounds with (exactly-once, at-least-once) CPU µs per record and rates."""
    bench = bench_on("unused:9092", Sizes())
    for i, ((eos_cpu, alo_cpu), (eos_rate, alo_rate)) in enumerate(
            zip(cpu_us, rates, strict=True), 1):
        for label, cpu, r in (("aiostreams exactly_once", eos_cpu, eos_rate),
                              ("aiostreams", alo_cpu, alo_rate)):
            row = _row(bench, f"EOS P2 #{i}", label, "test", r)
            row.result.cpu = cpu * 1e-6 * row.result.timed
    return bench


def test_exactly_once_is_judged_by_the_median_of_each_rounds_cpu_per_record_ratio() -> None:
    # CPU per record: round ratios 0.8, 1.0, 0.95 (at-least-once's over exactly-once's);
    # the rates favour at-least-once far more (a noisy best of each)
    bench = eos_rounds([(10.0, 8.0), (6.0, 6.0), (8.0, 7.6)],
                       [(100_000, 150_000), (110_000, 120_000), (90_000, 100_000)])
    judged, rates = [t for t in targets(bench.rows) if t.scenario == "EOS P2"]
    assert judged.judged and judged.threshold == 0.9
    assert judged.measured == pytest.approx(0.95) and judged.met
    assert "median of 3 alternating rounds: 0.80, 1.00, 0.95" in judged.claim
    assert "CPU per record" in judged.claim
    assert (rates.judged, rates.met) == (False, None)
    assert rates.measured == pytest.approx(110_000 / 150_000)


def test_exactly_once_costing_more_cpu_per_record_in_most_rounds_is_not_met() -> None:
    bench = eos_rounds([(10.0, 8.0), (6.0, 6.0), (8.0, 7.0)], [(1, 1)] * 3)
    judged, _ = [t for t in targets(bench.rows) if t.scenario == "EOS P2"]
    assert judged.measured == pytest.approx(0.875) and judged.met is False


def test_exactly_once_with_fewer_than_three_rounds_is_shown_but_not_judged() -> None:
    bench = eos_rounds([(10.0, 9.5), (6.0, 6.0)], [(1, 1)] * 2)
    judged, _ = [t for t in targets(bench.rows) if t.scenario == "EOS P2"]
    assert judged.measured is not None and not judged.judged and judged.met is None
    assert "not judged below 3 rounds" in judged.claim


def test_p1_http_shows_aiostreams_cpu_per_record_as_the_client_of_the_same_ceiling() -> None:
    bench = bench_on("unused:9092", Sizes())
    ours = _row(bench, "P1 http", "aiostreams", "test", 1_000.0)  # a loaded machine's rate
    ours.result.cpu = 120e-6 * ours.result.timed  # 120 µs of CPU a record
    _row(bench, "P1 http", HTTP_LIMIT, "test", 24_000.0).figures.update({
        "cpu ceiling per s": 15_000.0, "client cpu us": 80.0, "server cpu us": 53.3,
        "cores": 2.0})
    found = targets(bench.rows)
    judged = by_claim(found, "P1 http", "the CPU ceiling of the bare")
    assert judged.measured == pytest.approx(1_000 / 15_000) and judged.met is False
    by_cpu = by_claim(found, "P1 http", "by CPU")
    assert by_cpu.measured == pytest.approx((2e6 / (120 + 53.3)) / 15_000)
    assert (by_cpu.judged, by_cpu.met) == (False, None) and "120 µs" in by_cpu.claim
