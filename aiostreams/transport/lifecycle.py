"""What every transport's clients share (memory and Kafka alike): their lifecycles, the
checks of each state change and of ``getmany``'s arguments, and the errors a client in
the wrong state raises (saying what to call instead)."""

from __future__ import annotations

import enum
from collections.abc import Collection

from aiostreams.errors import TransportError
from aiostreams.transport.base import ConsumerOptions


class ConsumerState(enum.Enum):
    """``CREATED → STARTED → STOPPING → STOPPED``; stopping an unstarted consumer skips
    ``STARTED``. ``STOPPING`` lasts while ``on_partitions_revoked`` runs in ``stop()``."""

    CREATED = "created"
    STARTED = "started"
    STOPPING = "stopping"
    STOPPED = "stopped"


CONSUMER_TRANSITIONS: dict[ConsumerState, set[ConsumerState]] = {
    ConsumerState.CREATED: {ConsumerState.STARTED, ConsumerState.STOPPING},
    ConsumerState.STARTED: {ConsumerState.STOPPING},
    ConsumerState.STOPPING: {ConsumerState.STOPPED},
    ConsumerState.STOPPED: set(),
}


class ProducerState(enum.Enum):
    """``CREATED → READY ⇄ IN_TRANSACTION``; ``FENCED`` once a newer producer with the same
    transactional id started; ``STOPPED`` from anywhere."""

    CREATED = "created"
    READY = "ready"
    IN_TRANSACTION = "in a transaction"
    FENCED = "fenced"
    STOPPED = "stopped"


PRODUCER_TRANSITIONS: dict[ProducerState, set[ProducerState]] = {
    ProducerState.CREATED: {ProducerState.READY, ProducerState.STOPPED},
    ProducerState.READY: {
        ProducerState.IN_TRANSACTION, ProducerState.FENCED, ProducerState.STOPPED,
    },
    ProducerState.IN_TRANSACTION: {
        ProducerState.READY, ProducerState.FENCED, ProducerState.STOPPED,
    },
    ProducerState.FENCED: {ProducerState.STOPPED},
    ProducerState.STOPPED: set(),
}


def check_consumer_transition(old: ConsumerState, new: ConsumerState) -> None:
    """Raise :class:`TransportError` unless ``CONSUMER_TRANSITIONS`` allows ``old → new``."""
    if new not in CONSUMER_TRANSITIONS[old]:
        raise TransportError(
            f"consumer cannot go from {old.value} to {new.value}; "
            "call start() once, before reading, and stop() when done"
        )


def require_consumer_started(state: ConsumerState, action: str) -> None:
    if state is not ConsumerState.STARTED:
        raise TransportError(
            f"cannot {action}: the consumer is {state.value}; "
            "call `await consumer.start()` first (and do not use it after stop())"
        )


def require_consumer_open(state: ConsumerState, action: str) -> None:
    if state in (ConsumerState.STOPPING, ConsumerState.STOPPED):
        raise TransportError(f"cannot {action}: the consumer is {state.value}")


def check_getmany(timeout: float, max_records: int | None, polling: bool) -> None:
    """Raise for a ``getmany`` call that cannot run: a negative ``timeout``, a
    ``max_records`` below 1, or another ``getmany`` still running (``polling``)."""
    if timeout < 0:
        raise ValueError(f"timeout must be >= 0 seconds, got {timeout}")
    if max_records is not None and max_records < 1:
        raise ValueError(f"max_records must be at least 1, got {max_records}")
    if polling:
        raise TransportError(
            "getmany is already running on this consumer; read a consumer from one task"
        )


def check_subscribe(state: ConsumerState, options: ConsumerOptions, topics: Collection[str],
                    *, assigned: bool) -> str:
    """The group id ``subscribe(topics)`` joins; raises if the consumer is closed, has no
    group, was given partitions with ``assign`` (``assigned``), or ``topics`` is empty or
    a lone string."""
    require_consumer_open(state, "subscribe")
    group_id = options.require_group("subscribe")
    if assigned:
        raise TransportError(
            "this consumer was given partitions with assign(); subscribe and assign "
            "are exclusive, use a separate consumer for each"
        )
    if isinstance(topics, str) or not topics:
        raise ValueError(
            f"subscribe needs a non-empty collection of topic names, got {topics!r}"
        )
    return group_id


def producer_state_error(state: ProducerState, wanted: ProducerState,
                         action: str) -> TransportError:
    """The error for ``action`` on a producer in ``state`` that needs ``wanted``, with
    the call that gets it there."""
    assert state is not wanted
    if wanted is ProducerState.IN_TRANSACTION and state is ProducerState.READY:
        hint = "call `await producer.begin_transaction()` first"
    elif wanted is ProducerState.READY and state is ProducerState.IN_TRANSACTION:
        hint = "a transaction is open: commit or abort it first"
    elif state is ProducerState.CREATED:
        hint = "call `await producer.start()` first"
    else:
        hint = "a stopped producer cannot be used again; create a new one"
    return TransportError(f"cannot {action}: the producer is {state.value}; {hint}")
