"""The metrics endpoint and /health, scraped over HTTP from a live app; the progress line."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from aiostreams import App, Processor, Record, TaskFailedError, TumblingWindows
from aiostreams.ops.metrics import AppTotals, MetricsServer, TaskTracker
from aiostreams.ops.progress import ProgressLine, Sample, rate, render
from aiostreams.runtime.clock import ManualClock
from aiostreams.testing import Sequencer, settle
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord, TopicPartition

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


class CommitLog(list[Any]):
    """``app.commit_log`` that lets a test await the next commit instead of sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    def append(self, item: Any) -> None:
        super().append(item)
        self.changed.set()


async def committed_up_to_end(app: App, broker: MemoryBroker, topic: str,
                              log: CommitLog | None = None) -> None:
    log = app.commit_log if log is None else log
    assert isinstance(log, CommitLog)
    tps = [TopicPartition(topic, p) for p in range(broker.partition_count(topic) or 0)]
    async with asyncio.timeout(10):
        while any((broker.committed(app.name, tp) or 0) < broker.end_offset(tp) for tp in tps):
            log.changed.clear()
            await log.changed.wait()


class Choosy(Processor[str, str]):
    """Fails "flaky-*" values on their first attempt (then they pass) and "bad-*" always."""

    failed_once: set[str]

    async def init(self, context: Any) -> None:
        await super().init(context)
        self.failed_once = set()

    def process(self, record: Record[str, str]) -> None:
        value = record.value
        if value.startswith("bad-"):
            raise ValueError(f"{value} is bad")
        if value.startswith("flaky-") and value not in self.failed_once:
            self.failed_once.add(value)
            raise ConnectionError("try again")
        self.context.forward(record)


def choosy_app(broker: MemoryBroker) -> App:
    app = App("choosy", transport=MemoryTransport(broker), dead_letter_topic="choosy-dlq",
              retry_attempts=2, retry_backoff=0.0, commit_interval_ms=5.0, poll_timeout=0.01)
    app.topic("in", key=str, value=str, partitions=2)
    app.topic("out", key=str, value=str, partitions=2)
    app.topology.add_source("src", "in").add_processor("choosy", Choosy, "src").add_sink(
        "sink", "out", "choosy")
    app.commit_log = CommitLog()
    return app


def produce(broker: MemoryBroker, topic: str, values: list[str]) -> None:
    broker.create_topic(topic, 2)
    broker.append([(OutgoingRecord(topic, f"k{i}".encode(), v.encode(), 1.0), i % 2)
                   for i, v in enumerate(values)])


def waiting_app(name: str, sequencer: Sequencer, clock: ManualClock,
                records: list[tuple[bytes, bytes, float]], **settings: Any) -> App:
    """An app of one partition whose processor waits for ``sequencer`` to release each
    record's value; ``records`` (key, value, timestamp) are in its input already."""

    class Waits(Processor[str, str]):
        async def process(self, record: Record[str, str]) -> None:
            await sequencer.wait(record.value)
            self.context.forward(record)

    broker = MemoryBroker()
    broker.create_topic("in", 1)
    broker.append([(OutgoingRecord("in", k, v, ts), 0) for k, v, ts in records])
    app = App(name, transport=MemoryTransport(broker), clock=clock, poll_timeout=0.01,
              **settings)
    app.topic("in", key=str, value=str)
    app.topic("out", key=str, value=str)
    app.topology.add_source("src", "in").add_processor("waits", Waits, "src").add_sink(
        "sink", "out", "waits")
    app.commit_log = CommitLog()
    return app


async def failed_choosy_probe(path: str) -> tuple[int, dict[str, Any]]:
    """What ``path`` of a MetricsServer answers once the choosy app failed on a bad record."""
    broker = MemoryBroker()
    app = choosy_app(broker)
    app.settings.on_error = "fail"
    produce(broker, "in", ["bad-1"])
    async with MetricsServer(app) as server:
        await app.start()
        with pytest.raises(TaskFailedError):
            await app.wait()  # returns once the task failed and the app stopped
        return await health(server.url.removesuffix("/metrics") + path)


