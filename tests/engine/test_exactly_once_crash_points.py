"""Exactly-once state survives a crash at every point of a commit, and replays only the tail.

A task with three persistent logged stores (key-value counts, window counts, a versioned
store) commits one transaction cleanly, then is "killed" at one point of its second commit:
the state directory is copied as it is on disk at that moment (what `kill -9` leaves; the
SQLite WAL included, so a SQLite transaction under way is in the image uncommitted) and
the commit stops there. A new owner (same memory broker: it fences the old producer, whose
open transaction is dropped) restores from that image and must hold exactly the state of
the records whose offsets the group committed - never a write of the transaction that did
not commit - having replayed no more than the second transaction's changelog records. It
then processes the rest, and its state equals an uninterrupted run's.
"""

from __future__ import annotations

import asyncio
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from taskkit import raw, str_topic

from aiostreams import Processor, Record
from aiostreams.engine.task import StreamTask, TaskSettings
from aiostreams.engine.topic_plan import changelog_names
from aiostreams.state.declarations import kv_store, window_store
from aiostreams.state.owner_epoch import owner_headers
from aiostreams.state.versioned import versioned_store
from aiostreams.testing import settle
from aiostreams.topology.topology import Topology
from aiostreams.transport.base import Consumer
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.transport.memory_consumer import MemoryConsumer
from aiostreams.types import OutgoingRecord, RawRecord
from tests.support.eos_owner import IN, EosOwner, Killed, kill_at
from tests.support.eos_owner import start_owner as start_eos_owner

APP = "app"
FIRST, SECOND, REST = 40, 10, 15  # records in the first commit, the killed one, after
KEYS = 7
WINDOW = 10.0
STORES = 3


class Progress:
    """How many records the processor finished; :attr:`reached` is set at :attr:`target`."""

    def __init__(self) -> None:
        self.finished = 0
        self.target = 0
        self.reached = asyncio.Event()

    def expect(self, more: int) -> None:
        self.target = self.finished + more
        self.reached.clear()

    def finish(self) -> None:
        self.finished += 1
        if self.finished >= self.target:
            self.reached.set()


