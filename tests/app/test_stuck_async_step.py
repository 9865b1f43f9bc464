"""Issue 24, item 5: an async call that never returns no longer stops its partition for
good under the default settings (the /health side is in tests/test_metrics.py)."""

from __future__ import annotations

import asyncio

from appkit import create_topic, produce, read_exactly, unique

from aiostreams import App, Processor, Record, Retry
from aiostreams.settings.config import Settings
from aiostreams.transport.memory import MemoryBroker, MemoryTransport


class NeverReturnsOnStuck(Processor[str, str]):
    async def process(self, record: Record[str, str]) -> None:
        if record.value == "stuck":
            await asyncio.Event().wait()  # a call that never returns
        self.context.forward(record)


def app_for(transport: MemoryTransport, src: str, dst: str, dlq: str, **settings: object) -> App:
    app = App(unique("stuck"), transport=transport, commit_interval_ms=20,
              dead_letter_topic=dlq, retry=Retry(timeout=0.05), **settings)
    app.topic(src, key=str, value=str)
    app.topic(dst, key=str, value=str)
    app.topology.add_source("src", src).add_processor("call", NeverReturnsOnStuck,
                                                      "src").add_sink("sink", dst, "call")
    return app


def test_async_steps_are_bounded_by_default_and_retry_timeout_stays_usable() -> None:
    assert Settings().processing_timeout == 300.0
    assert Settings().stuck_record_warning == 60.0
    assert App("a")._task_settings().processing_timeout == 300.0


async def test_a_shorter_retry_timeout_wins_over_the_default_processing_timeout() -> None:
    """The default processing_timeout must not silence an app-wide Retry.timeout: the stuck
    record is dead-lettered after 0.05 s, not 300 s, and the records behind it go out."""
    transport = MemoryTransport(MemoryBroker())
    src, dst, dlq = unique("in"), unique("out"), unique("dlq")
    await create_topic(transport, src, 1)
    await produce(transport, src, [(b"k", b"a"), (b"k", b"stuck"), (b"k", b"b")])
    app = app_for(transport, src, dst, dlq)
    async with app:
        dead = await read_exactly(transport, dlq, 1, timeout=10)
        out = await read_exactly(transport, dst, 2, timeout=10)
    assert dead[0].value == b"stuck"
    assert dict(dead[0].headers)["aiostreams.dlq.exception"] == b"TimeoutError"
    assert [r.value for r in out] == [b"a", b"b"]