async def scrape(url: str) -> Samples:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name`` over the series whose labels include ``labels``."""
    return sum(value for (n, series), value in samples.items()
               if n == name and set(labels.items()) <= set(series))


async def health(url: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.json()


@pytest.fixture
async def served() -> AsyncIterator[tuple[App, MemoryBroker, MetricsServer]]:
    broker = MemoryBroker()
    app = choosy_app(broker)
    server = MetricsServer(app, port=0)
    await server.start()
    try:
        yield app, broker, server
    finally:
        await app.stop()
        await server.stop()


async def test_scrape_reports_what_the_app_did(
        served: tuple[App, MemoryBroker, MetricsServer]) -> None:
    app, broker, server = served
    values = [f"ok-{i}" for i in range(14)] + ["flaky-1", "flaky-2", "flaky-3", "bad-1",
                                               "bad-2"]
    produce(broker, "in", values)
    await app.start()
    await committed_up_to_end(app, broker, "in")
    samples = await scrape(server.url)

    assert total(samples, "aiostreams_task_records_in_total", app="choosy") == 19
    assert total(samples, "aiostreams_task_records_out_total") == 17 + 2  # + dead letters
    assert total(samples, "aiostreams_task_retries_total") == 3 + 2  # flaky once, bad once
    assert total(samples, "aiostreams_task_dead_letters_total") == 2
    assert total(samples, "aiostreams_task_skipped_total") == 0
    assert total(samples, "aiostreams_processor_errors_total", node="choosy") == 2
    assert total(samples, "aiostreams_task_in_flight") == 0
    assert total(samples, "aiostreams_task_reorder_buffer_capacity") == 2 * 20_000  # default
    assert total(samples, "aiostreams_task_enforced_processing_total") == 0
    assert total(samples, "aiostreams_tasks") == 2
    assert total(samples, "aiostreams_app_state", state="running") == 1
    assert total(samples, "aiostreams_app_state", state="stopped") == 0
    commits = total(samples, "aiostreams_commits_total")
    assert commits >= 1
    assert total(samples, "aiostreams_commit_latency_seconds_count") == len(app.commit_log)
    assert total(samples, "aiostreams_commit_latency_seconds_bucket", le="+Inf") == len(
        app.commit_log)
    assert total(samples, "aiostreams_consumer_lag_records", topic="in") == 0
    assert len([k for k in samples if k[0] == "aiostreams_consumer_lag_records"]) == 2

    produce(broker, "in", ["ok-late"])  # counters move between scrapes
    await committed_up_to_end(app, broker, "in")
    again = await scrape(server.url)
    assert total(again, "aiostreams_task_records_in_total") == 20


async def test_health_is_200_only_while_the_app_runs(
        served: tuple[App, MemoryBroker, MetricsServer]) -> None:
    app, broker, server = served
    url = server.url.removesuffix("/metrics") + "/health"
    assert await health(url) == (503, {"app": "choosy", "state": "created", "tasks": 0,
                                       "status": "down"})
    produce(broker, "in", ["ok-1"])
    await app.start()
    status, body = await health(url)
    assert (status, body["state"]) == (200, "running")
    await app.stop()
    assert await health(url) == (503, {"app": "choosy", "state": "stopped", "tasks": 0,
                                       "status": "down"})


async def test_failed_app_health_names_the_failure() -> None:
    status, body = await failed_choosy_probe("/health")
    assert status == 503
    assert body["state"] == "failed"
    assert "processor 'choosy' failed on in[0]@0" in body["error"]


async def test_in_flight_and_retire_lag_show_a_record_stuck_at_the_head() -> None:
    sequencer = Sequencer()
    clock = ManualClock(start=1_000.0)
    app = waiting_app("waits", sequencer, clock, [(b"k", b"stuck", 993.5),
                                                  (b"j", b"fast", 999.0)])
    async with MetricsServer(app, host="127.0.0.1") as server:
        assert server.url.startswith("http://127.0.0.1:")
        await app.start()
        try:
            await sequencer.wait_started("stuck")
            sequencer.release("fast")
            await sequencer.wait_started("fast")
            samples = await scrape(server.url)
            assert total(samples, "aiostreams_task_in_flight") == 2
            assert total(samples, "aiostreams_task_retire_lag_seconds") == 6.5
            assert total(samples, "aiostreams_task_reorder_buffer_max_depth") == 2
            tracker = TaskTracker()
            totals = tracker.totals(app)
            assert (totals.in_flight, totals.retire_lag, totals.records_in) == (2, 6.5, 2)
        finally:
            sequencer.release("stuck")
            await app.stop()


async def test_health_is_degraded_naming_a_record_stuck_at_the_head_and_warns_once(
        caplog: pytest.LogCaptureFixture) -> None:
    sequencer = Sequencer()
    clock = ManualClock(start=1_000.0)
    app = waiting_app("stalls", sequencer, clock, [(b"k", b"stuck", 999.0)],
                      stuck_record_warning=30.0)
    async with MetricsServer(app) as server:
        url = server.url.removesuffix("/metrics") + "/health"
        await app.start()
        try:
            await sequencer.wait_started("stuck")
            clock.advance(29.0)  # the commit timer checks every second
            status, body = await health(url)
            assert (status, body["status"]) == (200, "ok")
            clock.advance(2.0)
            status, body = await health(url)
            assert (status, body["status"], body["state"]) == (503, "degraded", "running")
            (stalled,) = body["stalled"]
            assert stalled["record"] == "in[0]@0" and stalled["seconds"] >= 30.0
            assert stalled["task"] == app.status().tasks[0].task_id
            clock.advance(60.0)
            warnings = [r.getMessage() for r in caplog.records if r.name == "aiostreams.stall"]
            assert len(warnings) == 1 and "record in[0]@0 has not retired" in warnings[0]
            sequencer.release("stuck")
            await app.inspect().worker.next_commit()  # type: ignore[union-attr]  # internal
            clock.advance(1.0)
            status, body = await health(url)
            assert (status, body["status"]) == (200, "ok")
        finally:
            sequencer.release("stuck")
            await app.stop()


async def test_tracker_keeps_totals_of_tasks_closed_since() -> None:
    broker = MemoryBroker()
    app = choosy_app(broker)
    commits = app.commit_log
    assert isinstance(commits, CommitLog)
    tracker = TaskTracker()
    tracker.watch_commits(app)
    produce(broker, "in", ["ok-1", "ok-2", "bad-1"])
    await app.start()
    await committed_up_to_end(app, broker, "in", commits)
    await app.stop()
    assert app.status().tasks == ()
    totals = tracker.totals(app)
    assert (totals.records_in, totals.dead_lettered, totals.tasks) == (3, 1, 0)


def test_metrics_server_refuses_a_port_out_of_range() -> None:
    with pytest.raises(ValueError, match=r"0\.\.65535"):
        MetricsServer(App("x"), port=70000)


def test_progress_line_shows_rate_in_flight_lag_retries_and_dead_letters() -> None:
    before = Sample(10.0, AppTotals(records_in=1000))
    after = Sample(12.0, AppTotals(records_in=5000, in_flight=37, buffered=120,
                                   retire_lag=0.214, retries=3, dead_lettered=1, commits=12))
    assert rate(None, after) == 0.0
    assert rate(before, after) == 2000.0
    assert render("enricher", after.totals, rate(before, after)) == (
        "enricher ▸ 2,000 rec/s · in-flight 37 · buffered 120 · retire lag 0.21s · "
        "retries 3 · dead letters 1 · commits 12")


async def test_progress_line_draws_on_a_terminal_and_clears_when_cancelled() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=200)
    line = ProgressLine(App("shown"), TaskTracker(), console)
    drawing = asyncio.create_task(line.run())
    await settle()  # the task starts, draws its first frame, then waits for the next tick
    assert "rec/s" in out.getvalue()
    drawing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await drawing
    assert "shown ▸ 0 rec/s · in-flight 0" in out.getvalue()


async def test_the_commit_log_keeps_the_latest_commits_while_metrics_count_every_one(
        served: tuple[App, MemoryBroker, MetricsServer],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import aiostreams.ops.commit_history as commit_history

    monkeypatch.setattr(commit_history, "COMMIT_LOG_LIMIT", 3)
    app, broker, server = served
    await app.start()
    for i in range(6):  # one commit (at least) per round: the offsets move each time
        produce(broker, "in", [f"ok-{i}"])
        await committed_up_to_end(app, broker, "in")
    samples = await scrape(server.url)
    worker = app.status().worker
    assert worker is not None and worker.commits >= 6
    assert len(app.commit_log) == 3  # a worker runs for months: the log does not grow
    assert app.commit_log[-1].offsets  # the latest commit is kept
    assert total(samples, "aiostreams_commit_latency_seconds_count") == worker.commits


async def test_head_of_line_wait_shows_in_the_scrape_and_the_status_view(
        served: tuple[App, MemoryBroker, MetricsServer]) -> None:
    app, broker, server = served
    produce(broker, "in", ["ok-1", "ok-2"])
    await app.start()
    await committed_up_to_end(app, broker, "in")
    task = app.inspect().tasks["0_1"]  # the engine's figures (tests/engine/test_head_of_line.py),
    task.head_of_line.total, task.head_of_line.longest = 7.25, 4.5  # set to known ones
    task.head_of_line.blocked = 3
    samples = await scrape(server.url)
    status = app.status().task("0_1")

    labels = {"app": "choosy", "task": "0_1"}
    assert total(samples, "aiostreams_task_head_of_line_wait_seconds_total", **labels) == 7.25
    assert total(samples, "aiostreams_task_head_of_line_wait_max_seconds", **labels) == 4.5
    assert total(samples, "aiostreams_task_head_of_line_blocked_records_total", **labels) == 3
    assert (status.head_of_line_wait, status.head_of_line_wait_max,
            status.head_of_line_blocked) == (7.25, 4.5, 3)


async def test_records_a_window_dropped_as_late_are_counted_per_task_and_node() -> None:
    app = App("late-drops", transport=MemoryTransport(MemoryBroker()), commit_interval_ms=5)
    clicks = app.topic("clicks", key=str, value=str, partitions=2)
    (app.stream(clicks).group_by_key().windowed_by(TumblingWindows(10.0, grace=0.0))
     .count(materialized="per-10s", name="count-10s"))
    profiles = app.topic("profiles", key=str, value=str, partitions=1)
    app.table(profiles, name="profiles-table")
    async with app, MetricsServer(app) as server:
        # one key per partition (murmur2: "d" -> 1, "c" -> 0); 30.0 closes [0, 10)
        for key, stamps in (("d", (30.0, 5.0, 6.0, 31.0)), ("c", (30.0, 2.0))):
            for stamp in stamps:
                await app.send(clicks, key, "x", timestamp=stamp)
        await app.send(profiles, None, "a profile without a key")  # a table cannot hold it
        await app.send(profiles, "p1", "kept")
        await app.wait_until_caught_up(timeout=30)
        samples = await scrape(server.metrics_url)
    dropped = {(dict(labels)["task"], dict(labels)["node"], dict(labels)["reason"]): value
               for (n, labels), value in samples.items()
               if n == "aiostreams_task_dropped_records_total"}
    assert dropped == {("0_1", "count-10s", "late"): 2.0, ("0_0", "count-10s", "late"): 1.0,
                       ("1_0", "profiles-table", "null_key"): 1.0}
    assert total(samples, "aiostreams_task_dropped_records_total", app="late-drops",
                 node="count-10s", reason="late") == app.late_records.total == 3
    assert app.dropped_records.total == 4
