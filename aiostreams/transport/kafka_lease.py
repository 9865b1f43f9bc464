"""The membership lease of a Kafka group member, fed by aiokafka's coordinator requests.

aiokafka keeps the time of its last successful heartbeat to itself, so the lease
(:class:`~aiostreams.transport.membership.MembershipLease`) listens at the one door every
group request passes: the coordinator's ``_send_req``. A Heartbeat or SyncGroup answered with
no error renews it from the moment the request was sent, for the generation the request
named; an answer saying the member or its generation is unknown (or fenced) revokes it.
A heartbeat answered "rebalance in progress" renews it for the rebalance's length (the
member keeps its partitions until it rejoins, within the rebalance timeout).

A *static* member (one with a ``group_instance_id``) told by a heartbeat that its member id
is unknown while its lease was still valid was not expired: another process joined with its
instance id and the broker gave that one its place (aiokafka sends no instance id with its
heartbeats, so the broker says "unknown member", not ``FENCED_INSTANCE_ID``; either counts).
Left to itself aiokafka would rejoin, take the id back and fence the other process, which
would do the same, for ever. So the lease is marked :attr:`~MembershipLease.taken_over`, and
from then on the heartbeat fails with :class:`FencedInstanceIdError` and the coordinator's
generation is never reset: aiokafka does not rejoin, and the consumer raises
:class:`~aiostreams.errors.InstanceIdConflictError` to its user.
"""

from __future__ import annotations

import time
from typing import Any

from aiostreams.transport.kafka_instance_fence import FencedInstanceIdError
from aiostreams.transport.membership import MembershipLease

__all__ = ["install_lease", "lease_generation"]

_HEARTBEAT = 12
_SYNC_GROUP = 14
_RENEWING = (_HEARTBEAT, _SYNC_GROUP)
_NO_ERROR = 0
_REBALANCING = 27  # REBALANCE_IN_PROGRESS
_LOST = frozenset({
    22,  # ILLEGAL_GENERATION
    25,  # UNKNOWN_MEMBER_ID
    82,  # FENCED_INSTANCE_ID
})
_REPLACED = frozenset({25, 82})  # a static member's answers when another took its id


def install_lease(aio_consumer: Any, session_timeout: float,
                  rebalance_timeout: float, *, static: bool = False) -> MembershipLease | None:
    """Attach a lease to a started aiokafka consumer's group coordinator; None when the
    consumer has no group. ``static``: the consumer has a ``group_instance_id`` (see the
    module docstring for what changes)."""
    coordinator = getattr(aio_consumer, "_coordinator", None)
    if coordinator is None or not hasattr(coordinator, "generation") \
            or not hasattr(coordinator, "_send_req"):
        return None
    lease = MembershipLease(session_timeout, rebalance_timeout)
    send = coordinator._send_req

    async def send_and_renew(request: Any) -> Any:
        api_key = getattr(request, "API_KEY", None)
        sent_at = time.monotonic()
        generation = coordinator.generation
        response = await send(request)
        if api_key in _RENEWING:
            code = getattr(response, "error_code", None)
            if api_key == _HEARTBEAT and static and code in _REPLACED and (
                    lease.taken_over or lease.expires_in() > 0):
                lease.taken_over = True
                lease.revoke()
                raise FencedInstanceIdError("another process took this member's "
                                            "group_instance_id")
            if code == _NO_ERROR:
                # a SyncGroup's answer is for the generation its JoinGroup gave, which
                # the coordinator already holds when the SyncGroup is sent
                lease.renew(sent_at, generation)
            elif code == _REBALANCING and api_key == _HEARTBEAT:
                lease.renew(sent_at, generation, rebalancing=True)
            elif code in _LOST:
                lease.revoke()
        return response

    coordinator._send_req = send_and_renew
    reset = coordinator.reset_generation

    def reset_and_revoke() -> None:
        lease.revoke()
        if not lease.taken_over:  # a reset generation makes aiokafka rejoin
            reset()

    coordinator.reset_generation = reset_and_revoke
    return lease


def lease_generation(aio_consumer: Any) -> int:
    """The generation aiokafka's coordinator holds now (-1: none, or no group)."""
    coordinator = getattr(aio_consumer, "_coordinator", None)
    generation = getattr(coordinator, "generation", -1)
    return generation if isinstance(generation, int) else -1
