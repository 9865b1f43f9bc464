"""A broken aiokafka connection is never used again, whatever the event loop raises.
Installed once per process by :mod:`~aiostreams.transport.kafka_connection`.

**The bug (aiokafka 0.13-0.14, seen with uvloop).** aiokafka pools one connection per broker
and connection group, and hands a pooled one out while ``AIOKafkaConnection.connected()``
says so: while its reader is not at EOF. When the peer resets the connection, uvloop closes
the transport and hands the ``ConnectionResetError`` to the reader as a pending *exception*,
not as EOF; the connection's read task, which would close it, runs a loop turn later. A
request sent in between (the producer's sender, the fetcher and the heartbeat all run in the
same turn) gets the dead connection, and its write fails with uvloop's bare
``RuntimeError`` ("unable to perform operation on <TCPTransport closed=True ...>; the
handler is closed"). ``AIOKafkaConnection.send`` treats only ``OSError`` as a broken
connection, so the ``RuntimeError`` escapes the client: it ends the producer's sender task
("Unexpected error in sender routine": the producer is dead, its transaction manager in
FATAL_ERROR) or the consumer's fetcher task ("Unexpected error in fetcher routine": no
record is fetched again), which is how a burst of resets left workers stuck with "no
progress and nothing logged". Seen in ``tests/chaos/test_connection_resets.py`` before this
module existed.

**The guard.** Two methods of ``aiokafka.conn.AIOKafkaConnection`` are wrapped:

* ``connected()`` is False once the connection's transport is closing, so the client's
  pool drops it and opens a new one;
* ``send()`` on a connection whose transport is closing, or whose write raised anything
  but a Kafka error, closes the connection (``CONNECTION_BROKEN``: its pending requests
  fail with ``KafkaConnectionError``, the client refreshes its metadata) and raises
  ``KafkaConnectionError``, which every aiokafka caller already retries, as it does for
  an ``OSError`` (an error that is not the network's - a request that cannot be encoded -
  still closes the connection, and is raised as it is).

The same change, for aiokafka itself: ``patches/aiokafka-close-on-any-transport-error.patch``.
"""

from __future__ import annotations

from typing import Any

from aiokafka.conn import AIOKafkaConnection, CloseReason
from aiokafka.errors import KafkaConnectionError, KafkaError

__all__ = ["guard_broken_connections", "transport_closing"]

_MARK = "_aiostreams_guarded"


def transport_closing(connection: Any) -> bool:
    """Whether an ``AIOKafkaConnection``'s transport is closed or closing (False when it
    has none: aiokafka's own checks cover that)."""
    writer = getattr(connection, "_writer", None)
    if writer is None:
        return False
    transport = getattr(writer, "transport", None)
    return transport is not None and bool(transport.is_closing())


def guard_broken_connections() -> None:
    """Wrap ``AIOKafkaConnection.connected`` and ``send`` as the module doc says. Idempotent:
    the class is wrapped once per process."""
    cls: Any = AIOKafkaConnection
    if getattr(cls, _MARK, False):
        return
    unguarded_connected = cls.connected
    unguarded_send = cls.send

    def connected(self: Any) -> bool:
        return not transport_closing(self) and bool(unguarded_connected(self))

    def send(self: Any, request: Any, expect_response: bool = True) -> Any:
        if transport_closing(self):
            self.close(reason=CloseReason.CONNECTION_BROKEN)
            raise KafkaConnectionError(
                f"Connection at {self.host}:{self.port} broken: its transport is closed")
        try:
            return unguarded_send(self, request, expect_response)
        except KafkaError:
            raise  # aiokafka's own (it has closed the connection where it should)
        except Exception as error:
            # whatever the loop raised (uvloop: a bare RuntimeError), the connection's
            # state is unknown now - a frame may be half-written: never use it again
            broken = transport_closing(self) or isinstance(error, OSError | RuntimeError)
            self.close(reason=CloseReason.CONNECTION_BROKEN, exc=error)
            if not broken:
                raise  # not the network's doing (a request that cannot be encoded)
            raise KafkaConnectionError(
                f"Connection at {self.host}:{self.port} broken: {error!r}") from error

    connected.__wrapped__ = unguarded_connected  # type: ignore[attr-defined]
    send.__wrapped__ = unguarded_send  # type: ignore[attr-defined]
    cls.connected = connected
    cls.send = send
    setattr(cls, _MARK, True)
