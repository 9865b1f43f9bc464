"""The processor of a stream-global-table join (see :mod:`aiostreams.dsl.global_table`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiostreams.state.global_store import GlobalStore
from aiostreams.topology.processor import Processor
from aiostreams.types import Record

__all__ = ["GlobalJoinProcessor"]

AnyRecord = Record[Any, Any]


class GlobalJoinProcessor(Processor[Any, Any]):
    """Kafka's ``KStreamKTableJoinProcessor`` with a key selector: ``mapped =
    key_selector(key, value)``; a record with a null value or a null mapped key is skipped
    (counted) - except a left join keeps a record with a null *key* - then the global value
    of ``mapped`` is looked up; an inner join emits only when there is one, a left join
    always, ``joiner(value, global value or None)``."""

    def __init__(self, store: GlobalStore, key_selector: Callable[[Any, Any], Any],
                 joiner: Callable[[Any, Any], Any], left: bool, node: Callable[[], str]
                 ) -> None:
        self.store = store
        self.key_selector = key_selector
        self.joiner = joiner
        self.left = left
        self.node = node
        self.skipped = 0

    async def process(self, record: AnyRecord) -> None:
        mapped = self.key_selector(record.key, record.value)
        keep_null_key = self.left and record.key is None and record.value is not None
        if not keep_null_key and (mapped is None or record.value is None):
            self.skipped += 1
            return
        other = None if mapped is None else await self.store.get(mapped, self.node())
        if other is None and not self.left:
            return
        self.context.forward(record.with_value(self.joiner(record.value, other)))
