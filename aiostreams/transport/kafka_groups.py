"""A consumer group described whichever group protocol it runs: classic or KIP-848.

Kafka 4 has two kinds of consumer group. A *classic* group (every aiokafka member, any
``group.protocol=classic`` client) is described by DescribeGroups; a *consumer* group (the
KIP-848 protocol, ``group.protocol=consumer`` in the Java client) only by
ConsumerGroupDescribe (API key 69). Asked with DescribeGroups about a consumer group, the
broker answers no error, state ``Dead`` and no members: a live group that looks gone. So
:func:`describe_group` asks ConsumerGroupDescribe first and falls back to DescribeGroups when
the broker says the group is not a consumer group (``GROUP_ID_NOT_FOUND``), does not run
consumer groups (``UNSUPPORTED_VERSION``: 3.9 advertises the API, but its consumer groups
are off unless configured) or does not speak the API at all (before 3.7). A consumer group
that classic members joined (Kafka 4 lets them) is a consumer group: ConsumerGroupDescribe
lists both kinds of member.

aiokafka speaks neither ConsumerGroupDescribe nor its flexible encoding of it, so this
module declares v0 of the request and the response (the fields of Kafka's
``ConsumerGroupDescribe{Request,Response}.json``) with aiokafka's protocol classes, as
:mod:`~aiostreams.transport.kafka_topic_ids` does for Metadata v10. aiokafka internals
used: ``AIOKafkaAdminClient.find_coordinator``/``describe_consumer_groups``/``_send_request``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import time
from typing import Any

from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.errors import IncompatibleBrokerVersion, KafkaError
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

from aiostreams.errors import TransportError
from aiostreams.transport.kafka_wire import Uuid

__all__ = ["GroupDescription", "GroupMember", "GroupProtocol", "describe_group",
           "group_coordinator"]

_UNSUPPORTED_VERSION = 35  # 3.8/3.9 advertise the API but run no consumer groups by default
_GROUP_ID_NOT_FOUND = 69  # "not a consumer group": a classic one, or none
_ASK_THE_CLASSIC_WAY = frozenset({_UNSUPPORTED_VERSION, _GROUP_ID_NOT_FOUND})
_COORDINATOR_BUSY = frozenset({14, 15, 16})  # loading, not available, not the coordinator
_COORDINATOR_WAIT = 30.0  # s: a fresh broker creates its offsets topic on the first lookup
_COORDINATOR_RETRY = 0.2


class GroupProtocol(enum.Enum):
    """Which rebalance protocol a group runs (``group.protocol`` of the Java client)."""

    CLASSIC = "classic"
    CONSUMER = "consumer"  # KIP-848


@dataclasses.dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    partitions: tuple[tuple[str, int], ...]
    """The (topic, partition) pairs the member holds now, sorted."""


@dataclasses.dataclass(frozen=True)
class GroupDescription:
    """A group as its coordinator sees it. ``state`` is the broker's word for it: classic
    groups are ``Stable``, ``PreparingRebalance``, ``CompletingRebalance``, ``Empty`` or
    ``Dead`` (no such group); consumer groups ``Stable``, ``Assigning``, ``Reconciling``,
    ``Empty`` or ``Dead``."""

    group: str
    state: str
    protocol: GroupProtocol
    members: tuple[GroupMember, ...]


_TEXT = CompactString("utf-8")
_ASSIGNMENT = Schema(
    ("topic_partitions", CompactArray(("topic_id", Uuid), ("topic_name", _TEXT),
                                      ("partitions", CompactArray(Int32)),
                                      ("tags", TaggedFields))),
    ("tags", TaggedFields),
)


class _ConsumerGroupDescribeResponseV0(Response):  # type: ignore[misc]  # aiokafka untyped
    API_KEY = 69
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("groups", CompactArray(
            ("error_code", Int16), ("error_message", _TEXT), ("group_id", _TEXT),
            ("group_state", _TEXT), ("group_epoch", Int32), ("assignment_epoch", Int32),
            ("assignor_name", _TEXT),
            ("members", CompactArray(
                ("member_id", _TEXT), ("instance_id", _TEXT), ("rack_id", _TEXT),
                ("member_epoch", Int32), ("client_id", _TEXT), ("client_host", _TEXT),
                ("subscribed_topic_names", CompactArray(_TEXT)),
                ("subscribed_topic_regex", _TEXT),
                ("assignment", _ASSIGNMENT), ("target_assignment", _ASSIGNMENT),
                ("tags", TaggedFields))),
            ("authorized_operations", Int32), ("tags", TaggedFields))),
        ("tags", TaggedFields),
    )


class _ConsumerGroupDescribeRequestV0(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 69
    API_VERSION = 0
    RESPONSE_TYPE = _ConsumerGroupDescribeResponseV0
    SCHEMA = Schema(
        ("group_ids", CompactArray(_TEXT)),
        ("include_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


class _ConsumerGroupDescribe(Request[_ConsumerGroupDescribeRequestV0]):  # type: ignore[misc]
    API_KEY = 69

    def __init__(self, group: str) -> None:
        self._group = group

    def build(self, request_struct_class: type[_ConsumerGroupDescribeRequestV0]
              ) -> _ConsumerGroupDescribeRequestV0:
        return request_struct_class([self._group], False, {})


async def group_coordinator(admin: Any, group: str, *, bootstrap: str,
                            timeout: float = _COORDINATOR_WAIT) -> int:
    """The node id of ``group``'s coordinator. ``admin``: a started
    ``aiokafka.admin.AIOKafkaAdminClient``.

    A cluster names no coordinator until its offsets topic (``__consumer_offsets``) exists,
    and a fresh one creates it only on the first lookup: the answer is "coordinator not
    available" (or "loading") for the first seconds. Asks again every 0.2 s (polling:
    nothing announces it) for up to ``timeout`` seconds, then raises
    :class:`TransportError` saying what the broker answered and what to check. Any other
    error is raised as it is.

    Cancellation: propagates at once; nothing is left behind."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return int(await admin.find_coordinator(group))
        except KafkaError as exc:
            if not exc.retriable:
                raise
            if time.monotonic() > deadline:
                raise _no_coordinator(group, bootstrap, timeout, exc) from None
        await asyncio.sleep(_COORDINATOR_RETRY)


