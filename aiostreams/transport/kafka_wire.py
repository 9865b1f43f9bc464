"""Wire types aiokafka lacks, shared by the requests this package declares itself
(:mod:`~aiostreams.transport.kafka_topic_ids`, :mod:`~aiostreams.transport.kafka_groups`)."""

from __future__ import annotations

from io import BytesIO

from aiostreams.transport.base import format_topic_id

__all__ = ["Uuid"]


class Uuid:
    """Kafka's ``uuid`` wire type: 16 bytes, most significant first."""

    @classmethod
    def encode(cls, value: bytes) -> bytes:
        assert len(value) == 16, "a uuid is 16 bytes"
        return value

    @classmethod
    def decode(cls, data: BytesIO) -> bytes:
        value = data.read(16)
        if len(value) != 16:
            raise ValueError("buffer underrun decoding a uuid")
        return value

    @classmethod
    def repr(cls, value: bytes) -> str:
        return format_topic_id(value)
