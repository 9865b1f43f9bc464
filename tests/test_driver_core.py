"""The test driver runs the worker's step-wise core (``aiostreams/engine/worker_core.py``):
it hands records to the tasks as the worker hands them a fetched batch, and its commit is
the worker's - outputs and stores flushed, offsets committed, the checkpoint written -
checked here against a real worker on the memory broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from appkit import create_topic, produce, read_exactly

from aiostreams import App, Processor, Record
from aiostreams.state import kv_store
from aiostreams.state.checkpoint import CHECKPOINT_FILE, Checkpoint
from aiostreams.testing import TopologyTestDriver
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

WORDS = [("a", "x"), ("b", "y"), ("a", "z")]
CHANGELOG = TopicPartition("counting-counts-changelog", 0)


class Count(Processor[str, str]):
    """Counts records per key in the persistent store "counts"; forwards the count."""

    async def init(self, context: Any) -> None:
        await super().init(context)
        self.counts = context.store("counts")

    async def process(self, record: Record[str, str]) -> None:
        count = (await self.counts.get(record.key) or 0) + 1
        self.counts.put(record.key, count)
        self.context.forward(record.with_value(count))


def counting_app(**settings: Any) -> App:
    app = App("counting", **settings)
    app.topic("words", key=str, value=str)
    app.topic("counts", key=str, value=int)
    app.topology.add_source("src", "words").add_processor("count", Count, "src").add_sink(
        "out", "counts", "count")
    app.topology.add_store(kv_store("counts", key_serde=str, value_serde=int,
                                    persistent=True), "count")
    return app


def checkpoint_in(state_dir: Path) -> dict[TopicPartition, int]:
    """The offsets of the one task's checkpoint under ``state_dir`` ({} when none)."""
    files = list(state_dir.glob(f"*/{CHECKPOINT_FILE}"))
    assert len(files) <= 1, files
    return Checkpoint(files[0]).read() if files else {}


def changelog_of(broker: MemoryBroker) -> list[tuple[bytes | None, bytes | None]]:
    return [(r.key, r.value) for r in broker.records(CHANGELOG.topic, CHANGELOG.partition)]


async def test_a_driver_commit_writes_the_checkpoint_and_changelog_a_worker_writes(
        tmp_path: Path) -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    await create_topic(transport, "words", 1)
    await produce(transport, "words", [(k.encode(), v.encode()) for k, v in WORDS])
    async with counting_app(transport=transport, state_dir=tmp_path / "worker"):
        await read_exactly(transport, "counts", len(WORDS))
    # the worker's stop committed its tasks (and wrote their checkpoint)
    worker_committed = broker.committed("counting", TopicPartition("words", 0))

    async with TopologyTestDriver(counting_app(), state_dir=tmp_path / "driver") as driver:
        driver.pipe_inputs("words", WORDS)
        await driver.process_all()
        assert checkpoint_in(tmp_path / "driver") == {}  # nothing committed yet
        assert await driver.commit() == {TopicPartition("words", 0): worker_committed}
        assert driver.committed("words") == worker_committed == len(WORDS)
        assert checkpoint_in(tmp_path / "driver") == checkpoint_in(tmp_path / "worker") == {
            CHANGELOG: len(WORDS)}
        assert changelog_of(driver.broker) == changelog_of(broker)
        assert len(changelog_of(broker)) == len(WORDS)


async def test_a_batch_is_all_in_before_any_task_runs_so_the_earliest_timestamp_goes_first(
        ) -> None:
    app = App("merge")
    app.topic("late", key=str, value=str)
    app.topic("early", key=str, value=str)
    app.topic("merged", key=str, value=str)
    app.topology.add_source("src", "late", "early").add_sink("out", "merged", "src")
    async with TopologyTestDriver(app) as driver:
        assert list(driver.tasks) == ["0_0"]  # one task reads both topics' partition 0
        driver.pipe_input("late", "k", "second", timestamp=20.0)
        driver.pipe_input("early", "k", "first", timestamp=10.0)
        await driver.process_all()  # one batch: both records in before the task is pumped
        assert [r.value for r in driver.read_output("merged")] == ["first", "second"]
