"""``aiostreams topics list | create NAME --partitions N | describe NAME``: the broker's
topics, through the transport's admin client (so ``memory://`` and ``kafka://`` alike)."""

from __future__ import annotations

from collections.abc import Mapping

from aiostreams.commands import CommandError, UsageError
from aiostreams.errors import UnknownTopicError
from aiostreams.transport.base import Admin, TopicSpec, Transport
from aiostreams.types import TopicPartition


async def partition_count(admin: Admin, transport: Transport, topic: str) -> int:
    """The topic's partition count; :class:`UnknownTopicError` naming the broker if none."""
    count = await admin.partitions_for(topic)
    if count is None:
        raise UnknownTopicError(
            f"topic {topic!r} does not exist on {transport.url}; `aiostreams topics list` "
            "shows the topics there")
    return count


async def list_topics(transport: Transport) -> int:
    admin = transport.admin()
    await admin.start()
    try:
        names = await admin.list_topics()
        counts = {name: await admin.partitions_for(name) for name in names}
    finally:
        await admin.stop()
    width = max((len(n) for n in names), default=0)
    for name in names:
        print(f"{name:<{width}}  {counts[name]} partition(s)", flush=True)
    if not names:
        print(f"no topics on {transport.url}", flush=True)
    return 0


async def create_topic(transport: Transport, name: str, partitions: int,
                       replication_factor: int, config: Mapping[str, str],
                       if_not_exists: bool) -> int:
    if partitions < 1:
        raise UsageError(f"--partitions must be at least 1, got {partitions}")
    if replication_factor < 1:
        raise UsageError(
            f"--replication-factor must be at least 1, got {replication_factor}")
    admin = transport.admin()
    await admin.start()
    try:
        existing = await admin.partitions_for(name)
        if existing is not None:
            if if_not_exists:
                print(f"topic {name!r} exists already ({existing} partition(s))", flush=True)
                return 0
            raise CommandError(
                f"topic {name!r} exists already on {transport.url} with {existing} "
                "partition(s); pass --if-not-exists to accept that")
        await admin.create_topics([TopicSpec(name, partitions, replication_factor,
                                             dict(config))])
    finally:
        await admin.stop()
    print(f"created topic {name!r} with {partitions} partition(s)", flush=True)
    return 0


async def describe_topic(transport: Transport, name: str) -> int:
    admin = transport.admin()
    await admin.start()
    try:
        count = await partition_count(admin, transport, name)
    finally:
        await admin.stop()
    consumer = transport.consumer(None, client_id="aiostreams-cli")
    await consumer.start()
    try:
        tps = [TopicPartition(name, p) for p in range(count)]
        starts = await consumer.beginning_offsets(tps)
        ends = await consumer.end_offsets(tps)
    finally:
        await consumer.stop()
    total = sum(ends[tp] - starts[tp] for tp in tps)
    print(f"topic {name!r} on {transport.url}: {count} partition(s), {total} record(s)",
          flush=True)
    print(f"  {'partition':>9}  {'start':>12}  {'end':>12}  {'records':>12}")
    for tp in tps:
        print(f"  {tp.partition:>9}  {starts[tp]:>12}  {ends[tp]:>12}  "
              f"{ends[tp] - starts[tp]:>12}", flush=True)
    return 0
