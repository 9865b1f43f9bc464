"""A static member told "unknown member" while its session was alive was taken over by
another process with its instance id (aiostreams/transport/kafka_lease.py): it must not
rejoin - that would fence the other process, which would do the same - and its heartbeat
fails by name. Without a broker: the lease sits on aiokafka's coordinator's ``_send_req``,
which a stand-in plays here (the real broker's side: tests/integration/
test_kafka_static_membership.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from aiostreams.transport.kafka_instance_fence import FencedInstanceIdError, is_instance_fence
from aiostreams.transport.kafka_lease import install_lease

HEARTBEAT, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID = 12, 25, 82


@dataclass
class Answer:
    error_code: int


@dataclass
class Request:
    API_KEY: int


@dataclass
class Coordinator:
    """What the lease uses of aiokafka's group coordinator."""

    answers: list[int]
    generation: int = 3
    resets: int = 0

    async def _send_req(self, request: Any) -> Answer:
        return Answer(self.answers.pop(0))

    def reset_generation(self) -> None:
        self.resets += 1
        self.generation = -1


@dataclass
class Consumer:
    _coordinator: Coordinator = field(default_factory=lambda: Coordinator([]))


async def heartbeat(coordinator: Coordinator) -> Answer:
    answer: Answer = await coordinator._send_req(Request(HEARTBEAT))
    return answer


@pytest.mark.parametrize("code", [UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID])
async def test_a_static_member_forgotten_while_its_session_lived_stops_instead_of_rejoining(
        code: int) -> None:
    consumer = Consumer(Coordinator([0, code, code]))
    lease = install_lease(consumer, session_timeout=10.0, rebalance_timeout=10.0, static=True)
    assert lease is not None
    await heartbeat(consumer._coordinator)
    assert lease.valid(3)
    for _ in range(2):  # and every heartbeat after it: aiokafka retries them
        with pytest.raises(FencedInstanceIdError) as failed:
            await heartbeat(consumer._coordinator)
        assert is_instance_fence(failed.value)
    assert lease.taken_over and not lease.valid()
    consumer._coordinator.reset_generation()  # e.g. a refused commit: aiokafka would rejoin
    assert consumer._coordinator.resets == 0 and consumer._coordinator.generation == 3


async def test_a_dynamic_member_forgotten_rejoins_as_before() -> None:
    consumer = Consumer(Coordinator([0, UNKNOWN_MEMBER_ID]))
    lease = install_lease(consumer, session_timeout=10.0, rebalance_timeout=10.0)
    assert lease is not None
    await heartbeat(consumer._coordinator)
    assert (await heartbeat(consumer._coordinator)).error_code == UNKNOWN_MEMBER_ID
    assert not lease.taken_over and not lease.valid()
    consumer._coordinator.reset_generation()
    assert consumer._coordinator.resets == 1


async def test_a_static_member_whose_session_expired_rejoins_as_before() -> None:
    """No heartbeat answered for a session: the broker may have expired it (a frozen
    process): that is not another process's doing, and it rejoins."""
    consumer = Consumer(Coordinator([UNKNOWN_MEMBER_ID]))
    lease = install_lease(consumer, session_timeout=10.0, rebalance_timeout=10.0, static=True)
    assert lease is not None  # never renewed: as good as expired
    assert (await heartbeat(consumer._coordinator)).error_code == UNKNOWN_MEMBER_ID
    assert not lease.taken_over
    consumer._coordinator.reset_generation()
    assert consumer._coordinator.resets == 1
