"""A retired result bound for a sink outside Kafka (a Delta or Parquet table, a file, a
database): what a slot buffers for an external sink node, and what the sink is handed at
retire (the contract is :class:`aiostreams.sinks.ExternalSink`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiostreams.types import TopicPartition

__all__ = ["RECORDED_ANSWERS", "ExternalRecord"]

RECORDED_ANSWERS = "aiostreams.recorded-answers"
"""The sink of the service-answer recorder (:mod:`aiostreams.replay.recorder`): what a
record's last attempt recorded is kept when the record is dead-lettered or skipped (a
replay must find the answers that made it fail)."""


@dataclass(slots=True)
class ExternalRecord:
    """A retired result bound for ``sink``; ``source``/``offset`` name the input record."""

    sink: str
    source: TopicPartition
    offset: int
    key: Any
    value: Any
    timestamp: float
