"""Transports: where records come from and go to (``memory://`` and ``kafka://``)."""

from aiostreams.errors import ConfigError as _ConfigError
from aiostreams.transport.base import Transport


def transport_for_url(url: str, **options: object) -> Transport:
    """The transport for a broker URL: ``memory://[name]`` or ``kafka://host:port[,...]``."""
    if url.startswith("memory://"):
        from aiostreams.transport.memory import MemoryTransport

        return MemoryTransport.from_url(url)
    if url.startswith("kafka://"):
        from aiostreams.transport.kafka import KafkaTransport

        return KafkaTransport.from_url(url, **options)
    raise _ConfigError(
        f"unsupported broker URL {url!r}: use memory://[name] or kafka://host:port[,host:port]"
    )


__all__ = ["Transport", "transport_for_url"]
