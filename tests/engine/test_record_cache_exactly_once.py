"""Exactly-once with a record cache: a crash between a cached aggregate's updates and the
commit (at each point of that commit) leaves the committed outputs and the store exactly as
a run that committed only what the group committed - the cache, holding updates of records
whose offsets were not committed, is lost with them and rebuilt by reading them again - and
the rest of the run ends where an uncrashed run ends.

The harness is ``test_exactly_once_crash_points``' (one owner per "process", the state
directory copied at the crash), with the DSL's aggregate and a sink instead of its
processor."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from taskkit import raw, str_topic

from aiostreams import Processor, Record, Topic
from aiostreams.engine.task import StreamTask, TaskSettings
from aiostreams.engine.topic_plan import changelog_names
from aiostreams.processors.store_values import TimestampedSerde, kv_store_spec, plain_value
from aiostreams.processors.tables import AggregateProcessor
from aiostreams.serde import JsonSerde, LongSerde, StrSerde
from aiostreams.testing import settle
from aiostreams.topology.topology import Topology
from aiostreams.transport.memory import MemoryBroker
from aiostreams.types import OutgoingRecord, RawRecord
from tests.support.eos_owner import IN, EosOwner, Killed, kill_at
from tests.support.eos_owner import start_owner as start_eos_owner

APP = "cached-app"
FIRST, SECOND, REST = 30, 12, 9
KEYS = 5


class Gate(Processor[str, str]):
    """Passes records on; records at or past ``held_from`` wait for ``opened`` first (an
    async step: records take slots and finish out of order)."""

    def __init__(self, held_from: int, opened: asyncio.Event) -> None:
        self.held_from = held_from
        self.opened = opened

    async def process(self, record: Record[str, str]) -> None:
        if self.context.offset >= self.held_from:
            await self.opened.wait()
        self.context.forward(record)


def topology(gate: Gate | None = None) -> Topology:
    top = Topology().add_source("src", str_topic("in"))
    parent = "src"
    if gate is not None:
        top.add_processor("gate", lambda: gate, "src")
        parent = "gate"
    return (top
            .add_processor("sum", lambda: AggregateProcessor(
                "sums", lambda: 0, lambda k, v, acc: acc + int(v)), parent)
            .add_store(kv_store_spec("sums", persistent=True, key_serde=StrSerde(),
                                     value_serde=TimestampedSerde(LongSerde())), "sum")
            .add_sink("out", Topic("out", StrSerde(), JsonSerde()), "sum"))


def inputs() -> list[RawRecord]:
    return [raw("in", 0, i, f"k{i % KEYS}", str(i % 4), timestamp=10.0 + i)
            for i in range(FIRST + SECOND + REST)]


def oracle(records: list[RawRecord]) -> dict[str, int]:
    sums: dict[str, int] = {}
    for r in records:
        assert r.key is not None and r.value is not None
        sums[r.key.decode()] = sums.get(r.key.decode(), 0) + int(r.value)
    return sums


def committed_outputs(broker: MemoryBroker) -> dict[str, int]:
    """The last committed output of each key (the memory broker appends a transaction's
    records when it commits)."""
    final: dict[str, int] = {}
    for r in broker.records("out"):
        assert r.key is not None and r.value is not None
        final[r.key.decode()] = int(r.value)
    return final


async def store_contents(task: StreamTask) -> dict[str, int]:
    return {k: plain_value(v) async for k, v in task.stores["sums"].range(None, None)}


class Owner(EosOwner):
    async def process(self, records: list[RawRecord]) -> None:
        self.task.enqueue(IN, records)
        self.task.pump()
        async with asyncio.timeout(10.0):  # a bound that fails a broken build, not a wait
            while self.task.committable().get(IN) != records[-1].offset + 1:
                await settle()


async def start_owner(broker: MemoryBroker, state_dir: Path, cache: int,
                      gate: Gate | None = None) -> Owner:
    return await start_eos_owner(Owner, broker, state_dir, APP, topology(gate),
                                 TaskSettings(cache_max_bytes=cache))


def new_broker() -> MemoryBroker:
    broker = MemoryBroker()
    broker.create_topic("in", 1)
    broker.create_topic("out", 1)
    for changelog in changelog_names(APP, topology().build()[0]).values():
        broker.create_topic(changelog, 1)
    broker.append((OutgoingRecord("in", r.key, r.value, r.timestamp), 0) for r in inputs())
    return broker


POINTS = ["send_batch", "flush", "send_offsets_to_transaction", "commit_transaction",
          "flush_sealed_stores"]
COMMITTED = {"flush_sealed_stores"}


@pytest.mark.parametrize("point", POINTS)
async def test_a_crash_with_updates_in_the_cache_commits_what_a_run_without_it_commits(
        point: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broker = new_broker()
    records = inputs()
    live, image_dir = tmp_path / "live", tmp_path / "image"
    first = await start_owner(broker, live, cache=1_000_000)
    await first.process(records[:FIRST])
    await first.commit()
    assert committed_outputs(broker) == oracle(records[:FIRST])
    await first.process(records[FIRST:FIRST + SECOND])
    assert first.task.cached_entries("sums")  # updates held, not yet in store or topic
    kill_at(f"before {point}", first, monkeypatch, lambda: shutil.copytree(live, image_dir))
    with pytest.raises(Killed):
        await first.commit()
    monkeypatch.undo()
    await first.stop()

    second = await start_owner(broker, image_dir, cache=1_000_000)
    try:
        committed = FIRST + SECOND if point in COMMITTED else FIRST
        assert second.position == committed
        assert committed_outputs(broker) == oracle(records[:committed])
        assert await store_contents(second.task) == oracle(records[:committed])
        await second.process(records[committed:])
        await second.commit()
        assert committed_outputs(broker) == oracle(records)
        assert await store_contents(second.task) == oracle(records)
    finally:
        await second.stop()


async def test_each_key_is_sent_once_a_commit_with_the_cache_on(tmp_path: Path) -> None:
    broker = new_broker()
    records = inputs()
    owner = await start_owner(broker, tmp_path, cache=1_000_000)
    try:
        await owner.process(records[:FIRST])
        assert broker.records("out") == []
        await owner.commit()
        keys = [r.key for r in broker.records("out")]
        assert sorted(keys) == sorted({r.key for r in records[:FIRST]})
    finally:
        await owner.stop()


async def test_a_commit_issues_nothing_from_its_flush_until_its_snapshot(
        tmp_path: Path) -> None:
    """Records fetched while the commit waits for the records in flight (before its flush)
    are not issued until the snapshot is taken: the commit holds exactly the records issued
    before it, with their flushed updates."""
    opened = asyncio.Event()
    broker = new_broker()
    records = inputs()
    owner = await start_owner(broker, tmp_path, cache=1_000_000,
                              gate=Gate(FIRST, opened))
    try:
        await owner.process(records[:FIRST])
        owner.task.enqueue(IN, records[FIRST:FIRST + SECOND])
        owner.task.pump()
        await settle()
        assert owner.task.in_flight == SECOND  # held at the gate
        committing = asyncio.get_running_loop().create_task(owner.commit())
        await settle()
        assert not committing.done()  # waiting for the records in flight
        owner.task.enqueue(IN, records[FIRST + SECOND:])
        owner.task.pump()
        await settle()
        assert owner.task.in_flight == SECOND  # fetched, not issued: the commit holds
        opened.set()
        async with asyncio.timeout(10.0):
            await committing
        assert owner.committer.committed[IN] == FIRST + SECOND
        assert committed_outputs(broker) == oracle(records[:FIRST + SECOND])
        async with asyncio.timeout(10.0):  # issued once the hold is released
            while owner.task.committable().get(IN) != len(records):
                await settle()
        await owner.commit()
        assert committed_outputs(broker) == oracle(records)
    finally:
        await owner.stop()


async def test_a_clean_close_flushes_the_cache_through_its_closing_commit(
        tmp_path: Path) -> None:
    """A revocation drains the task (it stops issuing), then commits it with
    ``closing=True``: the flush runs in the drained task, before that commit's snapshot."""
    broker = new_broker()
    records = inputs()
    owner = await start_owner(broker, tmp_path, cache=1_000_000)
    try:
        await owner.process(records[:FIRST])
        assert await owner.task.drain(5.0)
        assert owner.task.cached_entries("sums")
        channel = owner.router.channel_of(owner.task.task_id)
        _, lost = await owner.committer.commit([(channel, [owner.task])], owner.consumer,
                                               closing=True, flush_all=True)
        assert lost == []
        assert not owner.task.cached_entries("sums")
        assert committed_outputs(broker) == oracle(records[:FIRST])
        assert await store_contents(owner.task) == oracle(records[:FIRST])
    finally:
        await owner.stop()
