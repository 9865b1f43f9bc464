"""Standby replicas on the memory broker: a second host keeps a copy of the first's task
state from the changelogs; when the first stops, the second takes the tasks over and
restores only what its copy had not applied."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from aiostreams import App
from aiostreams.engine.standby import StandbyTask
from aiostreams.engine.worker import Worker
from aiostreams.errors import ConfigError
from aiostreams.ops.metrics import MetricsServer, metrics_registry
from aiostreams.ops.queries import QueryError
from aiostreams.ops.status_page import render_page
from aiostreams.ops.status_report import status_report
from aiostreams.transport.memory import MemoryBroker

KEYS = [f"k{i}" for i in range(20)]
PARTITIONS = 2


def counting_app(name: str, host: str, state_dir: Path, guarantee: str,
                 persistent: bool = True, **settings: Any) -> App:
    app = App(name, broker=f"memory://{name}", commit_interval_ms=20, poll_timeout=0.01,
              state_dir=state_dir, host_id=host, num_standby_replicas=1,
              processing_guarantee=guarantee, **{"acceptable_recovery_lag": 10, **settings})
    words = app.topic("words", key=str, value=str, partitions=PARTITIONS)
    counts = app.topic("counts", key=str, value=int, partitions=PARTITIONS)
    (app.stream(words).group_by_key().count(materialized="counts", persistent=persistent)
     .to_stream().to(counts))
    return app


def worker(app: App) -> Worker:
    found = app.inspect().worker
    assert found is not None
    return found


async def until(condition: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Poll ``condition`` (nothing announces a standby's progress) up to ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def standbys(app: App) -> dict[str, StandbyTask]:
    placement = worker(app).placement
    assert placement is not None
    return placement.standbys.tasks


def changelog_records(broker: MemoryBroker, name: str) -> int:
    from aiostreams.types import TopicPartition
    topic = f"{name}-counts-changelog"
    return sum(broker.end_offset(TopicPartition(topic, p)) for p in range(PARTITIONS))


async def sees_standbys_from_outside(app: App, expected: dict[str, int]) -> None:
    """Status, metrics and stale reads show the (caught-up) standbys of ``app``."""
    seen = app.status().standbys
    assert [s.task_id for s in seen] == ["0_0", "0_1"]
    assert all(s.ready and s.lag == 0 and s.applied == s.end for s in seen)
    _, collector = metrics_registry(app)
    lags = {sample.labels["task"]: sample.value for family in collector.collect()
            if family.name == "aiostreams_standby_lag_records" for sample in family.samples}
    assert lags == {"0_0": 0.0, "0_1": 0.0}
    with pytest.raises(QueryError):  # never a standby's copy unless asked for
        await app.store("counts").get(KEYS[0])
    report = status_report(app, {})
    assert [(b.task_id, b.lag) for b in report.standbys] == [("0_0", 0), ("0_1", 0)]
    page = render_page(report, "")
    assert "<table id='standbys'>" in page and 'data-k="standby_lag:0_1">0<' in page
    stale = app.store("counts", stale_ok=True)
    assert {k: await stale.get(k) for k in KEYS} == expected
    server = MetricsServer(app, port=0)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            url = f"{server.url.rsplit('/', 1)[0]}/stores/counts/{KEYS[0]}"
            async with session.get(url) as fresh:
                assert fresh.status == 503  # no active task here, no stale read asked for
            async with session.get(f"{url}?stale_ok=1") as answer:
                assert answer.status == 200
                assert (await answer.json())["value"] == expected[KEYS[0]]
    finally:
        await server.stop()


async def send(app: App, start: int, count: int, expected: dict[str, int]) -> None:
    for i in range(start, start + count):
        key = KEYS[(i * 7) % len(KEYS)]
        expected[key] = expected.get(key, 0) + 1
        await app.send("words", key, f"w{i}")


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_a_standby_follows_the_active_and_on_promotion_restores_only_the_tail(
        guarantee: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"standby-{uuid.uuid4().hex[:8]}"
    broker = MemoryBroker.named(name)
    first = counting_app(name, "host-a", tmp_path / "a", guarantee)
    second = counting_app(name, "host-b", tmp_path / "b", guarantee)
    expected: dict[str, int] = {}
    await first.start()
    try:
        await send(first, 0, 200, expected)
        await first.wait_until_caught_up(timeout=30)
        await second.start()
        # the tasks stay with their caught-up owner; the other host follows them
        await until(lambda: sorted(standbys(second)) == ["0_0", "0_1"], "two standbys")
        assert not worker(second).tasks
        await send(first, 200, 100, expected)
        await first.wait_until_caught_up(timeout=30)
        copied = changelog_records(broker, name)
        await until(lambda: all(s.ready.is_set() and s.lag == 0 and s.offset > 0
                                for s in standbys(second).values()), "standbys caught up")
        for task_id, standby in standbys(second).items():
            active = worker(first).tasks[task_id].stores["counts"]
            copy = standby.task.stores["counts"]
            held = [kv async for kv in copy.range(None, None)]
            assert held and held == [kv async for kv in active.range(None, None)]
        await sees_standbys_from_outside(second, expected)
        # the copies stop following (as if their host lagged), more records come, and
        # the active stops: the copies lack the changelog's tail
        table = worker(second).placement.standbys  # type: ignore[union-attr]
        for job in table._jobs.values():
            job.cancel()
        await asyncio.wait(table._jobs.values())
        await send(first, 300, 100, expected)
        await first.wait_until_caught_up(timeout=30)
        held: dict[str, int] = {}
        release = table.release

        async def noting_release(task_id: str) -> None:
            held[task_id] = table.tasks[task_id].offset
            await release(task_id)

        monkeypatch.setattr(table, "release", noting_release)
        await first.stop()
        full = changelog_records(broker, name)
        await until(lambda: sorted(worker(second).tasks) == ["0_0", "0_1"], "promotion")
        await second.wait_until_caught_up(timeout=30)
        # the promoted tasks restored exactly what their copies had not applied
        assert sorted(held) == ["0_0", "0_1"]
        assert worker(second)._core.restorer.restored_records == full - sum(held.values())
        assert sum(held.values()) == copied < full
        await send(second, 400, 100, expected)
        await second.wait_until_caught_up(timeout=30)
        counts = second.store("counts")
        assert {k: await counts.get(k) for k in KEYS} == expected
    finally:
        await second.stop()
        await first.stop()


async def test_a_new_host_warms_up_then_a_probing_rebalance_moves_a_task_to_it(
        tmp_path: Path) -> None:
    name = f"warmup-{uuid.uuid4().hex[:8]}"
    first = counting_app(name, "host-a", tmp_path / "a", "at_least_once")
    second = counting_app(name, "host-b", tmp_path / "b", "at_least_once",
                          probing_rebalance_interval=0.05)
    expected: dict[str, int] = {}
    await first.start()
    try:
        await send(first, 0, 200, expected)
        await first.wait_until_caught_up(timeout=30)
        await second.start()
        # caught up nowhere else, both tasks stay; the new host warms one up, then a
        # probing rebalance finds it caught up and moves it there
        await until(lambda: len(worker(second).tasks) == 1 and len(worker(first).tasks) == 1,
                    "a task moved to the warmed-up host")
        placement = worker(second).placement
        assert placement is not None and not placement.assignment.probing_rebalance
        # it restored from the warm-up's copy, not the changelog's start
        assert worker(second)._core.restorer.restored_records < 20
        await send(first, 200, 100, expected)
        await first.wait_until_caught_up(timeout=30)
        await second.wait_until_caught_up(timeout=30)
        for app in (first, second):
            local = app.store("counts")
            mine = {k: v async for k, v in local.all()}
            assert mine and all(expected[k] == v for k, v in mine.items())
    finally:
        await second.stop()
        await first.stop()


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_a_restarted_host_reports_the_state_on_its_disk_and_gets_a_task_at_once(
        guarantee: str, tmp_path: Path) -> None:
    name = f"restart-{uuid.uuid4().hex[:8]}"
    first = counting_app(name, "host-a", tmp_path / "a", guarantee)
    expected: dict[str, int] = {}
    await first.start()
    second = counting_app(name, "host-b", tmp_path / "b", guarantee)
    try:
        await send(first, 0, 200, expected)
        await first.wait_until_caught_up(timeout=30)
        await second.start()
        await until(lambda: sorted(standbys(second)) == ["0_0", "0_1"]
                    and all(s.ready.is_set() for s in standbys(second).values()),
                    "two standbys")
        await second.stop()  # its copies stay on its disk, flushed with their marks
        # a new member on the same host and directory: its disk holds both tasks' state,
        # so it is caught up and takes one task at once (no warm-up, no probing rebalance)
        second = counting_app(name, "host-b", tmp_path / "b", guarantee)
        await second.start()
        await until(lambda: len(worker(second).tasks) == 1, "a task on the restarted host")
        placement = worker(second).placement
        assert placement is not None and not placement.assignment.warmup
        assert worker(second)._core.restorer.restored_records == 0
        await send(first, 200, 100, expected)
        await first.wait_until_caught_up(timeout=30)
        await second.wait_until_caught_up(timeout=30)
        mine = {k: v async for k, v in second.store("counts").all()}
        assert mine and all(expected[k] == v for k, v in mine.items())
    finally:
        await second.stop()
        await first.stop()


async def test_tasks_whose_stores_are_in_memory_are_placed_as_stateless_without_standbys(
        tmp_path: Path) -> None:
    name = f"inmemory-{uuid.uuid4().hex[:8]}"
    first = counting_app(name, "host-a", tmp_path / "a", "at_least_once", persistent=False)
    second = counting_app(name, "host-b", tmp_path / "b", "at_least_once", persistent=False)
    await first.start()
    try:
        await send(first, 0, 200, {})
        await first.wait_until_caught_up(timeout=30)
        await second.start()
        # no member holds their state but the active's memory: spread at once, no copies
        await until(lambda: len(worker(second).tasks) == len(worker(first).tasks) == 1,
                    "one task each")
        for app in (first, second):
            placement = worker(app).placement
            assert placement is not None and placement.assignment.standby == frozenset()
            assert standbys(app) == {}
    finally:
        await second.stop()
        await first.stop()


async def test_standbys_without_a_state_dir_are_a_config_error() -> None:
    app = App("nostate", broker=f"memory://nostate-{uuid.uuid4().hex[:8]}",
              num_standby_replicas=1)
    words = app.topic("words", key=str, value=str)
    app.stream(words).group_by_key().count(materialized="counts")
    with pytest.raises(ConfigError, match="needs persistent stores: set state_dir"):
        await app.start()
