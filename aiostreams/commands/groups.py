"""``aiostreams groups [show [GROUP]]`` and ``aiostreams groups reset GROUP --to-earliest |
--to-datetime WHEN | --shift N``: the consumer groups of a Kafka cluster.

``show`` prints, per group, its state, its group protocol (``classic``, or ``consumer``: the
KIP-848 protocol of Kafka 4) and members (member id, client id, host, assigned partitions)
and, per partition it has committed, the committed offset, the end offset and the lag
(end - committed).

``reset`` moves a group's committed offsets, for every partition it has committed (or the
partitions of ``--topic`` topics): to each partition's earliest offset, to the first offset
at or after a time (``--to-datetime``, ISO 8601; no zone means UTC; a partition with nothing
that late goes to its end), or by ``--shift N`` from the committed offset (clamped to the
partition's earliest and end offsets). It is refused while the group has members, as
Kafka's own tool refuses it: a running member would overwrite the reset at its next commit,
or process from where it is regardless. ``--dry-run`` prints the plan and changes nothing.
The reset is committed as a member-less commit, which the broker also rejects if a member
joined after the check.

Kafka only: a ``memory://`` broker lives inside one process, so another process has no
groups to show.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import CommitFailedError
from aiokafka.structs import OffsetAndMetadata
from aiokafka.structs import TopicPartition as KafkaTP

from aiostreams.commands import CommandError, UsageError
from aiostreams.errors import TransportError
from aiostreams.transport.base import Transport
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.transport.kafka_connection import partition_counts, start_or_unavailable
from aiostreams.transport.kafka_groups import (
    GroupDescription,
    describe_group,
    group_coordinator,
)
from aiostreams.transport.kafka_instance_fence import STATIC_MEMBERS_LINGER


class ResetTo(enum.Enum):
    EARLIEST = "earliest"
    DATETIME = "datetime"
    SHIFT = "shift"


def _kafka(transport: Transport) -> KafkaTransport:
    if not isinstance(transport, KafkaTransport):
        raise UsageError(f"consumer groups need a Kafka broker (--broker kafka://HOST:PORT); "
                         f"{transport.url} lives inside one process, so this one sees none")
    return transport


class _Clients:
    """An admin client and a group-less consumer (offset queries) on one cluster."""

    def __init__(self, transport: KafkaTransport) -> None:
        self.transport = transport
        kwargs = transport.options.client_kwargs(transport.bootstrap, "aiostreams-groups")
        self.admin = AIOKafkaAdminClient(**kwargs)
        self.offsets = AIOKafkaConsumer(**kwargs, enable_auto_commit=False)

    async def __aenter__(self) -> _Clients:
        opts = self.transport.options
        await start_or_unavailable(self.admin.start, self.admin.close,
                                   bootstrap=self.transport.bootstrap, options=opts,
                                   what="admin client")
        try:
            await start_or_unavailable(self.offsets.start, self.offsets.stop,
                                       bootstrap=self.transport.bootstrap, options=opts,
                                       what="consumer")
        except BaseException:
            await self.admin.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.offsets.stop()
        finally:
            await self.admin.close()

    async def describe(self, group: str) -> GroupDescription:
        """The group whichever protocol it runs (classic or KIP-848). A cluster that names
        no coordinator yet (a fresh one) is asked again for up to the transport's
        ``connect_timeout``, then the command fails saying so."""
        try:
            return await describe_group(self.admin, group, bootstrap=self.transport.bootstrap,
                                        timeout=self.transport.options.connect_timeout)
        except TransportError as exc:
            raise CommandError(str(exc)) from None

    async def committed(self, group: str) -> dict[KafkaTP, int]:
        """The group's committed offsets (after the same wait for a coordinator)."""
        try:
            coordinator = await group_coordinator(
                self.admin, group, bootstrap=self.transport.bootstrap,
                timeout=self.transport.options.connect_timeout)
        except TransportError as exc:
            raise CommandError(str(exc)) from None
        offsets = await self.admin.list_consumer_group_offsets(group, coordinator)
        return {tp: meta.offset for tp, meta in offsets.items() if meta.offset >= 0}

    async def partitions(self, topic: str) -> list[KafkaTP]:
        # One metadata request that never creates the topic (the consumer's
        # partitions_for_topic is synchronous and knows only topics it already fetched).
        try:
            counts = await partition_counts(self.admin._client, [topic],
                                            bootstrap=self.transport.bootstrap)
        except TransportError as exc:
            raise CommandError(str(exc)) from None
        count = counts[topic]
        if count is None:
            raise CommandError(f"topic {topic!r} does not exist on {self.transport.url}; "
                               "`aiostreams topics list` shows the topics there")
        return [KafkaTP(topic, p) for p in range(count)]


