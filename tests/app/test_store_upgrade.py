"""Upgrading across the store format change of 2026-11-25: state written by the code before
it (plain aggregates, (seconds, value) time windows, no format marker) refuses to start
with one clear error, never a wrong value, whether it is restored from the changelog,
opened in place, or appended to the changelog later by a host still on the old code; and
``aiostreams store upgrade`` makes the app run on with exact state. On the memory broker
and on a real one."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from appkit import create_topic, unique

from aiostreams import App
from aiostreams.commands.store_upgrade import upgrade_store
from aiostreams.engine.task import task_id_for
from aiostreams.errors import StoreFormatError
from aiostreams.processors.store_values import TimedSerde
from aiostreams.serde import JsonSerde
from aiostreams.state.checkpoint import Checkpoint
from aiostreams.state.store_spec import changelog_topic
from aiostreams.transport.base import Transport
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord, TopicPartition
from aiostreams.windows import TumblingWindows

TEXT = "abcdefghijklmnopqrstuvwxyzabcd"
SUM = 3_703_703_670
STAMP = float(int(time.time()) // 60 * 60 - 120)
"""The old records' event time (s): a minute's start, so window [STAMP, STAMP + 60); recent,
as a window changelog's records expire by time on a real broker."""
OLD = {  # store -> (key, what the code before the change left in it)
    "text": ("k", TEXT),
    "total": ("k", SUM),
    "n": ("k", 30),
    "obj": ("k", {"last": "d", "n": 30}),
    "win": (("k", STAMP), SUM),
}
STORES = sorted(OLD)


def make_app(name: str, transport: Transport, src: str, state_dir: Path) -> App:
    # dynamic membership: a stopped static member (the default with a state_dir) stays in
    # the group for its session timeout, and the upgrade is refused while it does
    app = App(name, transport=transport, state_dir=state_dir, commit_interval_ms=50,
              static_membership=False)
    app.topic(src, key=str, value=JsonSerde())
    grouped = app.stream(src).group_by_key()
    grouped.aggregate("", lambda k, v, acc: acc + v["c"], materialized="text",
                      persistent=True, value_serde=str)
    grouped.aggregate(0, lambda k, v, acc: acc + v["n"], materialized="total",
                      persistent=True)
    grouped.count(materialized="n", persistent=True)
    grouped.aggregate(dict, lambda k, v, acc: {"last": v["c"], "n": acc.get("n", 0) + 1},
                      materialized="obj", persistent=True)
    grouped.windowed_by(TumblingWindows(60.0, grace=3600.0)).aggregate(
        0, lambda k, v, acc: acc + v["n"], materialized="win", persistent=True,
        retention=7200.0)
    return app


def old_bytes(app: App, store: str, key: Any, value: Any) -> tuple[bytes, bytes]:
    """What the code before 2026-11-25 wrote for ``key = value`` in ``store``: the plain
    value for key-value aggregates, ``(seconds, value)`` for time windows."""
    spec = next(s for sub in app.build() for s in sub.stores if s.name == store)
    instance = spec.factory()
    inner = instance.value_serde.inner  # what the TimestampedSerde wraps now
    if store == "win":
        return instance.sort_key(key), TimedSerde(inner).serialize(store, (STAMP, value))
    return instance.sort_key(key), inner.serialize(store, value)


async def send(transport: Transport, records: list[OutgoingRecord]) -> None:
    producer = transport.producer()
    await producer.start()
    try:
        await producer.send_batch(records)
        await producer.flush()
    finally:
        await producer.stop()


async def write_old_changelogs(app: App, transport: Transport) -> None:
    for store in STORES:
        topic = changelog_topic(app.name, store)
        await create_topic(transport, topic, 1)
        key, value = OLD[store]
        k, v = old_bytes(app, store, key, value)
        await send(transport, [OutgoingRecord(topic, k, v, STAMP, (), 0)])  # no header


def write_old_files(app: App, state_dir: Path) -> None:
    """The files the old code left: schema 1, no format, and a checkpoint vouching for
    them up to the changelogs' ends (one record each)."""
    task_dir = state_dir / task_id_for(app.build()[0], 0)
    task_dir.mkdir(parents=True)
    for store in STORES:
        db = sqlite3.connect(task_dir / f"{store}.sqlite")
        db.execute("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID")
        db.execute("INSERT INTO kv VALUES (?, ?)", old_bytes(app, store, *OLD[store]))
        db.execute("PRAGMA user_version=1")
        db.commit()
        db.close()
    Checkpoint(task_dir / ".checkpoint").write(
        {TopicPartition(changelog_topic(app.name, s), 0): 1 for s in STORES})


