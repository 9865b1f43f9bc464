"""Contender: an aiostreams app, run by aiostreams' own command line:

    python -m aiostreams run benchmarks.peers.aiostreams_app:app --workers N
                                                                (options in $BENCH_OPTIONS)

A one-processor topology (source → enrich → sink, ``ordering="key"``, at-least-once or, with
``guarantee``, exactly-once) at
aiostreams' default settings (window, concurrency, byte budget: what a new user runs;
``concurrency`` is for the other contenders). With ``io="none"`` the processor is synchronous (the
engine's inline path); otherwise it awaits the record's I/O first. The record whose id is
``stuck_id`` awaits an event that is never set (P5): it holds its task's commit point and
reorder buffer forever. ``async_path`` takes the async processor without a stuck record
(P5's baseline for what the stuck record holds). ``service_step`` awaits the I/O in a DSL
step through a declared service instead (what ``record_dir`` records: issue 39).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiostreams import App, Processor, ProcessorContext, Record
from benchmarks.peers.options import ContenderOptions
from benchmarks.peers.record_io import RecordIO
from benchmarks.peers.workload import enrich


class Enrich(Processor[bytes, dict[str, Any]]):
    def process(self, record: Record[bytes, dict[str, Any]]) -> None:
        self.context.forward(record.with_value(enrich(record.value)))


class AwaitThenEnrich(Processor[bytes, dict[str, Any]]):
    def __init__(self, options: ContenderOptions) -> None:
        self.io = RecordIO(options)
        self.stuck_id = options.stuck_id
        self.never = asyncio.Event()

    async def init(self, context: ProcessorContext) -> None:
        await super().init(context)
        await self.io.start()

    async def process(self, record: Record[bytes, dict[str, Any]]) -> None:
        if record.value["id"] == self.stuck_id:
            await self.never.wait()
        await self.io.wait()
        self.context.forward(record.with_value(enrich(record.value)))

    async def close(self) -> None:
        await self.io.close()


def build(options: ContenderOptions) -> App:
    recording: dict[str, Any] = (
        {"record_services_dir": options.record_dir} if options.record_dir else {})
    app = App(options.group, broker=f"kafka://{options.bootstrap}", ordering="key",
              processing_guarantee=options.guarantee, **recording)
    src = app.topic(options.src, key=bytes, value=dict)
    dst = app.topic(options.dst, key=bytes, value=dict)
    if options.service_step:
        io = RecordIO(options)
        app.on_startup(io.start)
        app.on_shutdown(io.close)

        async def await_then_enrich(value: dict[str, Any]) -> dict[str, Any]:
            await io.wait()
            return enrich(value)

        service = app.service("io", concurrency=options.concurrency)
        app.stream(src).map_values_async(await_then_enrich, service=service).to(dst)
    elif options.io == "none" and options.stuck_id is None and not options.async_path:
        app.topology.add_source("src", options.src).add_processor(
            "enrich", Enrich, "src").add_sink("sink", options.dst, "enrich")
    else:
        app.topology.add_source("src", options.src).add_processor(
            "enrich", lambda: AwaitThenEnrich(options), "src").add_sink(
            "sink", options.dst, "enrich")
    return app


app = build(ContenderOptions.from_env())
