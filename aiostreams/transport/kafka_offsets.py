"""The Kafka consumer's offsets: commits, committed offsets, and the log's beginning and end
offsets, with aiokafka's errors turned into ours.

End offsets are read off the fetch path: one ListOffsets request per broker, on a connection
of its own.

Why: aiokafka sends ``end_offsets`` on the consumer's default connection to the leader,
where the broker answers requests in order, so each call waits behind the fetch in flight
(up to ``fetch_max_wait``, 0.5 s). A worker that checkpoints SQLite stores asks for its
changelogs' end offsets once per task at every commit: with 8 tasks a commit took ~3.7 s
and an at-least-once app committed 36,000 of a 40,000-record backlog in 30 s.

Here the partitions are grouped by leader and each broker gets one request, sent on
aiokafka's *coordination* connection group (a second connection per broker, which carries
only short group requests: heartbeats, commits), so nothing waits for a fetch. aiokafka
internals used: ``AIOKafkaClient.send(..., group=ConnectionGroup.COORDINATION)``,
``cluster.leader_for_partition``, ``add_topic`` and ``force_metadata_update``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.client import ConnectionGroup
from aiokafka.errors import CommitFailedError as AioCommitFailedError
from aiokafka.errors import IllegalStateError, KafkaError, for_code
from aiokafka.protocol.offset import OffsetRequest
from aiokafka.structs import TopicPartition as AioTopicPartition

from aiostreams.errors import BrokerUnavailableError, CommitFailedError, TransportError
from aiostreams.transport.kafka_connection import closed_mid_request
from aiostreams.types import TopicPartition

__all__ = ["LATEST", "commit_offsets", "list_end_offsets", "list_offsets",
           "read_committed_offset", "show"]

log = logging.getLogger("aiostreams.transport.kafka_consumer")

LATEST = -1  # ListOffsets' timestamp for "the offset after the last record"


async def commit_offsets(consumer: AIOKafkaConsumer, offsets: Mapping[TopicPartition, int],
                         *, group_id: str, owned: Collection[TopicPartition]) -> None:
    """Commit ``offsets`` for ``group_id``, all or none. Raises :class:`CommitFailedError`
    for a partition not in ``owned`` or when the group rebalanced under the consumer."""
    for tp, offset in offsets.items():
        if offset < 0:
            raise ValueError(f"cannot commit offset {offset} for {tp}: offsets start at 0")
        if tp not in owned:
            raise CommitFailedError(
                f"cannot commit offset {offset} for {tp} in group {group_id!r}: it is "
                f"not assigned to this consumer (assignment: {sorted(map(str, owned))}). "
                "A rebalance moved it; the new owner resumes from the last committed "
                "offset. Commit revoked partitions inside on_partitions_revoked."
            )
    if not offsets:
        return
    try:
        await consumer.commit({_aio(tp): offset for tp, offset in offsets.items()})
    except (AioCommitFailedError, IllegalStateError) as exc:
        raise CommitFailedError(
            f"group {group_id!r} refused the commit of {show(offsets)}: {exc}. The group "
            "rebalanced and the partitions may belong to another member now; their "
            "records will be read again from the last committed offset"
        ) from exc
    except KafkaError as exc:
        raise TransportError(
            f"committing {show(offsets)} for group {group_id!r} failed: {exc!r}"
        ) from exc
    except RuntimeError as exc:
        if not closed_mid_request(exc):
            raise
        raise BrokerUnavailableError(
            f"committing {show(offsets)} for group {group_id!r} failed: the connection to "
            f"the group coordinator closed mid-request ({exc}); nothing was committed"
        ) from exc


async def read_committed_offset(consumer: AIOKafkaConsumer, tp: TopicPartition,
                                group_id: str) -> int | None:
    """The group's committed offset of ``tp`` (None when it has none)."""
    try:
        offset: int | None = await consumer.committed(_aio(tp))
    except KafkaError as exc:
        raise TransportError(
            f"cannot read the committed offset of {tp} for group {group_id!r}: {exc!r}"
        ) from exc
    except RuntimeError as exc:
        if not closed_mid_request(exc):
            raise
        raise BrokerUnavailableError(
            f"cannot read the committed offset of {tp} for group {group_id!r}: the "
            f"connection closed mid-request ({exc})") from exc
    return offset


