"""The one error type of :mod:`aiostreams.localkafka`."""

from __future__ import annotations


class LocalKafkaError(RuntimeError):
    """The local broker could not be fetched, started or stopped; the message says why."""