def _no_coordinator(group: str, bootstrap: str, timeout: float, last: BaseException
                    ) -> TransportError:
    return TransportError(
        f"no coordinator for group {group!r} on {bootstrap} after {timeout:.0f} s (the "
        f"broker answered {type(last).__name__}). A new cluster creates its offsets topic "
        "(__consumer_offsets) on the first lookup, which takes seconds, not this long: check "
        "that the broker's offsets.topic.replication.factor is at most its number of "
        "brokers, and the brokers' logs; then try again")


async def describe_group(admin: Any, group: str, *, bootstrap: str,
                         timeout: float = _COORDINATOR_WAIT) -> GroupDescription:
    """``group`` as its coordinator describes it, whichever protocol it runs (a group that
    does not exist: classic, ``Dead``, no members, as Kafka's own tools show it).

    ``admin`` is a started ``aiokafka.admin.AIOKafkaAdminClient``. While there is no
    coordinator yet, or it is loading or moving, asks again for up to ``timeout`` seconds
    (see :func:`group_coordinator`), then raises :class:`TransportError` saying so. Raises
    :class:`TransportError` naming the broker's error for any other error."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            coordinator = await group_coordinator(
                admin, group, bootstrap=bootstrap,
                timeout=max(0.0, deadline - time.monotonic()))
            return await _describe_once(admin, group, coordinator, bootstrap)
        except _CoordinatorBusy as busy:
            if time.monotonic() > deadline:
                raise _broker_error(group, busy.code, None, bootstrap) from None
        except KafkaError as exc:
            if not exc.retriable:
                raise
            if time.monotonic() > deadline:
                raise _no_coordinator(group, bootstrap, timeout, exc) from None
        await asyncio.sleep(_COORDINATOR_RETRY)


class _CoordinatorBusy(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


async def _describe_once(admin: Any, group: str, coordinator: int, bootstrap: str
                         ) -> GroupDescription:
    try:
        response = await admin._send_request(_ConsumerGroupDescribe(group), coordinator)
    except (IncompatibleBrokerVersion, NotImplementedError):
        response = None  # a broker before KIP-848 (3.7): every group is classic
    if response is not None:
        (described,) = response.to_object()["groups"]
        code = described["error_code"]
        if code == 0:
            return _consumer_group(described)
        if code in _COORDINATOR_BUSY:
            raise _CoordinatorBusy(code)
        if code not in _ASK_THE_CLASSIC_WAY:
            raise _broker_error(group, code, described["error_message"], bootstrap)
    # one group per request: aiokafka 0.14 misreads a response describing several
    (classic,) = await admin.describe_consumer_groups([group], coordinator)
    data: dict[str, Any] = classic.to_object()["groups"][0]
    if data["error_code"] in _COORDINATOR_BUSY:
        raise _CoordinatorBusy(data["error_code"])
    if data["error_code"]:
        raise _broker_error(group, data["error_code"], None, bootstrap)
    return _classic_group(group, data)


def _consumer_group(data: dict[str, Any]) -> GroupDescription:
    members = tuple(
        GroupMember(m["member_id"], m["client_id"], m["client_host"].lstrip("/"),
                    tuple(sorted((t["topic_name"], p)
                                 for t in m["assignment"]["topic_partitions"]
                                 for p in t["partitions"])))
        for m in data["members"])
    return GroupDescription(data["group_id"], data["group_state"], GroupProtocol.CONSUMER,
                            members)


def _classic_group(group: str, data: dict[str, Any]) -> GroupDescription:
    members = []
    for m in data["members"]:
        assigned: list[tuple[str, int]] = []
        if m["member_assignment"]:
            decoded = ConsumerProtocolMemberAssignment.decode(m["member_assignment"])
            assigned = sorted((t, p) for t, ps in decoded.assignment for p in ps)
        members.append(GroupMember(m["member_id"], m["client_id"],
                                   m["client_host"].lstrip("/"), tuple(assigned)))
    return GroupDescription(group, data["state"], GroupProtocol.CLASSIC, tuple(members))


def _broker_error(group: str, code: int, message: str | None, bootstrap: str
                  ) -> TransportError:
    said = f" ({message})" if message else ""
    return TransportError(f"describing group {group!r} on {bootstrap}: the broker answered "
                          f"error code {code}{said}; check the group id and that this "
                          "client may describe it")