class WriteAll(Processor[str, str]):
    """Per record: its key's count, its key's count in its 10-s window, and its value as a
    version of its key at its timestamp."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    async def process(self, record: Record[str, str]) -> None:
        try:
            await self.write(record)
        finally:
            self.progress.finish()

    async def write(self, record: Record[str, str]) -> None:
        ctx = self.context
        counts = ctx.store("counts")
        counts.put(record.key, (await counts.get(record.key) or 0) + 1)
        windows = ctx.store("windows")
        start = record.timestamp // WINDOW * WINDOW
        windows.put(record.key, start, (await windows.get(record.key, start) or 0) + 1)
        await ctx.store("versions").put(record.key, record.value, record.timestamp)


def topology(progress: Progress | None = None) -> Topology:
    shared = progress or Progress()
    return (Topology().add_source("src", str_topic("in"))
            .add_processor("write", lambda: WriteAll(shared), "src")
            .add_store(kv_store("counts", persistent=True, key_serde=str, value_serde=int),
                       "write")
            .add_store(window_store("windows", retention=1e6, persistent=True,
                                    key_serde=str, value_serde=int), "write")
            .add_store(versioned_store("versions", history_retention=1e6, persistent=True,
                                       key_serde=str, value_serde=str), "write"))


def inputs() -> list[RawRecord]:
    return [raw("in", 0, i, f"k{i % KEYS}", f"v{i}", timestamp=100.0 + 3 * i)
            for i in range(FIRST + SECOND + REST)]


Expected = tuple[dict[str, int], dict[tuple[str, float], int], dict[str, list[tuple[int, str]]]]


def oracle(records: list[RawRecord]) -> Expected:
    """The three stores after a serial run of ``records``."""
    counts: Counter[str] = Counter()
    windows: Counter[tuple[str, float]] = Counter()
    versions: dict[str, list[tuple[int, str]]] = {}
    for r in records:
        assert r.key is not None and r.value is not None
        key = r.key.decode()
        counts[key] += 1
        windows[(key, r.timestamp // WINDOW * WINDOW)] += 1
        versions.setdefault(key, []).append((round(r.timestamp * 1000), r.value.decode()))
    return dict(counts), dict(windows), versions


async def contents(task: StreamTask) -> Expected:
    counts = {k: v async for k, v in task.stores["counts"].range(None, None)}
    window_store: Any = task.stores["windows"]
    windows = {k: v async for k, v in window_store.fetch_all(-1e12, 1e12)}
    versioned: Any = task.stores["versions"]
    versions = {f"k{i}": await versioned.versions(f"k{i}") for i in range(KEYS)}
    return counts, windows, {k: v for k, v in versions.items() if v}


@dataclass
class Owner(EosOwner):
    progress: Progress

    async def process(self, records: list[RawRecord]) -> None:
        self.progress.expect(len(records))
        self.task.enqueue(IN, records)
        self.task.pump()
        async with asyncio.timeout(10.0):  # a bound that fails a broken build, not a wait
            await self.progress.reached.wait()
        await settle()  # the pump each finished record scheduled retires it
        assert self.task.committable().get(IN) == records[-1].offset + 1


async def start_owner(broker: MemoryBroker, state_dir: Path) -> Owner:
    progress = Progress()
    return await start_eos_owner(Owner, broker, state_dir, APP, topology(progress),
                                 TaskSettings(), progress=progress)


def new_broker() -> MemoryBroker:
    broker = MemoryBroker()
    broker.create_topic("in", 1)
    for changelog in changelog_names(APP, topology().build()[0]).values():
        broker.create_topic(changelog, 1)
    broker.append((record_of(r), 0) for r in inputs())
    return broker


def record_of(r: RawRecord) -> OutgoingRecord:
    return OutgoingRecord("in", r.key, r.value, r.timestamp)


CRASH_POINTS = [
    "before send_batch",
    "before flush",
    "before send_offsets_to_transaction",
    "before commit_transaction",
    "after commit_transaction",
    "inside the first store's SQLite transaction",
    "before flush_sealed_stores",
    "after flush_sealed_stores",
]
COMMITTED = {"after commit_transaction", "inside the first store's SQLite transaction",
             "before flush_sealed_stores", "after flush_sealed_stores"}


@pytest.mark.parametrize("point", CRASH_POINTS)
async def test_a_crash_at_any_point_of_a_commit_leaves_no_aborted_write_and_replays_the_tail(
        point: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broker = new_broker()
    records = inputs()
    live, image_dir = tmp_path / "live", tmp_path / "image"
    first = await start_owner(broker, live)
    await first.process(records[:FIRST])
    await first.commit()
    await first.process(records[FIRST:FIRST + SECOND])
    kill_at(point, first, monkeypatch, lambda: shutil.copytree(live, image_dir))
    with pytest.raises(Killed):
        await first.commit()
    monkeypatch.undo()
    await first.stop()  # what the dead process held goes (its files are in the image)

    second = await start_owner(broker, image_dir)
    try:
        committed = FIRST + SECOND if point in COMMITTED else FIRST
        assert second.position == committed
        assert await contents(second.task) == oracle(records[:committed])
        # the tail only: at most the killed transaction's changelog records, never the
        # first commit's again
        tail = STORES * SECOND if point in COMMITTED else 0
        assert second.restorer.restored_records <= tail
        if point != "after flush_sealed_stores" and point in COMMITTED:
            assert second.restorer.restored_records == tail
        await second.process(records[committed:])
        await second.commit()
        assert await contents(second.task) == oracle(records)
    finally:
        await second.stop()


async def test_a_replay_from_the_mark_skips_a_deposed_owners_late_record(
        tmp_path: Path) -> None:
    """The mark carries its writer's owner epoch: a record a deposed owner (a lower epoch)
    appended after it is skipped by the replay from it, as a checkpoint's epoch did."""
    broker = new_broker()
    records = inputs()
    first = await start_owner(broker, tmp_path)
    await first.process(records[:FIRST])
    await first.commit()
    epoch = first.task.owner_epoch
    assert epoch >= 0
    counts = first.task.stores["counts"]
    changelog = first.task.changelog_partitions["counts"]
    key, value = counts.changelog_record("k0", 999)
    await first.stop()
    broker.append([(OutgoingRecord(changelog.topic, key, value, None,
                                   owner_headers(epoch - 1)), 0)])
    second = await start_owner(broker, tmp_path)
    try:
        assert second.restorer.restored_records == 1  # the late record was read ...
        assert (await contents(second.task))[0] == oracle(records[:FIRST])[0]  # ... not applied
    finally:
        await second.stop()


LATE = 5  # records that retire while the second commit is under way


