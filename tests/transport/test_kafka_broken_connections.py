"""A connection the peer reset is never used again (issue 33), on uvloop, with the project's
fault proxy doing the reset (see :mod:`aiostreams.transport.kafka_broken_connections`).

No broker is needed: the connection is aiokafka's own ``AIOKafkaConnection``, wired to a
silent server through the proxy as ``AIOKafkaConnection.connect`` wires it, but without
the version handshake. Its read task is a stand-in that never reads: aiokafka's would
close the connection one loop turn after the reset, and these tests hold that turn open
to look at what every request sent inside it meets (the producer's sender, the fetcher
and the heartbeat do send inside it: see the module doc).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import uvloop
from aiokafka.conn import AIOKafkaConnection, AIOKafkaProtocol
from aiokafka.errors import KafkaConnectionError
from aiokafka.protocol.admin import ApiVersionRequest
from faultproxy import FaultProxy

import aiostreams.transport.kafka_connection  # noqa: F401  (installs the guard)
from aiostreams.transport.kafka_broken_connections import guard_broken_connections


def on_uvloop(scenario: Callable[[], Awaitable[None]]) -> None:
    """Run ``scenario`` on a uvloop event loop (what ``App.run`` uses when installed)."""
    uvloop.run(scenario())


async def silent_server() -> tuple[asyncio.Server, int]:
    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # answers nothing; returns when the proxy side goes away
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def pooled_connection(port: int) -> AIOKafkaConnection:
    """An ``AIOKafkaConnection`` to 127.0.0.1:``port``, as ``connect()`` wires it."""
    loop = asyncio.get_running_loop()
    conn = AIOKafkaConnection("127.0.0.1", port)
    closed = loop.create_future()
    reader = asyncio.StreamReader(loop=loop)
    protocol = AIOKafkaProtocol(closed, reader, loop=loop)
    transport, _ = await loop.create_connection(lambda: protocol, "127.0.0.1", port)
    conn._closed_fut = closed
    conn._reader, conn._protocol = reader, protocol
    conn._writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    conn._read_task = loop.create_task(asyncio.Event().wait())  # the held read task
    return conn


@contextlib.asynccontextmanager
async def through_proxy() -> AsyncIterator[tuple[AIOKafkaConnection, FaultProxy]]:
    """A connection to a silent server through a FaultProxy."""
    server, target = await silent_server()
    proxy = FaultProxy()
    proxy.target = target
    proxy_port = await proxy.start()
    conn = await pooled_connection(proxy_port)
    try:
        yield conn, proxy
    finally:
        conn.close()
        await proxy.stop()
        server.close()
        await server.wait_closed()


async def reset_and_settle(conn: AIOKafkaConnection, proxy: FaultProxy) -> None:
    """Reset the connection at the proxy and wait until the loop has told the protocol
    (``connection_lost``); the transport is closed then."""
    await proxy.wait_open()
    assert proxy.drop_open() == 1
    await asyncio.wait_for(asyncio.shield(conn._closed_fut), 5.0)


def test_aiokafka_alone_reuses_a_connection_uvloop_closed_under_it() -> None:
    """The cause, proven on the installed aiokafka and uvloop (the unguarded methods): after
    a reset, aiokafka still calls the connection usable, and a request on it fails with
    uvloop's bare RuntimeError, not a Kafka error, leaving the connection in place. If this
    stops failing that way after an upgrade, the guard may be dropped."""
    async def scenario() -> None:
        async with through_proxy() as (conn, proxy):
            await reset_and_settle(conn, proxy)
            assert conn._writer.transport.is_closing()
            assert AIOKafkaConnection.connected.__wrapped__(conn)  # type: ignore[attr-defined]
            with pytest.raises(RuntimeError, match="handler is closed"):
                AIOKafkaConnection.send.__wrapped__(conn, ApiVersionRequest())  # type: ignore[attr-defined]
            assert conn._reader is not None, "aiokafka did not close it"

    on_uvloop(scenario)


def test_a_connection_reset_under_uvloop_is_not_reused() -> None:
    async def scenario() -> None:
        async with through_proxy() as (conn, proxy):
            assert conn.connected()
            await reset_and_settle(conn, proxy)
            assert not conn.connected(), "the client's pool would hand it out again"

    on_uvloop(scenario)


def test_a_request_on_a_reset_connection_raises_a_connection_error_and_closes_it() -> None:
    async def scenario() -> None:
        async with through_proxy() as (conn, proxy):
            await reset_and_settle(conn, proxy)
            with pytest.raises(KafkaConnectionError, match="broken"):
                conn.send(ApiVersionRequest())
            assert conn._reader is None and conn._writer is None, "not closed"

    on_uvloop(scenario)


def test_a_write_that_raises_anything_closes_the_connection() -> None:
    """Not only uvloop's message: any exception of the write (the transport open) closes
    the connection and is raised as a KafkaConnectionError."""
    async def scenario() -> None:
        async with through_proxy() as (conn, proxy):
            await proxy.wait_open()
            pending: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            conn._requests.append((1, None, pending))

            def refuse(data: bytes) -> None:
                raise RuntimeError("the loop refused the write")

            conn._writer.write = refuse  # type: ignore[method-assign]
            with pytest.raises(KafkaConnectionError, match="refused the write"):
                conn.send(ApiVersionRequest())
            assert not conn.connected() and conn._reader is None
            with pytest.raises(KafkaConnectionError):  # its requests in flight fail too
                pending.result()

    on_uvloop(scenario)


def test_the_guard_is_installed_once() -> None:
    send = AIOKafkaConnection.send
    guard_broken_connections()
    assert AIOKafkaConnection.send is send
    assert hasattr(send, "__wrapped__")
