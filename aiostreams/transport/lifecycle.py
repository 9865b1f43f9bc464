"""What every transport's clients share (memory and Kafka alike): their lifecycles and
the checks of their arguments."""

from __future__ import annotations

import enum

from aiostreams.errors import ConfigError

OFFSET_RESETS = ("earliest", "latest")


def check_consumer_options(group_id: str | None, group_instance_id: str | None,
                           max_poll_records: int, auto_offset_reset: str) -> None:
    """Raise :class:`ConfigError` naming the first bad consumer argument."""
    if max_poll_records < 1:
        raise ConfigError(f"max_poll_records must be at least 1, got {max_poll_records}")
    if auto_offset_reset not in OFFSET_RESETS:
        raise ConfigError(
            f"auto_offset_reset must be one of {OFFSET_RESETS}, got {auto_offset_reset!r}"
        )
    if group_id == "":
        raise ConfigError("group_id must be a non-empty string, or None for no group")
    if group_instance_id is not None and group_id is None:
        raise ConfigError("group_instance_id (static membership) needs a group_id")


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
