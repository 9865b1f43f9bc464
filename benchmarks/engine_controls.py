"""What :mod:`benchmarks.engine` measures the engine against: the workload and its controls.

The workload is one processor per path, run by the engine and by every control alike:
:class:`SyncIdentity` (a) and :class:`AsyncSleep` (b), over ``n`` records of 10k keys
preloaded into a one-partition memory-broker topic (:func:`preload`).

The controls, each on the same memory broker unless it has none:

(a')  :func:`run_hand_rolled`: consume a batch, decode, call the same function, encode,
      produce the batch, commit - what a user writes without a framework.
(a*)  ``run_hand_rolled(api=True)``: the same loop, but each record goes through the
      processor API as the engine's records do, and through nothing else: a
      :class:`~aiostreams.types.Record` built from the raw record, the very ``SyncIdentity``
      processor's ``process`` (so its ``with_value`` and ``context.forward``), and an
      :class:`~aiostreams.types.OutgoingRecord` built from what it forwarded. The context
      is the least one can be (:class:`FloorContext`: ``forward`` appends to a list). No
      slot, no key order, no committable offset, no failure handling: a floor under any
      engine that hands records to this API (these ``Record`` and context types) in
      CPython.
(b'') :func:`run_asyncio_floor`: ``in_flight`` coroutines doing nothing but the same
      awaits - the ceiling of any asyncio framework for (b).
(b''') :func:`run_hand_rolled_async`: ``in_flight`` worker coroutines that take a record,
      decode it, await the same sleep, encode, produce (in batches) and commit every so
      often, in no key order.
(b*)  ``run_hand_rolled_async(api=True)``: (b''') with (a*)'s processor API per record:
      the ``AsyncSleep`` processor's own ``process`` coroutine awaited on a built
      ``Record``, its forward taken by a :class:`FloorContext`. Again no key order, no
      ordered commit: the floor of (b) for an engine with this API in CPython.

Each control records its CPU seconds per record over its timed interval in
:data:`cpu_us_per_record` (by case name), besides returning its rate.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any, cast

from aiostreams import Processor, Record
from aiostreams.topology.processor import ProcessorContext
from aiostreams.transport.memory import (
    MemoryBroker,
    MemoryConsumer,
    MemoryProducer,
    MemoryTransport,
)
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition

KEYS = 10_000

cpu_us_per_record: dict[str, float] = {}
"""Process CPU time per record of the last timed run of each case, over the same interval as
its rate: unlike the rate it hardly moves with other processes' load on the machine."""


def cpu_since(case: str, cpu_started: float, n: int) -> None:
    cpu_us_per_record[case] = (time.process_time() - cpu_started) / n * 1e6


def identity(value: str) -> str:
    return value


class SyncIdentity(Processor[str, str]):
    def process(self, record: Record[str, str]) -> None:
        self.context.forward(record.with_value(identity(record.value)))


class AsyncSleep(Processor[str, str]):
    async def process(self, record: Record[str, str]) -> None:
        await asyncio.sleep(0.005)
        self.context.forward(record.with_value(identity(record.value)))


def preload(broker: MemoryBroker, topic: str, n: int) -> None:
    broker.create_topic(topic, 1)
    broker.append((OutgoingRecord(topic, f"k{i % KEYS}".encode(), f"v{i}".encode(), 0.0), 0)
                  for i in range(n))


def run_bare(n: int) -> float:
    """(a''): the function alone in a bare for-loop (no I/O at all), for scale."""
    values = [f"v{i}" for i in range(n)]
    started = time.perf_counter()
    for v in values:
        identity(v)
    return n / (time.perf_counter() - started)


# -- the processor API's floor (a*, b*) ---------------------------------------------------

_new = object.__new__


class FloorContext:
    """The least a processor context can be: ``forward`` appends ``(child, record)`` to
    ``buffer``, which the floor's loop sets around each ``process`` call."""

    __slots__ = ("buffer",)

    def __init__(self) -> None:
        self.buffer: list[tuple[str | None, Record[Any, Any]]] = []

    def forward(self, record: Record[Any, Any], child: str | None = None) -> None:
        self.buffer.append((child, record))


def floor_processor(processor: Processor[str, str]) -> tuple[Processor[str, str],
                                                              FloorContext]:
    """``processor`` with a :class:`FloorContext` as its context (only ``forward`` is used
    by the workload's processors)."""
    context = FloorContext()
    processor.context = cast(ProcessorContext, context)
    return processor, context


def api_record(raw: RawRecord) -> Record[str, str]:
    """The :class:`Record` a processor receives, built the cheapest way (field by field on
    a bare instance, as the engine's decoder does: written out here, not called, since a
    control must not run the code it is the control for)."""
    record: Record[str, str] = _new(Record)
    k, v = raw.key, raw.value
    record.key = None if k is None else k.decode()  # type: ignore[assignment]
    record.value = "" if v is None else v.decode()
    record.topic = raw.topic
    record.partition = raw.partition
    record.offset = raw.offset
    record.timestamp = raw.timestamp
    record.headers = raw.headers
    return record


def api_output(record: Record[str, str]) -> OutgoingRecord:
    """The sink's :class:`OutgoingRecord` for a forwarded ``record``, built the cheapest
    way."""
    out: OutgoingRecord = _new(OutgoingRecord)
    out.topic = "out"
    out.key = None if record.key is None else record.key.encode()
    out.value = record.value.encode()
    out.timestamp = record.timestamp
    out.headers = record.headers
    out.partition = None
    return out


# -- the hand-rolled loops (a', a*, b''', b*) and bare asyncio (b'') -----------------------