async def list_offsets(consumer: AIOKafkaConsumer, which: str,
                       partitions: Collection[TopicPartition], *, read_committed: bool
                       ) -> dict[TopicPartition, int]:
    """Each partition's ``which`` (``"beginning"`` or ``"end"``) offset; the end is read
    off the fetch path (:func:`list_end_offsets`), through aiokafka if that fails."""
    if not partitions:
        return {}
    if which == "end":
        try:
            return await list_end_offsets(consumer._client, partitions,
                                          read_committed=read_committed)
        except (TransportError, KafkaError, RuntimeError) as exc:
            # aiokafka's KafkaError is a RuntimeError too: only a bare one may be a bug
            if type(exc) is RuntimeError and not closed_mid_request(exc):
                raise
            log.debug("listing end offsets of %s off the fetch path failed (%s); asking "
                      "through the fetch connection", show(partitions), exc)
    call = consumer.end_offsets if which == "end" else consumer.beginning_offsets
    try:
        found = await call([_aio(tp) for tp in partitions])
    except KafkaError as exc:
        raise TransportError(
            f"cannot read {which} offsets of {show(partitions)}: {exc!r}") from exc
    except RuntimeError as exc:
        if not closed_mid_request(exc):
            raise
        raise BrokerUnavailableError(
            f"cannot read {which} offsets of {show(partitions)}: the connection closed "
            f"mid-request ({exc})") from exc
    return {TopicPartition(tp.topic, tp.partition): offset for tp, offset in found.items()}


def show(partitions: Collection[TopicPartition] | Mapping[TopicPartition, int]) -> str:
    """``t[0]@5, t[1]@7`` for offsets, ``t[0], t[1]`` for partitions."""
    if isinstance(partitions, Mapping):
        return ", ".join(f"{tp}@{offset}" for tp, offset in sorted(partitions.items()))
    return ", ".join(sorted(map(str, partitions)))


def _aio(tp: TopicPartition) -> AioTopicPartition:
    return AioTopicPartition(tp.topic, tp.partition)


async def list_end_offsets(client: Any, partitions: Collection[TopicPartition], *,
                           read_committed: bool) -> dict[TopicPartition, int]:
    """The end offset of each partition (the last stable offset under ``read_committed``).
    ``client`` is the consumer's ``AIOKafkaClient``. Raises :class:`TransportError` when a
    partition has no known leader after a metadata refresh, or a broker answers an error
    (the caller may fall back to aiokafka's own, retrying, ``end_offsets``)."""
    leaders = await _leaders(client, partitions)
    by_node: dict[int, dict[str, list[tuple[int, int]]]] = {}
    for tp in partitions:
        topics = by_node.setdefault(leaders[tp], {})
        topics.setdefault(tp.topic, []).append((tp.partition, LATEST))
    ends: dict[TopicPartition, int] = {}
    for node, topics in by_node.items():
        request = OffsetRequest(-1, 1 if read_committed else 0, list(topics.items()))
        response = await client.send(node, request, group=ConnectionGroup.COORDINATION)
        for topic, answers in response.topics:
            for partition, error_code, *info in answers:
                tp = TopicPartition(topic, partition)
                if error_code:
                    error = for_code(error_code)
                    raise TransportError(f"cannot list the end offset of {tp}: "
                                         f"{error.__name__}: {error.description}")
                # v1-v3: (timestamp, offset); v4+: (timestamp, offset, leader epoch)
                ends[tp] = int(info[1])
    missing = set(partitions) - ends.keys()
    if missing:
        raise TransportError(f"the brokers did not answer for {sorted(map(str, missing))}")
    return ends


async def _leaders(client: Any, partitions: Collection[TopicPartition]
                   ) -> dict[TopicPartition, int]:
    def known() -> dict[TopicPartition, int]:
        found = {}
        for tp in partitions:
            leader = client.cluster.leader_for_partition(AioTopicPartition(*tp))
            if leader is not None and leader >= 0:
                found[tp] = leader
        return found

    leaders = known()
    if len(leaders) < len(partitions):
        for topic in {tp.topic for tp in partitions}:
            client.add_topic(topic)
        await client.force_metadata_update()
        leaders = known()
    if len(leaders) < len(partitions):
        unknown = sorted(str(tp) for tp in partitions if tp not in leaders)
        raise TransportError(f"no leader known for {unknown}")
    return leaders