async def refuses(app: App, *, where: str) -> StoreFormatError:
    with pytest.raises(StoreFormatError) as caught:
        await app.start()
        await app.wait()
    await app.stop()
    message = str(caught.value)
    assert caught.value.expected in ("kv-timestamped/2", "window-timestamped/2"), message
    assert where in message and "store upgrade" in message and caught.value.store in message
    return caught.value


async def upgrade_all(app: App, transport: Transport) -> None:
    for store in STORES:
        assert await upgrade_store(app, transport, store, say=lambda _: None) == 0


async def feed_and_read(app: App, transport: Transport, src: str) -> dict[str, Any]:
    """Four more records of ``k`` in the old window; the stores' values of ``k`` after."""
    await send(transport, [OutgoingRecord(src, b"k", orjson.dumps({"c": c, "n": 10}),
                                          STAMP + 1, (), 0) for c in "wxyz"])
    async with app:
        await app.wait_until_caught_up(timeout=60.0)
        found = {s: await app.store(s).get(OLD[s][0]) for s in STORES}
    return found


EXACT = {"text": TEXT + "wxyz", "total": SUM + 40, "n": 34, "obj": {"last": "z", "n": 34},
         "win": SUM + 40}


@pytest.fixture(params=["memory", "kafka"])
async def transport(request: pytest.FixtureRequest) -> AsyncIterator[Transport]:
    if request.param == "memory":
        yield MemoryTransport(MemoryBroker())
    else:
        yield KafkaTransport(request.getfixturevalue("kafka_bootstrap"))


async def test_old_changelog_is_refused_on_restore_then_upgraded_exactly(
        transport: Transport, tmp_path: Path) -> None:
    name, src = unique("upgrade-restore"), unique("in")
    await create_topic(transport, src, 1)
    app = make_app(name, transport, src, tmp_path)
    await write_old_changelogs(app, transport)
    await refuses(app, where=f"{name}-")  # names the changelog
    fixed = make_app(name, transport, src, tmp_path)
    await upgrade_all(fixed, transport)
    await upgrade_all(fixed, transport)  # idempotent: nothing left to do
    assert await feed_and_read(fixed, transport, src) == EXACT


async def test_old_files_are_refused_on_open_then_upgraded_exactly(
        transport: Transport, tmp_path: Path) -> None:
    name, src = unique("upgrade-open"), unique("in")
    await create_topic(transport, src, 1)
    app = make_app(name, transport, src, tmp_path)
    await write_old_changelogs(app, transport)
    write_old_files(app, tmp_path)
    await refuses(app, where=".sqlite")  # names the file
    fixed = make_app(name, transport, src, tmp_path)
    await upgrade_all(fixed, transport)
    assert not list(tmp_path.glob("*/*.sqlite"))  # noqa: ASYNC240 (old files gone)
    assert await feed_and_read(fixed, transport, src) == EXACT


async def test_a_record_appended_by_an_old_host_is_refused_then_upgraded_exactly(
        transport: Transport, tmp_path: Path) -> None:
    name, src = unique("upgrade-append"), unique("in")
    await create_topic(transport, src, 1)
    app = make_app(name, transport, src, tmp_path)
    await write_old_changelogs(app, transport)
    await upgrade_all(app, transport)
    first = make_app(name, transport, src, tmp_path)
    assert await feed_and_read(first, transport, src) == EXACT
    # a host still on the old code writes "ZZ" for text and 7 for n, unmarked
    old_host = [("text", "ZZ"), ("n", 7)]
    await send(transport, [OutgoingRecord(changelog_topic(name, s),
                                          *old_bytes(app, s, "k", v), STAMP + 2, (), 0)
                           for s, v in old_host])
    await refuses(make_app(name, transport, src, tmp_path), where="at offset")
    fixed = make_app(name, transport, src, tmp_path)
    await upgrade_all(fixed, transport)
    found = await feed_and_read(fixed, transport, src)
    assert found == {**EXACT, "text": "ZZwxyz", "n": 11, "total": SUM + 80,
                     "obj": {"last": "z", "n": 38}, "win": SUM + 80}
