"""The updater of a global table: its own consumer (no consumer group, every partition
assigned) filling the table's :class:`~aiostreams.state.global_store.GlobalStore`.

1. **Bootstrap.** When the app starts - before its worker joins the group and before any
   record is processed (it runs as an app resource; see :mod:`aiostreams.lifecycle.resources`) - the
   consumer reads every partition from its beginning up to the end offsets it found then.
   Under ``exactly_once`` it reads committed records only.
2. **Keep up.** It then goes on consuming in the background until the app stops.
3. **Restore.** The store is restored from the source topic itself (there is no
   changelog); persistent, a start reads only the records after the local copy's checkpoint
   (:mod:`aiostreams.state.global_copy`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from aiostreams.errors import TopologyError
from aiostreams.state.global_store import GlobalStore
from aiostreams.transport.base import IsolationLevel, Transport
from aiostreams.types import RawRecord, TopicPartition

if TYPE_CHECKING:
    pass

__all__ = ["global_table_updater"]

log = logging.getLogger("aiostreams.global_table")


@contextlib.asynccontextmanager
async def global_table_updater(transport: Transport, store: GlobalStore, *,
                               poll_timeout: float, read_committed: bool = False,
                               save_interval: float = 30.0) -> AsyncIterator[GlobalStore]:
    """Bootstrap ``store`` from its topic (from its local checkpoint when it has one) up to
    the current end offsets, then keep it up to date in the background until the context
    exits, saving a persistent store every ``save_interval`` seconds and at the end (see
    the module docstring).

    Cancellation: cancelling the bootstrap stops the consumer and raises; on exit the
    background task is cancelled and awaited, the store saved and closed, then the
    consumer stopped."""
    name = store.topic.name
    admin = transport.admin()
    await admin.start()
    try:
        partitions = await admin.partitions_for(name)
    finally:
        await admin.stop()
    if partitions is None:
        raise TopologyError(f"global table {name!r}: the topic does not exist; create it "
                            "(with its partitions) before starting the app")
    tps = [TopicPartition(name, p) for p in range(partitions)]
    consumer = transport.consumer(None, isolation_level=(
        IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED))
    await consumer.start()
    local = store.persisted
    try:
        consumer.assign(tps)
        beginnings = await consumer.beginning_offsets(tps)
        ends = await consumer.end_offsets(tps)
        if local is not None:
            store.offsets = await local.open(beginnings, ends)
            store.local = local
        for tp in tps:
            consumer.seek(tp, max(beginnings.get(tp, 0), store.offsets.get(tp.partition, 0)))
        while any(store.offsets.get(tp.partition, beginnings.get(tp, 0)) < ends[tp]
                  for tp in tps):
            _apply_batch(store, await consumer.getmany(poll_timeout))
        if local is not None:
            await local.save(store.offsets)
        updater = asyncio.create_task(_keep_up(consumer, store, poll_timeout, save_interval),
                                      name=f"global-table-{name}")
        try:
            yield store
        finally:
            updater.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await updater
            if local is not None:
                await local.save(store.offsets)
    finally:
        try:
            if local is not None:
                store.local = None
                await local.close()
        finally:
            await consumer.stop()


def _apply_batch(store: GlobalStore, batch: dict[TopicPartition, list[RawRecord]]) -> None:
    for tp, records in batch.items():
        for raw in records:
            store.apply(tp.partition, raw.offset, raw.key, raw.value)


async def _keep_up(consumer: Any, store: GlobalStore, poll_timeout: float,
                   save_interval: float) -> None:
    loop = asyncio.get_running_loop()
    saved_at = loop.time()
    while True:
        _apply_batch(store, await consumer.getmany(poll_timeout))
        if store.local is not None and loop.time() - saved_at >= save_interval:
            await store.local.save(store.offsets)
            saved_at = loop.time()
