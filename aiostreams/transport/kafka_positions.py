"""Where a :class:`~aiostreams.transport.kafka_consumer.KafkaConsumer` reads next when
aiokafka does not decide it: a partition with no committed offset, a position out of range,
and a re-read after a record aiokafka could not parse.

aiokafka is started with ``auto_offset_reset="none"``, because with ``"earliest"`` or
``"latest"`` it also resets an *out-of-range* position that way, silently (a line at INFO):
records skipped or read again with no trace. With ``"none"`` it reports both cases from
``getmany`` instead, and :meth:`KafkaPositions.recover` answers them:

* ``NoOffsetForPartitionError`` (a partition without a committed offset, or no group): it
  starts at the log's beginning or end per ``auto_offset_reset``, quietly, as before;
* ``OffsetOutOfRangeError`` (the broker refused the position): the log's bounds are read
  and :mod:`~aiostreams.transport.offset_reset` decides, logs and counts, or raises under
  ``offset_out_of_range="fail"`` (the position then stays where it is).

With ``"none"`` aiokafka's ``position()`` would wait forever for a partition without a
committed offset (nothing resets it), so :meth:`KafkaPositions.start_if_unpositioned`
starts such a partition per ``auto_offset_reset`` first. aiokafka internals used: the
subscription's partition state (``has_valid_position``, ``awaiting_reset``) and
``AIOKafkaConsumer._client``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError, NoOffsetForPartitionError, OffsetOutOfRangeError
from aiokafka.structs import TopicPartition as AioTopicPartition

from aiostreams.errors import TransportError
from aiostreams.transport.base import ConsumerOptions
from aiostreams.transport.kafka_offsets import list_end_offsets
from aiostreams.transport.kafka_raw_fetch import fetch_tolerant
from aiostreams.transport.offset_reset import OffsetResets, plan_reset
from aiostreams.types import RawRecord, TopicPartition

__all__ = ["AIOKAFKA_OFFSET_RESET", "KafkaPositions"]

log = logging.getLogger("aiostreams.transport.kafka_consumer")

AIOKAFKA_OFFSET_RESET = "none"
"""aiokafka's own ``auto_offset_reset``: never reset by itself (see the module doc)."""


