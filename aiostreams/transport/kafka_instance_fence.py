"""Two processes that claim one ``group_instance_id``: told apart from other failures.

With static membership (KIP-345) the group coordinator knows a member by its instance id. A
second process that joins with the id of a live member takes its place. The first one
learns it at its next heartbeat: as ``UNKNOWN_MEMBER_ID`` from aiokafka's heartbeats, which
carry no instance id (Kafka 3.9 and 4.4 alike), as ``FENCED_INSTANCE_ID`` (error 82) from a
request that carries one. Left to aiokafka, the first process rejoins with the same id and
fences the other in turn: a fencing loop that never ends and never says why (seen on 4.4.0).
:mod:`~aiostreams.transport.kafka_lease` tells that case apart (a static member forgotten
while its session was alive) and stops the rejoin; the consumer then raises
:class:`~aiostreams.errors.InstanceIdConflictError` with :func:`instance_conflict_message`.

This module also gives code 82 its class (:class:`FencedInstanceIdError`, registered in
aiokafka's table of error codes at import: aiokafka 0.13/0.14 has none and would say
``UnknownError``), and tells whether an error, or a dead background task's error text, is
that fence (:func:`is_instance_fence`): the commit and the watchdog's verdict check it too.
aiokafka internals used: ``aiokafka.errors.kafka_errors`` (its code -> class table, read by
``for_code``).
"""

from __future__ import annotations

from aiokafka import errors as aiokafka_errors
from aiokafka.errors import BrokerResponseError

__all__ = ["FENCED_INSTANCE_ID", "STATIC_MEMBERS_LINGER", "FencedInstanceIdError",
           "instance_conflict_message", "is_instance_fence"]

STATIC_MEMBERS_LINGER = (
    "A worker with static membership (the default for apps with a state_dir) stays a member "
    "after it stopped, until its session times out (the transport's session_timeout, 45 s "
    "by default): if every instance is stopped, try again after that")
"""What a command refused because a group has members adds: they may be stopped static
members."""

FENCED_INSTANCE_ID = 82
"""Kafka's error code for a static member replaced by another with its instance id."""


class FencedInstanceIdError(BrokerResponseError):  # type: ignore[misc]  # aiokafka untyped
    errno = FENCED_INSTANCE_ID
    message = "FENCED_INSTANCE_ID"
    description = ("The broker rejected this static consumer since another consumer with "
                   "the same group.instance.id has registered with a different member.id.")
    retriable = False


# aiokafka maps codes to classes through this table; code 82 is not in it (0.13, 0.14)
aiokafka_errors.kafka_errors.setdefault(FENCED_INSTANCE_ID, FencedInstanceIdError)


def is_instance_fence(error: BaseException | str | None) -> bool:
    """Whether ``error`` - an exception, its cause, or the text of one (aiokafka wraps the
    heartbeat's error in a ``KafkaError`` whose message is its repr) - is the fence of a
    static member replaced by another process with its instance id."""
    if error is None:
        return False
    if isinstance(error, str):
        return FencedInstanceIdError.__name__ in error
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, FencedInstanceIdError) or is_instance_fence(str(seen)):
            return True
        seen = seen.__cause__
    return False


def instance_conflict_message(group: str, instance_id: str | None) -> str:
    """What a worker fenced this way says: what happened and what to change."""
    named = f"group_instance_id {instance_id!r}" if instance_id else "its group_instance_id"
    return (
        f"another process joined group {group!r} with this worker's {named} and took its "
        "place (Kafka: FENCED_INSTANCE_ID; or an administrator removed this member from "
        "the group). Two processes must never share an instance id: "
        "give each its own group_instance_id (the supervisor, --workers N, gives each "
        "worker its own); a derived id comes from the state directory's '.instance-token': "
        "a state directory copied to another host copies it, so delete the copy's token "
        "(it draws a new one); or turn static membership off (static_membership=False). "
        "This worker stops rather than take the id back, which would stop the other")
