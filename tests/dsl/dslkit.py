"""Running DSL apps end to end on the memory broker, without sleeps.

``run_app`` writes the input records straight into a private memory broker, starts the
app, and waits (on the app's commit notifications, not on time) until every partition of
every topic the app reads has been committed up to its end; then it reads the outputs and
the stores' final contents and stops the app.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiostreams import App, Topic
from aiostreams.processors.store_values import plain_value
from aiostreams.transport.memory import MemoryBroker
from aiostreams.transport.partitioner import default_partition
from aiostreams.types import OutgoingRecord, TopicPartition


@dataclass(frozen=True)
class In:
    """One input record: key, value, timestamp (seconds)."""

    key: Any
    value: Any
    ts: float = 0.0


@dataclass
class RunResult:
    outputs: dict[str, list[tuple[int, Any, Any, float]]] = field(default_factory=dict)
    stores: dict[str, dict[Any, Any]] = field(default_factory=dict)

    def values(self, topic: str) -> list[Any]:
        return [v for _, _, v, _ in self.outputs.get(topic, [])]

    def pairs(self, topic: str) -> list[tuple[Any, Any]]:
        return [(k, v) for _, k, v, _ in self.outputs.get(topic, [])]

    def by_partition(self, topic: str) -> dict[int, list[tuple[Any, Any, float]]]:
        result: dict[int, list[tuple[Any, Any, float]]] = {}
        for p, k, v, ts in self.outputs.get(topic, []):
            result.setdefault(p, []).append((k, v, ts))
        return result


class _NotifyingLog(list[Any]):
    def __init__(self) -> None:
        super().__init__()
        self.changed = asyncio.Event()

    def append(self, item: Any) -> None:
        super().append(item)
        self.changed.set()


def make_app(name: str | None = None, **settings: Any) -> App:
    """An app on its own memory broker, committing often."""
    app_name = name or f"app-{uuid.uuid4().hex[:8]}"
    settings.setdefault("commit_interval_ms", 5.0)
    settings.setdefault("poll_timeout", 0.01)
    return App(app_name, broker=f"memory://{uuid.uuid4().hex}", **settings)


def broker_of(app: App) -> MemoryBroker:
    return MemoryBroker.named(app.settings.broker.removeprefix("memory://"))


def produce(app: App, topic: Topic, records: Iterable[In]) -> None:
    """Append ``records`` to ``topic`` (created with its declared partitions), placed by
    Kafka's default partitioner, in order."""
    broker = broker_of(app)
    broker.create_topic(topic.name, topic.partitions or 1)
    n = broker.partition_count(topic.name) or 1
    counter = itertools.count()
    batch: list[tuple[OutgoingRecord, int]] = []
    for r in records:
        key = topic.key_serde.serialize(topic.name, r.key)
        value = topic.value_serde.serialize(topic.name, r.value)
        batch.append((OutgoingRecord(topic.name, key, value, r.ts),
                      default_partition(key, n, counter=counter)))
    broker.append(batch)


def _done(app: App) -> bool:
    broker = broker_of(app)
    for sub in app.build():
        for topic in sub.source_topics:
            for p in range(broker.partition_count(topic) or 0):
                tp = TopicPartition(topic, p)
                end = broker.end_offset(tp)
                if end and (broker.committed(app.name, tp) or 0) < end:
                    return False
    return True


async def run_app(app: App, outputs: Sequence[Topic] = (), *,
                  timeout: float = 20.0) -> RunResult:
    """Start ``app``, wait until it has committed all its input, collect, stop."""
    log = _NotifyingLog()
    app.commit_log = log
    await app.start()
    try:
        worker = app.inspect().worker  # internal: waits for the worker's stop request
        assert worker is not None
        stopping = asyncio.ensure_future(worker.stop_requested())
        try:
            async with asyncio.timeout(timeout):
                while not _done(app):
                    log.changed.clear()
                    changed = asyncio.ensure_future(log.changed.wait())
                    await asyncio.wait([changed, stopping],
                                       return_when=asyncio.FIRST_COMPLETED)
                    changed.cancel()
                    if worker.failure is not None:
                        worker.raise_failure()
        finally:
            stopping.cancel()
        result = RunResult()
        broker = broker_of(app)
        for topic in outputs:
            result.outputs[topic.name] = [
                (r.partition, topic.key_serde.deserialize(topic.name, r.key),
                 topic.value_serde.deserialize(topic.name, r.value), r.timestamp)
                for r in broker.records(topic.name)
            ]
        for task in app.inspect().tasks.values():  # internal: reads the tasks' stores
            for name, store in task.stores.items():
                contents = result.stores.setdefault(name, {})
                async for k, v in store.range(None, None):
                    contents[k] = plain_value(v)
        return result
    finally:
        await app.stop()


def random_yields(seed: int, limit: int = 20) -> Callable[[Any], Any]:
    """An async identity that awaits a seeded-random number of loop turns per call."""
    import random

    rng = random.Random(seed)

    async def step(value: Any) -> Any:
        for _ in range(rng.randint(0, limit)):
            await asyncio.sleep(0)
        return value

    return step
