"""A client that knows no broker yet - the cluster's metadata listed none, as a KRaft broker
does for a moment after it comes back from an outage (seen on 4.4.0: the admin client of a
test failed with ``NodeNotReadyError ... (node id None)`` right after the broker resumed) -
asks for the metadata again instead of sending to node ``None``
(``aiostreams.transport.kafka_connection.a_broker``). A stand-in plays aiokafka's client:
the moment is too short to hit on purpose on a real broker (the real scenario:
tests/chaos/test_worker_faults.py's stop during an outage, whose reader meets it)."""

from __future__ import annotations

import pytest

from aiostreams.errors import BrokerUnavailableError
from aiostreams.transport.kafka_connection import a_broker


class Client:
    """What ``a_broker`` uses of ``aiokafka.AIOKafkaClient``: the brokers the metadata
    listed, and a refresh of it (each refresh lists those of ``refreshes``, in turn)."""

    def __init__(self, refreshes: list[list[int]]) -> None:
        self.brokers: list[int] = []
        self.refreshes = refreshes
        self.asked = 0

    def get_random_node(self) -> int | None:
        return self.brokers[0] if self.brokers else None

    async def force_metadata_update(self) -> bool:
        self.asked += 1
        self.brokers = self.refreshes.pop(0) if self.refreshes else []
        return bool(self.brokers)


async def test_a_client_that_knows_no_broker_refreshes_until_the_metadata_lists_one() -> None:
    client = Client([[], [], [1]])
    assert await a_broker(client, bootstrap="b:1", timeout=10) == 1
    assert client.asked == 3


async def test_a_cluster_that_lists_no_broker_for_long_is_an_outage_said_as_such() -> None:
    with pytest.raises(BrokerUnavailableError,
                       match=r"the cluster at b:1 lists no live broker .* after 1 s"):
        await a_broker(Client([]), bootstrap="b:1", timeout=1.0)
