"""``aiostreams groups`` on a group of Kafka 4's consumer protocol (KIP-848), beside the
classic groups test_cli_admin.py shows: asked the classic way, the broker calls such a live
group ``Dead`` with no members.

The KIP-848 member is Kafka's own Java console consumer (``group.protocol=consumer``) from
the session broker's release; it needs a Kafka 4 broker, so a 3.9 session skips it.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from clikit import cli, topic_with_records

from aiostreams.localkafka import LocalKafka, kafka_release
from aiostreams.transport.kafka_groups import GroupProtocol, describe_group

pytestmark = pytest.mark.kafka

PER_PARTITION = 10


async def _until_caught_up(bootstrap: str, group: str, java: asyncio.subprocess.Process,
                           timeout: float = 90.0) -> None:
    """Poll the broker (nothing announces it) until the group has one member holding both
    partitions and has committed every record."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            assert java.returncode is None, "the Java console consumer exited"
            described = await describe_group(admin, group, bootstrap=bootstrap)
            offsets = await admin.list_consumer_group_offsets(group)
            held = [p for m in described.members for p in m.partitions]
            if (len(held) == 2 and described.protocol is GroupProtocol.CONSUMER
                    and sorted(o.offset for o in offsets.values()) == [PER_PARTITION] * 2):
                return
            assert time.monotonic() < deadline, f"not caught up: {described}, {offsets}"
            await asyncio.sleep(0.25)
    finally:
        await admin.close()


@pytest.fixture
async def consumer_protocol_member(kafka_bootstrap: str, topic_name: Callable[[str], str]
                                   ) -> AsyncIterator[tuple[str, str]]:
    """A group of the KIP-848 protocol with one live member that read and committed all
    10 + 10 records of its topic."""
    release = kafka_release()
    if release.major < 4 or release.console_consumer is None:
        pytest.skip(f"the KIP-848 consumer protocol needs a Kafka 4 broker; the session "
                    f"runs {release.version} (AIOSTREAMS_KAFKA_VERSION)")
    topic, group = topic_name("kip848-t"), topic_name("kip848-g")
    await topic_with_records(kafka_bootstrap, topic, PER_PARTITION)
    command = LocalKafka().tool_command(
        release.console_consumer, "--bootstrap-server", kafka_bootstrap, "--topic", topic,
        "--group", group, "--from-beginning",
        "--consumer-property", "group.protocol=consumer",
        "--consumer-property", "client.id=kip848-member",
        "--consumer-property", "auto.commit.interval.ms=200")
    java = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    try:
        await _until_caught_up(kafka_bootstrap, group, java)
        yield topic, group
    finally:
        with contextlib.suppress(ProcessLookupError):
            java.kill()
        await java.wait()


@pytest.mark.timeout(180)
async def test_groups_show_a_live_consumer_protocol_group_with_its_member_and_partitions(
        kafka_bootstrap: str, consumer_protocol_member: tuple[str, str]) -> None:
    topic, group = consumer_protocol_member
    broker = ("--broker", f"kafka://{kafka_bootstrap}")

    shown = await asyncio.to_thread(cli, "groups", "show", group, *broker)
    assert shown.returncode == 0, shown.stderr
    assert f"group {group!r}: Stable, 1 member(s), lag 0, protocol consumer" in shown.stdout
    assert re.search(rf"member \S+ \(client 'kip848-member' on 127\.0\.0\.1\): "
                     rf"{topic}\[0\], {topic}\[1\]", shown.stdout), shown.stdout
    assert re.search(rf"{topic}\s+1\s+10\s+10\s+0$", shown.stdout, re.M), shown.stdout

    listed = await asyncio.to_thread(cli, "groups", *broker)
    assert f"group {group!r}: Stable, 1 member(s)" in listed.stdout, listed.stderr

    refused = await asyncio.to_thread(cli, "groups", "reset", group, "--to-earliest", *broker)
    assert refused.returncode == 1  # it has a member: a reset would be overwritten
    assert f"group {group!r} has 1 member(s)" in refused.stderr
