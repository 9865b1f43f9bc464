"""``aiostreams groups`` and ``aiostreams store upgrade`` on a cluster that names no group
coordinator yet.

A fresh cluster creates its offsets topic on the first coordinator lookup and answers "not
available" until it has (on 4.4.0, the first lookup always does): the commands ask again
and then succeed. A cluster that never names one (here: its offsets topic wants more
replicas than it has brokers) fails them after the transport's ``connect_timeout`` with an
error that says what to check - not an aiokafka exception.

Each test starts a broker of its own (the session's was warmed up by its fixture).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from aiostreams import App
from aiostreams.commands import CommandError
from aiostreams.commands.groups import ResetTo, reset_group, show_groups
from aiostreams.commands.store_upgrade import upgrade_store
from aiostreams.localkafka import LocalKafka
from aiostreams.transport.kafka import KafkaTransport

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

NEVER = 3.0  # s: the connect_timeout of the never-coordinating cluster's transport


@contextlib.asynccontextmanager
async def _broker(**properties: str) -> AsyncIterator[LocalKafka]:
    kafka = LocalKafka(server_properties=properties)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, kafka.start)
    try:
        yield kafka
    finally:
        await loop.run_in_executor(None, kafka.stop)


def _app(transport: KafkaTransport) -> App:
    app = App("upgraded", transport=transport)
    app.topic("src", key=str, value=str)
    app.stream("src").group_by_key().count(materialized="n", persistent=True)
    return app


async def test_a_fresh_cluster_is_asked_again_until_it_names_a_coordinator() -> None:
    async with _broker() as kafka:
        transport = KafkaTransport(kafka.bootstrap)
        # the very first lookup of this cluster: "not available" while it creates the
        # offsets topic
        with pytest.raises(CommandError, match="no consumer group 'g'"):
            await show_groups(transport, "g")
        assert await upgrade_store(_app(transport), transport, "n", say=lambda _: None) == 0


async def test_a_cluster_that_never_names_a_coordinator_fails_the_commands_saying_what_to_check(
        ) -> None:
    async with _broker(**{"offsets.topic.replication.factor": "3"}) as kafka:
        transport = KafkaTransport(kafka.bootstrap, connect_timeout=NEVER)
        commands: dict[str, Callable[[], Awaitable[int]]] = {
            "groups show": lambda: show_groups(transport, "g"),
            "groups reset": lambda: reset_group(transport, "g", ResetTo.EARLIEST,
                                                dry_run=True),
            "store upgrade": lambda: upgrade_store(_app(transport), transport, "n",
                                                   say=lambda _: None),
        }
        for name, command in commands.items():
            began = time.monotonic()
            with pytest.raises(CommandError) as failed:
                await command()
            took = time.monotonic() - began
            message = str(failed.value)
            assert f"no coordinator for group {'g' if 'groups' in name else 'upgraded'!r}" \
                in message, (name, message)
            assert f"after {NEVER:.0f} s" in message, message
            assert "GroupCoordinatorNotAvailableError" in message, message
            assert "offsets.topic.replication.factor" in message, message
            assert NEVER <= took < NEVER + 10, (name, took)
