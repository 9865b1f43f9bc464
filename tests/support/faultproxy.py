"""A fault-injection TCP proxy on 127.0.0.1, for network faults between a client and a
broker (issue 24): it forwards, delays, black-holes or resets connections on demand.

::

    proxy = FaultProxy()
    port = await proxy.start()                 # listen first, so the broker can advertise it
    kafka = LocalKafka(proxied_port=port)      # then the broker, whose PROXIED listener
    kafka.start()                              # tells clients to come through the proxy
    proxy.target = kafka.proxied_target
    ...
    proxy.blackhole()   # connections stay open; nothing gets through either way
    proxy.hold()        # a cut link: nothing moves, nothing is lost; forward() delivers it
    proxy.reset()       # every connection is reset (RST), and every new one too
    proxy.drop_open()   # the open connections are reset once; new ones are forwarded
    await proxy.drop_every(2.0, duration=20.0)  # a reset of every connection each 2 s
    proxy.forward(delay=0.2)                   # heal, with 200 ms added per chunk
    proxy.corrupt(b"-in", times=1)             # flip a bit in the next Fetch response
                                               # holding b"-in" (FaultProxy(kafka=True))

Modes apply at once to open connections and to new ones. With ``kafka=True`` the proxy
reads Kafka's framing (a 4-byte size, then the frame): it notes each request's API key by
correlation id and forwards whole frames, so :meth:`FaultProxy.corrupt` can flip a bit at
a chosen place of chosen responses (inside a topic name, where no checksum looks, or inside
a record, where the CRC does). The proxy runs on the test's event
loop; the client under test is another process (a worker), so its own loop is not involved.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import socket
import struct
from collections.abc import AsyncIterator

from aiostreams.localkafka import LocalKafka


class Mode(enum.Enum):
    FORWARD = "forward"
    BLACKHOLE = "blackhole"
    HOLD = "hold"
    RESET = "reset"


_CHUNK = 65536
FETCH = 1  # Kafka's API key of Fetch


class Corruption:
    """Which responses to corrupt and where: responses to requests of ``api_key`` whose
    frame holds ``needle`` get bit ``bit`` of the byte ``at`` bytes into the (first)
    occurrence flipped; with no needle, the byte ``at`` bytes into the frame. ``times``
    responses (None: every one until :meth:`FaultProxy.stop_corrupting`)."""

    def __init__(self, needle: bytes | None, at: int, bit: int, api_key: int,
                 times: int | None) -> None:
        self.needle, self.at, self.mask, self.api_key = needle, at, 1 << bit, api_key
        self.left = times
        self.done = 0  # responses corrupted so far
        self.used_up = asyncio.Event()  # set once ``times`` responses were corrupted

    def apply(self, api_key: int | None, frame: bytearray) -> None:
        if api_key != self.api_key or self.left == 0:
            return
        start = 0 if self.needle is None else frame.find(self.needle)
        if start < 0 or start + self.at >= len(frame):
            return
        frame[start + self.at] ^= self.mask
        self.done += 1
        if self.left is not None:
            self.left -= 1
            if self.left == 0:
                self.used_up.set()


class FaultProxy:
    """See the module docstring. Invariant: in FORWARD mode every byte read from one side is
    written to the other, in order, after ``delay`` seconds; in BLACKHOLE mode bytes are
    read and dropped (the peers see a silent network); in HOLD mode nothing is read, written
    or connected upstream until the mode changes (a cut link, whose bytes TCP delivers late
    when it heals); in RESET mode no connection lives."""

    def __init__(self, *, kafka: bool = False) -> None:
        self.kafka = kafka
        self.corruption: Corruption | None = None
        self.target: int | None = None
        self.mode = Mode.FORWARD
        self.delay = 0.0
        self.connections = 0  # accepted so far
        self.drops = 0  # open connections reset by drop_open (and reset) so far
        self._server: asyncio.Server | None = None
        self._open: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter | None]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._paired = asyncio.Event()  # set whenever a connection is paired upstream
        self._flowing = asyncio.Event()  # clear exactly while the mode is HOLD
        self._flowing.set()

    async def start(self, sock: socket.socket | None = None) -> int:
        """Listen on a free port of 127.0.0.1, or on ``sock`` (a listening socket made
        elsewhere: in another network namespace, say); returns the port."""
        if sock is None:
            self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        else:
            self._server = await asyncio.start_server(self._accept, sock=sock)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def _set_mode(self, mode: Mode) -> None:
        self.mode = mode
        if mode is Mode.HOLD:
            self._flowing.clear()
        else:
            self._flowing.set()

    def forward(self, delay: float = 0.0) -> None:
        self._set_mode(Mode.FORWARD)
        self.delay = delay

    def blackhole(self) -> None:
        self._set_mode(Mode.BLACKHOLE)

    def hold(self) -> None:
        """Cut the link without losing a byte: until the mode changes, nothing is read from
        either side (their sends fill the socket buffers and then wait, as on a network that
        stopped answering), and a new connection waits before its upstream is opened."""
        self._set_mode(Mode.HOLD)

    def corrupt(self, needle: bytes | None = None, *, at: int = 0, bit: int = 5,
                api_key: int = FETCH, times: int | None = None) -> Corruption:
        """Flip a bit in responses from now on (see :class:`Corruption`; the default bit,
        0x20, turns a lowercase ASCII letter uppercase: a topic name stays valid UTF-8 and
        names a topic that was not asked for). Needs ``kafka=True``."""
        if not self.kafka:
            raise ValueError("corrupting responses needs FaultProxy(kafka=True)")
        self.corruption = Corruption(needle, at, bit, api_key, times)
        return self.corruption

    def stop_corrupting(self) -> None:
        self.corruption = None

    def reset(self) -> None:
        """Reset every open connection now; new ones are reset until the mode changes."""
        self._set_mode(Mode.RESET)
        self.drop_open()

    def drop_open(self) -> int:
        """Reset every open connection now (a TCP RST to both peers), leaving the mode as it
        is: in FORWARD mode the peers may connect again at once. Returns how many were
        reset (``drops`` counts them all)."""
        dropped = 0
        for client, upstream in list(self._open):
            _rst(client)
            if upstream is not None:
                _rst(upstream)
            dropped += 1
        self._open.clear()
        self.drops += dropped
        return dropped

    async def drop_every(self, interval: float, *, duration: float) -> None:
        """Forward, but reset every open connection each ``interval`` seconds for
        ``duration`` seconds (the first reset at once): connections that keep dying."""
        loop = asyncio.get_running_loop()
        end = loop.time() + duration
        self.forward()
        while loop.time() < end:
            self.drop_open()
            await asyncio.sleep(min(interval, max(end - loop.time(), 0.0)))

    async def wait_open(self, count: int = 1) -> None:
        """Return once at least ``count`` connections are open through the proxy."""
        while len(self._open) < count:
            self._paired.clear()
            await self._paired.wait()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.reset()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        await self._flowing.wait()
        if self.mode is Mode.RESET or self.target is None:
            _rst(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            _rst(writer)
            return
        pair = (writer, up_writer)
        self._open.add(pair)
        self._paired.set()
        if self.kafka:
            api_keys: dict[int, int] = {}
            pumps = [asyncio.ensure_future(self._pump_frames(reader, up_writer, api_keys, True)),
                     asyncio.ensure_future(self._pump_frames(up_reader, writer, api_keys, False))]
        else:
            pumps = [asyncio.ensure_future(self._pump(reader, up_writer)),
                     asyncio.ensure_future(self._pump(up_reader, writer))]
        for pump in pumps:
            self._tasks.add(pump)
            pump.add_done_callback(self._tasks.discard)
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for pump in pumps:
            pump.cancel()
        self._open.discard(pair)
        for side in pair:
            with contextlib.suppress(OSError):
                side.close()

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                await self._flowing.wait()
                data = await source.read(_CHUNK)
                await self._flowing.wait()
                if not data:
                    return
                if self.mode is Mode.BLACKHOLE:
                    continue
                if self.mode is Mode.RESET:
                    return
                if self.delay:
                    await asyncio.sleep(self.delay)  # the injected latency itself
                sink.write(data)
                await sink.drain()


    async def _pump_frames(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter,
                           api_keys: dict[int, int], requests: bool) -> None:
        """Forward whole Kafka frames: requests (noting API key by correlation id) or
        responses (corrupted per :attr:`corruption`)."""
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                await self._flowing.wait()
                size = await source.readexactly(4)
                frame = bytearray(await source.readexactly(struct.unpack(">i", size)[0]))
                await self._flowing.wait()
                if self.mode is Mode.BLACKHOLE:
                    continue
                if self.mode is Mode.RESET:
                    return
                if requests:  # api_key int16, api_version int16, correlation_id int32
                    api_key, _, correlation = struct.unpack_from(">hhi", frame)
                    api_keys[correlation] = api_key
                else:
                    kind = api_keys.pop(struct.unpack_from(">i", frame)[0], None)
                    corruption = self.corruption
                    if corruption is not None:
                        corruption.apply(kind, frame)
                if self.delay:
                    await asyncio.sleep(self.delay)
                sink.write(size + frame)
                await sink.drain()


def _rst(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a dropped connection looks to the peer."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(OSError):
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.close()


@contextlib.asynccontextmanager
async def proxied_broker(*, kafka: bool = False
                         ) -> AsyncIterator[tuple[LocalKafka, FaultProxy, str]]:
    """A broker of its own whose PROXIED listener is reached through a :class:`FaultProxy`
    (``kafka``: one that reads Kafka's framing); yields the broker, the proxy and the address
    a worker bootstraps at. Both are stopped on exit."""
    proxy = FaultProxy(kafka=kafka)
    port = await proxy.start()
    broker = LocalKafka(proxied_port=port)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, broker.start)
    proxy.target = broker.proxied_target
    try:
        yield broker, proxy, f"127.0.0.1:{port}"
    finally:
        await proxy.stop()
        await loop.run_in_executor(None, broker.stop)