@pytest.mark.parametrize("point", sorted(COMMITTED))
async def test_writes_retired_during_a_commit_never_reach_the_file_with_it(
        point: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Records that retire while a commit is under way (after its snapshot) belong to the
    next transaction: however the commit ends, the file holds none of their writes."""
    broker = new_broker()
    records = inputs()
    live, image_dir = tmp_path / "live", tmp_path / "image"
    first = await start_owner(broker, live)
    await first.process(records[:FIRST])
    await first.commit()
    await first.process(records[FIRST:FIRST + SECOND])
    producer = first.router.channel_of(first.task.task_id).producer
    send_offsets = producer.send_offsets_to_transaction

    async def late_records_then_offsets(*args: Any, **kwargs: Any) -> None:
        await first.process(records[FIRST + SECOND:FIRST + SECOND + LATE])
        await send_offsets(*args, **kwargs)

    monkeypatch.setattr(producer, "send_offsets_to_transaction", late_records_then_offsets)
    kill_at(point, first, monkeypatch, lambda: shutil.copytree(live, image_dir))
    with pytest.raises(Killed):
        await first.commit()
    monkeypatch.undo()
    await first.stop()

    second = await start_owner(broker, image_dir)
    try:
        assert second.position == FIRST + SECOND
        assert await contents(second.task) == oracle(records[:FIRST + SECOND])
    finally:
        await second.stop()


@dataclass
class HeldRead:
    """A zombie owner whose idle commit's read of the changelog ends is held up in the
    network until :meth:`answer` (the broker then answers as it is by then)."""

    zombie: Owner
    commit: asyncio.Future[Any]
    _answer: asyncio.Event
    _reader: Consumer

    async def answer(self) -> None:
        self._answer.set()
        await self.commit
        await self._reader.stop()
        await self.zombie.task.close()
        await self.zombie.router.close(self.zombie.task.task_id)
        await self.zombie.router.stop(lambda: 5.0)


async def hold_the_read(broker: MemoryBroker, zombie_dir: Path, records: list[RawRecord],
                        monkeypatch: pytest.MonkeyPatch) -> HeldRead:
    """An owner that processed and committed ``records[:FIRST]``, then started an idle
    commit whose read of the changelog ends is held (returns once it was asked)."""
    zombie = await start_owner(broker, zombie_dir)
    await zombie.process(records[:FIRST])
    await zombie.commit()
    asked, answer = asyncio.Event(), asyncio.Event()
    read_ends = zombie.restorer.changelog_marks
    late_reader = MemoryTransport(broker).consumer(None)
    await late_reader.start()

    async def held_in_the_network(tasks: Any, consumer: Consumer) -> Any:
        asked.set()
        await answer.wait()
        return await read_ends(tasks, late_reader)  # the broker answers as it is by then

    monkeypatch.setattr(zombie.restorer, "changelog_marks", held_in_the_network)
    idle_commit = asyncio.ensure_future(zombie.commit())
    await asked.wait()
    return HeldRead(zombie, idle_commit, answer, late_reader)


async def a_new_owner_writes(broker: MemoryBroker, state_dir: Path,
                             records: list[RawRecord]) -> None:
    new_owner = await start_owner(broker, state_dir)
    await new_owner.process(records[FIRST:FIRST + SECOND])
    await new_owner.commit()
    await new_owner.stop()


async def assert_restored_exactly(broker: MemoryBroker, state_dir: Path,
                                  records: list[RawRecord]) -> None:
    after = await start_owner(broker, state_dir)
    try:
        assert after.position == FIRST + SECOND
        assert await contents(after.task) == oracle(records[:FIRST + SECOND])
    finally:
        await after.stop()


async def test_changelog_ends_answered_after_the_task_moved_away_never_mark_the_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit with nothing to send, whose read of the changelog ends is held up in the
    network (a cut link) and answered only after the group moved the task and its new
    owner wrote: those ends are the new owner's, and must not become the mark of this
    owner's files - the next owner on those files would skip the new owner's writes and
    lose them (found from outside: a host cut for 30 s, counts too low)."""
    broker, records = new_broker(), inputs()
    held = await hold_the_read(broker, tmp_path / "zombie", records, monkeypatch)
    # the lease runs out and the group moves the task; its new owner fences the zombie's
    # producer, writes and commits
    held.zombie.router.channel_of(held.zombie.task.task_id).owns = lambda: False
    await held.zombie.consumer.stop()
    await a_new_owner_writes(broker, tmp_path / "new", records)
    await held.answer()
    await assert_restored_exactly(broker, tmp_path / "zombie", records)


async def test_changelog_ends_answered_after_the_worker_rejoined_never_mark_the_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As above, but the late answer comes after the worker has rejoined and got the task
    back: its lease is valid again, for a new generation. The ends still hold what another
    owner wrote in between, so they must not become the files' mark either - the marks are
    kept only for the generation the worker held when it asked."""
    broker, records = new_broker(), inputs()
    held = await hold_the_read(broker, tmp_path / "zombie", records, monkeypatch)
    consumer = held.zombie.consumer
    assert isinstance(consumer, MemoryConsumer)
    asked_in, member = consumer.generation, consumer.member_id
    assert member is not None
    broker.group(APP).expel(member)  # its session runs out
    await a_new_owner_writes(broker, tmp_path / "new", records)
    await consumer.getmany(0.0)  # it rejoins and gets the task back
    assert consumer.assignment() == {IN} and consumer.owns_assignment()
    assert consumer.generation > asked_in
    await held.answer()
    await consumer.stop()
    await assert_restored_exactly(broker, tmp_path / "zombie", records)
