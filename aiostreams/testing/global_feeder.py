"""The test driver's stand-in for the global-table updater."""

from __future__ import annotations

from typing import Any

from aiostreams.dsl.global_table import GlobalTable
from aiostreams.serde import Serde
from aiostreams.transport.memory_broker import MemoryBroker

__all__ = ["GlobalFeeder"]


class GlobalFeeder:
    """The test driver's stand-in for :func:`global_table_updater`: applies every record
    appended to a global table's topic on the driver's broker, when the driver feeds its
    tasks (so a record piped to a global topic is in the store before the stream records
    piped after it are processed, as in Kafka's ``TopologyTestDriver``)."""

    def __init__(self, tables: dict[str, GlobalTable], broker: MemoryBroker) -> None:
        self.tables = tables
        self.broker = broker

    def serdes(self) -> dict[str, tuple[Serde[Any], Serde[Any]]]:
        return {name: (t.topic.key_serde, t.topic.value_serde)
                for name, t in self.tables.items()}

    def feed(self) -> None:
        for name, table in self.tables.items():
            for partition in range(self.broker.partition_count(name) or 0):
                done = table.store.offsets.get(partition, 0)
                for raw in self.broker.records(name, partition)[done:]:
                    table.store.apply(partition, raw.offset, raw.key, raw.value)
