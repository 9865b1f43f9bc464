"""The fault-injection proxy the chaos tests rely on does what it says (against a local
echo server): forwards, adds latency, black-holes, holds, resets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from faultproxy import FaultProxy


@pytest.fixture
async def echo_proxy() -> AsyncIterator[tuple[FaultProxy, int]]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    proxy = FaultProxy()
    port = await proxy.start()
    proxy.target = server.sockets[0].getsockname()[1]
    try:
        yield proxy, port
    finally:
        await proxy.stop()
        server.close()
        await server.wait_closed()


async def roundtrip(port: int, payload: bytes, timeout: float = 2.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        await writer.drain()
        return await asyncio.wait_for(reader.readexactly(len(payload)), timeout)
    finally:
        writer.close()


async def test_forward_mode_passes_bytes_both_ways(
        echo_proxy: tuple[FaultProxy, int]) -> None:
    _, port = echo_proxy
    assert await roundtrip(port, b"hello" * 1000) == b"hello" * 1000


async def test_blackhole_mode_keeps_the_connection_open_but_silent(
        echo_proxy: tuple[FaultProxy, int]) -> None:
    proxy, port = echo_proxy
    proxy.blackhole()
    with pytest.raises(TimeoutError):
        await roundtrip(port, b"ping", timeout=0.3)
    proxy.forward()
    assert await roundtrip(port, b"pong") == b"pong"


async def test_hold_mode_delivers_every_byte_late_on_open_and_new_connections(
        echo_proxy: tuple[FaultProxy, int]) -> None:
    """A cut link, not a lossy one: what was sent during the hold arrives, in order, once
    it heals - on a connection open before the cut and on one opened during it."""
    proxy, port = echo_proxy
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"a")
    await writer.drain()
    assert await reader.readexactly(1) == b"a"
    proxy.hold()
    writer.write(b"bcd")
    await writer.drain()
    late = asyncio.ensure_future(roundtrip(port, b"new", timeout=30.0))
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reader.readexactly(3), 0.3)
    assert not late.done()
    proxy.forward()
    assert await asyncio.wait_for(reader.readexactly(3), 10.0) == b"bcd"
    assert await late == b"new"
    writer.close()


async def test_reset_mode_resets_open_and_new_connections(
        echo_proxy: tuple[FaultProxy, int]) -> None:
    proxy, port = echo_proxy
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"x")
    await writer.drain()
    assert await reader.readexactly(1) == b"x"
    proxy.reset()
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        writer.write(b"y")
        await writer.drain()
        await reader.readexactly(1)
    writer.close()
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await roundtrip(port, b"z")


async def test_drop_open_resets_open_connections_and_forwards_new_ones(
        echo_proxy: tuple[FaultProxy, int]) -> None:
    proxy, port = echo_proxy
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"x")
    await writer.drain()
    assert await reader.readexactly(1) == b"x"
    assert proxy.drop_open() == 1
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        writer.write(b"y")
        await writer.drain()
        await reader.readexactly(1)
    writer.close()
    assert await roundtrip(port, b"z") == b"z"
    assert proxy.drops == 1