async def show_groups(transport: Transport, group: str | None) -> int:
    async with _Clients(_kafka(transport)) as clients:
        names = ([group] if group is not None else
                 sorted(g for g, _protocol in await clients.admin.list_consumer_groups()))
        if not names:
            print(f"no consumer groups on {transport.url}", flush=True)
        for name in names:
            info = await clients.describe(name)
            committed = await clients.committed(name)
            if group is not None and info.state == "Dead" and not committed:
                raise CommandError(f"no consumer group {name!r} on {transport.url}; "
                                   "`aiostreams groups` lists the groups there")
            ends = await clients.offsets.end_offsets(list(committed)) if committed else {}
            _print_group(info, committed, ends)
    return 0


def _print_group(info: GroupDescription, committed: dict[KafkaTP, int],
                 ends: dict[KafkaTP, int]) -> None:
    lag = sum(max(0, ends[tp] - off) for tp, off in committed.items())
    print(f"group {info.group!r}: {info.state}, {len(info.members)} member(s), "
          f"lag {lag}, protocol {info.protocol.value}", flush=True)
    for m in info.members:
        parts = ", ".join(f"{t}[{p}]" for t, p in m.partitions) or "none"
        print(f"  member {m.member_id} (client {m.client_id!r} on {m.host}): {parts}")
    if committed:
        print(f"  {'TOPIC':<30} {'PARTITION':>9} {'COMMITTED':>10} {'END':>10} {'LAG':>8}")
    for tp in sorted(committed):
        end = ends[tp]
        print(f"  {tp.topic:<30} {tp.partition:>9} {committed[tp]:>10} {end:>10} "
              f"{max(0, end - committed[tp]):>8}", flush=True)


def parse_datetime(text: str) -> float:
    """``text`` (ISO 8601; no zone: UTC) as epoch seconds; :class:`UsageError` if not."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--to-datetime {text!r} is not an ISO 8601 time, e.g. "
                         "2026-11-25T06:00:00Z or 2026-11-25T07:00:00+01:00") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


async def reset_group(transport: Transport, group: str, to: ResetTo, *,
                      when: float | None = None, shift: int | None = None,
                      topics: Sequence[str] = (), dry_run: bool = False) -> int:
    """See the module docstring."""
    async with _Clients(_kafka(transport)) as clients:
        info = await clients.describe(group)
        if info.members:
            clients_of = sorted({m.client_id for m in info.members})
            raise CommandError(
                f"group {group!r} has {len(info.members)} member(s) ({info.state}; clients "
                f"{clients_of}): stop them first, a running member would overwrite the "
                f"reset; nothing was changed. {STATIC_MEMBERS_LINGER}")
        committed = await clients.committed(group)
        if topics:
            tps = [tp for topic in topics for tp in await clients.partitions(topic)]
        else:
            tps = sorted(committed)
        if not tps:
            raise CommandError(f"group {group!r} has no committed offsets on "
                               f"{transport.url}; name the topics with --topic")
        plan = await _targets(clients.offsets, tps, committed, to, when, shift)
        for tp in sorted(plan):
            before = committed.get(tp)
            print(f"{tp.topic}[{tp.partition}]: {'-' if before is None else before} -> "
                  f"{plan[tp]}", flush=True)
        if dry_run:
            print(f"dry run: group {group!r} unchanged", flush=True)
            return 0
        await _commit(clients.transport, group, plan)
    print(f"reset group {group!r}: {len(plan)} partition(s)", flush=True)
    return 0


async def _targets(consumer: AIOKafkaConsumer, tps: list[KafkaTP],
                   committed: dict[KafkaTP, int], to: ResetTo, when: float | None,
                   shift: int | None) -> dict[KafkaTP, int]:
    starts = await consumer.beginning_offsets(tps)
    ends = await consumer.end_offsets(tps)
    if to is ResetTo.EARLIEST:
        return {tp: starts[tp] for tp in tps}
    if to is ResetTo.DATETIME:
        assert when is not None
        found = await consumer.offsets_for_times({tp: int(when * 1000) for tp in tps})
        return {tp: found[tp].offset if found.get(tp) is not None else ends[tp]
                for tp in tps}
    assert to is ResetTo.SHIFT and shift is not None
    return {tp: min(ends[tp], max(starts[tp], committed.get(tp, ends[tp]) + shift))
            for tp in tps}


async def _commit(transport: KafkaTransport, group: str, plan: dict[KafkaTP, int]) -> None:
    kwargs = transport.options.client_kwargs(transport.bootstrap, "aiostreams-groups")
    consumer = AIOKafkaConsumer(**kwargs, group_id=group, enable_auto_commit=False)
    await start_or_unavailable(consumer.start, consumer.stop, bootstrap=transport.bootstrap,
                               options=transport.options, what="consumer")
    try:
        consumer.assign(list(plan))  # manual assignment: no join, a member-less commit
        try:
            await consumer.commit({tp: OffsetAndMetadata(o, "") for tp, o in plan.items()})
        except CommitFailedError:
            raise CommandError(f"the broker refused the reset of group {group!r}: a member "
                               "joined it meanwhile; nothing was changed") from None
    finally:
        await consumer.stop()
