"""The lifecycles every transport's clients share (memory and Kafka alike)."""

from __future__ import annotations

import enum


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
