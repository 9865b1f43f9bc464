"""A rolling change of ``num_standby_replicas`` through the engine (memory broker): three
workers of an app that joins two co-partitioned topics and counts, restarted one at a time
from 0 standbys to 1 and back. Workers with and without standbys share the group at every
step: no worker fails (a split task would raise ``CoPartitioningError``), the workers
asking for standbys follow the others' tasks, and the counts are exact."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

from aiostreams import App
from aiostreams.engine.worker import Worker

PARTITIONS = 4
CUSTOMERS = [f"c{i}" for i in range(12)]
TASKS = {f"0_{p}" for p in range(PARTITIONS)}


def ordering_app(name: str, host: str, state_dir: Path, standbys: int) -> App:
    app = App(name, broker=f"memory://{name}", commit_interval_ms=20, poll_timeout=0.01,
              state_dir=state_dir, host_id=host, num_standby_replicas=standbys,
              processing_guarantee="exactly_once")
    orders = app.topic("orders", key=str, value=int, partitions=PARTITIONS)
    customers = app.topic("customers", key=str, value=str, partitions=PARTITIONS)
    (app.stream(orders).join(app.table(customers), lambda amount, tier: tier)
     .group_by_key().count(materialized="counts", persistent=True))
    return app


def worker(app: App) -> Worker:
    found = app.inspect().worker
    assert found is not None
    return found


async def until(condition: Callable[[], bool], what: Callable[[], str],
                timeout: float = 20.0) -> None:
    """Poll ``condition`` (nothing announces a group having settled) up to ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what()}")
        await asyncio.sleep(0.01)


def standby_tasks(app: App) -> list[str] | None:
    """The app's standby tasks (None: it asks for none)."""
    placement = worker(app).placement
    return None if placement is None else sorted(placement.standbys.tasks)


def describe(apps: list[App]) -> str:
    return "; ".join(f"{i}: active {sorted(worker(a).tasks)} standby {standby_tasks(a)}"
                     for i, a in enumerate(apps))


def standbys_as_asked(apps: list[App]) -> bool:
    """Each task has one standby on another worker that asks for standbys, where there is
    one; the workers without standbys have none."""
    actives = {t: i for i, app in enumerate(apps) for t in worker(app).tasks}
    if set(actives) != TASKS:
        return False
    held = {i: standby_tasks(app) for i, app in enumerate(apps)}
    keepers = {i for i, tasks in held.items() if tasks is not None}
    for task, active in actives.items():
        on = {i for i in keepers if task in (held[i] or ())}
        if len(on) != min(1, len(keepers - {active})) or active in on:
            return False
    return True


async def test_workers_restarted_one_by_one_from_0_standbys_to_1_and_back_keep_the_group(
        tmp_path: Path) -> None:
    name = f"rolling-{uuid.uuid4().hex[:8]}"
    apps = [ordering_app(name, f"host-{i}", tmp_path / str(i), 0) for i in range(3)]
    expected: dict[str, int] = {}
    sent = 0

    async def settle_and_send() -> None:
        nonlocal sent
        await until(lambda: standbys_as_asked(apps),
                    lambda: f"the group settled with its standbys: {describe(apps)}")
        for _ in range(40):
            customer = CUSTOMERS[(sent * 5) % len(CUSTOMERS)]
            expected[customer] = expected.get(customer, 0) + 1
            await apps[0].send("orders", customer, sent)
            sent += 1
        for app in apps:  # raises a worker's failure (a CoPartitioningError, say)
            await app.wait_until_caught_up(timeout=30)

    for app in apps:
        await app.start()
    try:
        for customer in CUSTOMERS:
            await apps[0].send("customers", customer, "gold")
        await settle_and_send()
        for index, standbys in [(i, 1) for i in range(3)] + [(i, 0) for i in range(3)]:
            await apps[index].stop()
            apps[index] = ordering_app(name, f"host-{index}", tmp_path / str(index),
                                       standbys)
            await apps[index].start()
            await settle_and_send()
        counted: dict[str, int] = {}
        for app in apps:
            counted.update({k: v async for k, v in app.store("counts").all()})
        assert counted == expected
    finally:
        for app in apps:
            await app.stop()