async def _clients(broker: MemoryBroker | None, n: int, group: str
                   ) -> tuple[MemoryConsumer, MemoryProducer, TopicPartition]:
    """A started consumer (of ``group``, at the start of ``in``) and producer on ``broker``
    (a fresh one if None), with ``n`` records preloaded into ``in`` and ``out`` created."""
    broker = MemoryBroker() if broker is None else broker
    preload(broker, "in", n)
    broker.create_topic("out", 1)
    transport = MemoryTransport(broker)
    consumer = transport.consumer(group)
    producer = transport.producer()
    await consumer.start()
    await producer.start()
    tp = TopicPartition("in", 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    return consumer, producer, tp


async def _done(consumer: MemoryConsumer, producer: MemoryProducer, case: str, n: int,
                started: float, cpu_started: float) -> float:
    """Flush, time and stop a hand-rolled loop of ``n`` records: its rate, its CPU per
    record recorded as ``case``."""
    await producer.flush()
    elapsed = time.perf_counter() - started
    cpu_since(case, cpu_started, n)
    await consumer.stop()
    await producer.stop()
    return n / elapsed


async def run_hand_rolled(n: int, broker: MemoryBroker | None = None, *,
                          api: bool = False) -> float:
    """(a'), or with ``api`` (a*) (see the module docstring). ``broker``: where to run it (a
    fresh one by default), for a test to read what it did."""
    consumer, producer, tp = await _clients(broker, n, "raw")
    processor, context = floor_processor(SyncIdentity())
    process = processor.process
    started, cpu_started = time.perf_counter(), time.process_time()
    done = 0
    while done < n:
        batch = await consumer.getmany(0.1, 2000)
        out: list[OutgoingRecord] = []
        for records in batch.values():
            for r in records:
                if api:
                    buffer = context.buffer = []
                    process(api_record(r))
                    for _, forwarded in buffer:
                        out.append(api_output(forwarded))
                    continue
                # the codec calls a user writes by hand (StrSerde's shortcuts)
                key = None if r.key is None else r.key.decode()
                value = identity("" if r.value is None else r.value.decode())
                out.append(OutgoingRecord("out", None if key is None else key.encode(),
                                          value.encode(), r.timestamp))
            if records:
                await producer.send_batch(out)
                await consumer.commit({tp: records[-1].offset + 1})
                done += len(records)
    return await _done(consumer, producer, "api" if api else "hand", n, started, cpu_started)


async def run_asyncio_floor(n: int, in_flight: int) -> float:
    """(b''): only the awaits: ``in_flight`` coroutines each awaiting sleep(0.005) per item
    - the ceiling for any asyncio framework running this processor on this machine."""
    items = iter(range(n))

    async def worker() -> None:
        for _ in items:
            await asyncio.sleep(0.005)

    started, cpu_started = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    elapsed = time.perf_counter() - started
    cpu_since("floor", cpu_started, n)
    return n / elapsed


async def run_hand_rolled_async(n: int, in_flight: int, broker: MemoryBroker | None = None,
                                *, api: bool = False) -> float:
    """(b'''), or with ``api`` (b*): ``in_flight`` workers on the memory broker, no framework
    and no key order. ``broker``: where to run it (a fresh one by default), for a test to
    read what it did."""
    consumer, producer, tp = await _clients(broker, n, "raw-async")
    fetched: collections.deque[RawRecord] = collections.deque()
    low = asyncio.Event()  # the workers ran the queue low: fetch more
    more = asyncio.Event()  # the fetcher added records
    out: list[OutgoingRecord] = []
    done = 0

    async def fetch() -> None:
        left = n
        while left:
            if len(fetched) >= in_flight:
                low.clear()
                await low.wait()
            batch = await consumer.getmany(0.1, 2000)
            for records in batch.values():
                fetched.extend(records)
                left -= len(records)
            more.set()

    async def worker(processor: Processor[str, str], context: FloorContext) -> None:
        nonlocal out, done
        process = processor.process
        while done < n:
            if not fetched:
                low.set()
                more.clear()
                await more.wait()
                continue
            r = fetched.popleft()
            if len(fetched) < in_flight:
                low.set()
            if api:
                buffer = context.buffer = []
                pending = process(api_record(r))
                assert pending is not None, "AsyncSleep.process is a coroutine function"
                await pending
                for _, forwarded in buffer:
                    out.append(api_output(forwarded))
            else:
                key = None if r.key is None else r.key.decode()
                value = "" if r.value is None else r.value.decode()
                await asyncio.sleep(0.005)
                value = identity(value)
                out.append(OutgoingRecord("out", None if key is None else key.encode(),
                                          value.encode(), r.timestamp))
            done += 1
            if len(out) >= 500:
                batch, out = out, []
                await producer.send_batch(batch)
            if done % 5000 == 0:  # what finished, counted: no order is kept
                await consumer.commit({tp: done})
        more.set()  # wake the workers still waiting, so they end too

    # a processor and its context per worker, made before the timing starts: (b''') does
    # not use them, and its timed work stays what it was without them
    floors = [floor_processor(AsyncSleep()) for _ in range(in_flight)]
    started, cpu_started = time.perf_counter(), time.process_time()
    fetcher = asyncio.ensure_future(fetch())
    await asyncio.gather(*(worker(processor, context) for processor, context in floors))
    await fetcher
    if out:
        await producer.send_batch(out)
    await consumer.commit({tp: n})
    case = "api_async" if api else "hand_async"
    return await _done(consumer, producer, case, n, started, cpu_started)