class KafkaPositions:
    """The consumer's read positions, where aiokafka's are not enough.

    ``next_offsets[tp]`` is the offset after the last record returned for ``tp`` (or where
    a seek or reset put it); it is what a partition kept across ``assign`` resumes from and
    where the tolerant re-read starts. ``resets`` counts the out-of-range resets.
    """

    def __init__(self, bootstrap: str, options: ConsumerOptions) -> None:
        self._bootstrap = bootstrap
        self._options = options
        self.next_offsets: dict[TopicPartition, int] = {}
        self.resets = OffsetResets()

    # -- what aiokafka reports from getmany ------------------------------------------------

    async def recover(self, consumer: AIOKafkaConsumer,
                      error: NoOffsetForPartitionError | OffsetOutOfRangeError,
                      owned: Collection[TopicPartition], timeout: float) -> None:
        """Answer a ``getmany`` error (see the module doc); the next fetch reads from the
        new position. Raises :class:`~aiostreams.errors.OffsetOutOfRangeError` under
        ``offset_out_of_range="fail"``. A partition not owned now is left alone: aiokafka
        reports it again at its next fetch.

        Cancellation: a start per ``auto_offset_reset`` stays requested (aiokafka completes
        it in the background); a reset not yet sought is decided again at the next report.
        """
        if isinstance(error, NoOffsetForPartitionError):
            aio_tp = error.args[0] if error.args else None
            if isinstance(aio_tp, AioTopicPartition) and aio_tp in consumer.assignment():
                try:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(max(timeout, 0.0)):  # requested at once
                            await self._start_per_policy(consumer, aio_tp)
                except KafkaError as exc:
                    raise TransportError(f"starting {aio_tp.topic}[{aio_tp.partition}] at "
                                         f"its {self._options.auto_offset_reset} offset "
                                         f"failed: {exc!r}") from exc
            return
        refused = error.args[0] if error.args and isinstance(error.args[0], dict) else {}
        for aio_tp, offset in refused.items():
            tp = TopicPartition(aio_tp.topic, aio_tp.partition)
            if tp not in owned or aio_tp not in consumer.assignment():
                continue
            log_start, log_end = await self._bounds(consumer, tp)
            reset = plan_reset(tp, int(offset), log_start, log_end,
                               self._options.out_of_range_policy)
            if reset is None or aio_tp not in consumer.assignment():
                continue  # the log moved, or the partition did: reported again if need be
            to = self.resets.apply(reset, self._options.group_id)
            consumer.seek(aio_tp, to)
            self.next_offsets[tp] = to

    async def start_if_unpositioned(self, consumer: AIOKafkaConsumer,
                                    aio_tp: AioTopicPartition) -> None:
        """Before aiokafka's ``position()``: a partition with no position and no committed
        offset starts per ``auto_offset_reset`` (aiokafka, told ``"none"``, would not)."""
        if not _lacks_position(consumer, aio_tp):
            return
        committed = None
        if self._options.group_id is not None:
            committed = await consumer.committed(aio_tp)
        if committed is None and _lacks_position(consumer, aio_tp):
            await self._start_per_policy(consumer, aio_tp)

    async def _start_per_policy(self, consumer: AIOKafkaConsumer,
                                aio_tp: AioTopicPartition) -> None:
        """The first-assignment path: the log's beginning or end per ``auto_offset_reset``,
        resolved by aiokafka with a ListOffsets to the leader."""
        log.debug("no committed offset for %s: starting at the %s offset", aio_tp,
                  self._options.auto_offset_reset)
        if self._options.auto_offset_reset == "latest":
            await consumer.seek_to_end(aio_tp)
        else:
            await consumer.seek_to_beginning(aio_tp)

    async def _bounds(self, consumer: AIOKafkaConsumer, tp: TopicPartition) -> tuple[int, int]:
        """The log's start and end (high watermark, whatever the isolation level: the
        broker judges a position against the whole log)."""
        aio_tp = AioTopicPartition(tp.topic, tp.partition)
        try:
            starts = await consumer.beginning_offsets([aio_tp])
            try:
                end = (await list_end_offsets(consumer._client, [tp],
                                              read_committed=False))[tp]
            except TransportError:
                end = (await consumer.end_offsets([aio_tp]))[aio_tp]
        except KafkaError as exc:
            raise TransportError(
                f"the broker refused the position of {tp} as out of range, and reading the "
                f"log's bounds from {self._bootstrap} failed: {exc!r}") from exc
        return int(starts[aio_tp]), int(end)

    # -- after a record aiokafka cannot parse --------------------------------------------

    async def read_tolerantly(
        self, consumer: AIOKafkaConsumer, fetchable: list[TopicPartition], budget: int
    ) -> dict[TopicPartition, list[RawRecord]]:
        """Read ``fetchable`` from where the caller left each partition with
        :func:`~aiostreams.transport.kafka_raw_fetch.fetch_tolerant`, return up to
        ``budget`` records, and move aiokafka past them.

        aiokafka's failed call may have moved other partitions' positions past records it
        then dropped, so every fetchable partition is re-read from the offset after the
        last record returned to the caller (its committed offset, or the reset policy's,
        when none was returned since it was assigned)."""
        positions = {tp: await self._resume_position(consumer, tp) for tp in fetchable}
        try:
            fetched = await fetch_tolerant(
                consumer._client, positions, read_committed=self._options.read_committed)
        except KafkaError as exc:
            raise TransportError(f"re-reading {fetchable} from {self._bootstrap} after an "
                                 f"unparsable record failed: {exc!r}") from exc
        records: dict[TopicPartition, list[RawRecord]] = {}
        for tp in fetchable:
            batch = fetched.get(tp, [])[:budget]
            budget -= len(batch)
            position = batch[-1].offset + 1 if batch else positions[tp]
            consumer.seek(AioTopicPartition(tp.topic, tp.partition), position)
            if batch:
                records[tp] = batch
                self.next_offsets[tp] = position
        return records

    async def _resume_position(self, consumer: AIOKafkaConsumer, tp: TopicPartition) -> int:
        """The offset after the last record returned for ``tp``; before any, where a newly
        assigned partition starts: the committed offset, else per ``auto_offset_reset``."""
        if tp in self.next_offsets:
            return self.next_offsets[tp]
        aio_tp = AioTopicPartition(tp.topic, tp.partition)
        if self._options.group_id is not None:
            committed = await consumer.committed(aio_tp)
            if committed is not None:
                return int(committed)
        ends = await (consumer.end_offsets([aio_tp])
                      if self._options.auto_offset_reset == "latest"
                      else consumer.beginning_offsets([aio_tp]))
        return int(ends[aio_tp])


def _lacks_position(consumer: Any, aio_tp: AioTopicPartition) -> bool:
    """aiokafka holds ``aio_tp`` with no position and no reset under way (it is fetching
    the committed offset, or found none)."""
    subscription = consumer._subscription.subscription
    assignment = None if subscription is None else subscription.assignment
    state = None if assignment is None else assignment.state_value(aio_tp)
    return state is not None and not state.has_valid_position and not state.awaiting_reset
