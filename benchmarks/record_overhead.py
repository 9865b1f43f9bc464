"""What a record waiting in the reorder buffer costs in memory, against what the byte budget
counts for it (``aiostreams.engine.byte_budget``: ``RECORD_OVERHEAD_BYTES``,
``OUTPUT_OVERHEAD_BYTES``).

    python -m benchmarks.record_overhead [--records N]

One task on a stuck record (id 0 never completes), fed P5's record shape (``user-<k>`` keys,
JSON values with an id, ~60 bytes; benchmarks.peers.workload) and a 10 KB variant, each
record forwarding 0, 1 or 3 outputs. Memory is tracemalloc's traced bytes from before the
first record behind the stuck one to when all of them wait behind it; the input's bytes are
made by ``json`` (orjson's ``bytes`` are over-allocated: see aiostreams.compact_json). The
executing records' tasks (at most ``max_concurrency``) are in the figure too, spread over
the records, so the 10 KB case (fewer records) shows a higher overhead per record.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import tracemalloc
from typing import Any

from aiostreams.engine.byte_budget import RECORD_OVERHEAD_BYTES, input_cost
from aiostreams.engine.task import StreamTask, TaskSettings
from aiostreams.runtime.clock import ManualClock
from aiostreams.serde import BytesSerde, JsonSerde
from aiostreams.testing import settle
from aiostreams.topic import Topic
from aiostreams.topology.processor import Processor
from aiostreams.topology.topology import Topology
from aiostreams.types import RawRecord, Record, TopicPartition

IN = TopicPartition("in", 0)
BATCH = 500


class StuckOnFirst(Processor[bytes, dict[str, Any]]):
    def __init__(self, release: asyncio.Event, outputs: int) -> None:
        self.release = release
        self.outputs = outputs

    async def process(self, record: Record[bytes, dict[str, Any]]) -> None:
        if record.value["id"] == 0:
            await self.release.wait()
        record.value["enriched"] = True
        for _ in range(self.outputs):
            self.context.forward(record.with_value(record.value))


def input_record(i: int, pad: int) -> RawRecord:
    value: dict[str, Any] = {"id": i, "key": i % 1000, "seq": i // 1000, "amount": i * 0.5}
    if pad:
        value["pad"] = "x" * pad
    return RawRecord("in", 0, i, float(i), f"user-{i % 1000}".encode(),
                     json.dumps(value, separators=(",", ":")).encode())


async def measure(n: int, pad: int, outputs: int) -> tuple[float, float, float]:
    """Traced bytes, raw input bytes and budgeted bytes, a record behind the stuck one."""
    release = asyncio.Event()
    topology = (Topology().add_source("src", Topic("in", BytesSerde(), JsonSerde()))
                .add_processor("p", lambda: StuckOnFirst(release, outputs), "src")
                .add_sink("sink", Topic("out", BytesSerde(), JsonSerde()), "p"))
    emitted: list[Any] = []
    task = StreamTask(
        "0_0", topology.build()[0], [IN],
        TaskSettings(max_in_flight=n + 1, max_buffered_per_partition=n + 1,
                     max_task_buffer_bytes=2**62),
        topics=topology.topics, clock=ManualClock(), emit=emitted.extend,
        on_failed=lambda task_id, error: None, on_pause=lambda tp, paused: None)
    await task.initialize()
    task.enqueue(IN, [input_record(0, pad)])
    task.pump()
    await settle(5)
    gc.collect()
    tracemalloc.start()
    try:
        before, raw = tracemalloc.get_traced_memory()[0], 0
        for first in range(1, n + 1, BATCH):
            batch = [input_record(i, pad) for i in range(first, min(first + BATCH, n + 1))]
            raw += sum(input_cost(r) - RECORD_OVERHEAD_BYTES for r in batch)
            task.enqueue(IN, batch)
            task.pump()
            await settle(5)
        del batch
        await settle(20)
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert task.in_flight == n + 1 and not emitted, "every record waits behind the stuck one"
    held = task.intake.buffered_bytes
    release.set()
    await settle(50)
    return traced / n, raw / n, held / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20_000)
    args = parser.parse_args()
    print(f"{'value':>6} {'outputs':>7} {'traced':>8} {'raw in':>7} {'counted':>8} "
          f"{'traced/counted':>14}   (bytes a record)")
    for pad, n in ((0, args.records), (10_000, max(1, args.records // 5))):
        for outputs in (0, 1, 3):
            traced, raw, held = asyncio.run(measure(n, pad, outputs))
            print(f"{'~60 B' if not pad else '10 KB':>6} {outputs:>7} {traced:>8.0f} "
                  f"{raw:>7.0f} {held:>8.0f} {traced / held:>14.2f}")


if __name__ == "__main__":
    main()
