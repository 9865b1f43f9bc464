"""Where each task's retired outputs go: task id -> output channel, and the sender.

With ``at_least_once`` every task shares one channel (one idempotent producer); with
``exactly_once`` each task has a channel of its own with a transactional producer whose id
is ``<app>-<task id>`` (see :mod:`aiostreams.engine.output_channel`). Records for an
external sink go to the sink instead; a sink that becomes backlogged asks for an early
commit (which flushes it).

Invariant: an output is in exactly one place - a channel's outbox, the producer, or an
external sink's buffer - from the moment its task retires it; the router never drops one
except when told to (:meth:`replace_shared_producer`, whose outputs are redone).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from aiostreams.engine.output_channel import OutputChannel
from aiostreams.engine.stop_budget import STOP_GRACE, close_within
from aiostreams.errors import ProducerFencedError
from aiostreams.runtime.external_record import ExternalRecord
from aiostreams.runtime.sink_contract import ExternalSink
from aiostreams.transport.base import Transport
from aiostreams.types import OutgoingRecord

T = TypeVar("T")


class OutputRouter:
    def __init__(self, transport: Transport, *, app_id: str, client_id: str,
                 exactly_once: bool, sinks: Mapping[str, ExternalSink],
                 request_commit: Callable[[], None],
                 owns: Callable[[], bool] = lambda: True) -> None:
        self._transport = transport
        self._owns = owns
        self._app_id = app_id
        self._client_id = client_id
        self.exactly_once = exactly_once
        self._sinks = sinks
        self._request_commit = request_commit
        self._shared: OutputChannel | None = None  # at-least-once: one for all tasks
        self._channels: dict[str, OutputChannel] = {}  # exactly-once: one per task
        self._ready = asyncio.Event()

    async def start(self) -> None:
        """Start the shared producer (at-least-once; exactly-once opens one per task)."""
        if not self.exactly_once:
            producer = self._transport.producer(client_id=self._client_id)
            await producer.start()
            self._shared = OutputChannel(producer, transactional=False, name="the producer")
            self._shared.owns = self._owns

    async def open(self, task_id: str) -> None:
        """Give task ``task_id`` its channel: under exactly-once a transactional producer of
        its own, whose start fences the task's previous owner, should that zombie live."""
        if not self.exactly_once:
            return
        producer = self._transport.producer(client_id=self._client_id,
                                            transactional_id=f"{self._app_id}-{task_id}")
        await producer.start()
        channel = OutputChannel(producer, transactional=True,
                                name=f"task {task_id}'s producer")
        channel.owns = self._owns
        self._channels[task_id] = channel

    async def fence(self, task_id: str) -> None:
        """Start and stop a producer with task ``task_id``'s transactional id (exactly-once):
        the transaction coordinator lets it in only once it has finished that id's open
        transaction (committed one whose commit it recorded, aborted any other)."""
        producer = self._transport.producer(client_id=self._client_id,
                                            transactional_id=f"{self._app_id}-{task_id}")
        await producer.start()
        await close_within(producer.stop(), STOP_GRACE, f"task {task_id}'s fencing producer")

    async def close(self, task_id: str, seconds: float = STOP_GRACE) -> None:
        """Forget ``task_id``'s own channel (exactly-once), stopping its producer within
        ``seconds`` (a producer cut off from the broker must not hold the worker)."""
        channel = self._channels.pop(task_id, None)
        if channel is not None:
            await close_within(channel.producer.stop(), seconds, channel.name)

    async def stop(self, seconds: Callable[[], float]) -> None:
        """Stop every producer, each within ``seconds()`` (what is left of the stop)."""
        channels = list(self._channels.values())
        if self._shared is not None:
            channels.append(self._shared)
        self._channels.clear()
        for channel in channels:
            await close_within(channel.producer.stop(), seconds(), channel.name)

    def channel_of(self, task_id: str) -> OutputChannel:
        return self._shared if self._shared is not None else self._channels[task_id]

    def channels(self) -> list[OutputChannel]:
        return [self._shared] if self._shared is not None else list(self._channels.values())

    def is_shared(self, channel: OutputChannel) -> bool:
        return channel is self._shared

    def groups(self, tasks: Sequence[T], task_id: Callable[[T], str]
               ) -> list[tuple[OutputChannel, list[T]]]:
        """``tasks`` grouped by the channel (and so the transaction) they commit through;
        a task with no channel (closed meanwhile) is left out."""
        if self._shared is not None:
            return [(self._shared, list(tasks))]
        return [(self._channels[task_id(t)], [t]) for t in tasks
                if task_id(t) in self._channels]

    def fenced(self) -> list[tuple[str, ProducerFencedError]]:
        """The tasks whose producer a newer owner fenced, with the error."""
        return [(task_id, c.error) for task_id, c in self._channels.items()
                if isinstance(c.error, ProducerFencedError)]

    def failure(self) -> BaseException | None:
        """The error of the first channel whose send or flush failed, if any."""
        return next((c.error for c in self.channels() if c.error is not None), None)

    def emit(self, task_id: str, records: list[OutgoingRecord | ExternalRecord]) -> None:
        """Route the outputs task ``task_id`` retired, in retire order."""
        if not self._sinks:  # every output is a Kafka record: no pass over them
            if records:
                self.channel_of(task_id).add(records)  # type: ignore[arg-type]
                self._ready.set()
            return
        kafka: list[OutgoingRecord] = []
        added = False
        for r in records:
            if type(r) is ExternalRecord:
                self._sinks[r.sink].add(r)
                added = True
            else:
                kafka.append(r)  # type: ignore[arg-type]
        if added and any(sink.backlogged for sink in self._sinks.values()):
            self._request_commit()  # an early commit, which flushes it
        if kafka:
            self.channel_of(task_id).add(kafka)
            self._ready.set()

    def drop_shared_outbox(self) -> None:
        """Forget the outputs waiting in the shared channel (at-least-once): their tasks
        were lost and their new owners produce them again."""
        if self._shared is not None:
            self._shared.take()

    async def replace_shared_producer(self) -> None:
        """After a failed send, give the shared channel a new producer (aiokafka's can stay
        broken after a reset mid-request: every send then fails at once) and drop its
        outbox, whose outputs are in doubt and redone by the tasks started again."""
        channel = self._shared
        assert channel is not None, "only the at-least-once channel is shared"
        broken = channel.producer
        producer = self._transport.producer(client_id=self._client_id)
        await producer.start()
        channel.producer = producer
        channel.take()
        channel.error = None
        await close_within(broken.stop(), STOP_GRACE, "the replaced producer")

    async def send_loop(self) -> None:
        """Hand outputs to the producers as they retire, in batches (aiokafka #528:
        per-record concurrent sends are quadratic). The channels that have outputs send
        at the same time: each has its own producer and lock and they share no partition,
        and a send waits for the broker (aiokafka hands a partition's next batch over only
        once its last one left), so one after another the exactly-once channels' sends
        queued behind each other. A failed send marks its channel
        (:attr:`OutputChannel.error`); the fetch loop answers it.

        Cancellation: the sends under way are shielded and finish (a batch cut half-way
        would be neither in the outbox nor surely on the broker); the loop then ends."""
        while True:
            await self._ready.wait()
            self._ready.clear()
            ready = [c for c in self.channels() if c.pending and c.error is None]
            if not ready:
                continue
            # return_exceptions: a failure is recorded on its channel (the fetch loop
            # answers it) and must not cut the other channels' sends
            sending = asyncio.gather(*(c.send_pending() for c in ready),
                                     return_exceptions=True)
            await asyncio.shield(sending)
