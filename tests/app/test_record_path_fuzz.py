"""Issue 24, the fuzz test: keys, values and headers of any bytes and sizes, through sources
of every serde, on the memory broker. No input stops a worker; each lands in the output or
the dead-letter topic exactly once, and a dead letter keeps the bytes it did not have to cut.
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from aiostreams import App, Processor, Record
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord, TopicPartition

ID = "fuzz-id"


class Order(BaseModel):
    id: int
    amount: float


def varied(valid: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes | None]:
    """Bytes a serde accepts, any bytes, null, and sizes around the 1 MB output limit."""
    sized = st.builds(lambda n, b: b * n, st.sampled_from([999_000, 1_000_001, 1_047_000]),
                      st.binary(min_size=1, max_size=1))
    return st.one_of(valid, st.binary(max_size=64), st.none(), sized)


SERDES: dict[str, tuple[Any, Any, st.SearchStrategy[bytes], st.SearchStrategy[bytes]]] = {
    "bytes": (bytes, bytes, st.binary(max_size=32), st.binary(max_size=32)),
    "str": (str, str, st.text(max_size=16).map(str.encode), st.text().map(str.encode)),
    "numbers": (int, float, st.integers(-2**63, 2**63 - 1).map(lambda i: struct.pack(">q", i)),
                st.floats().map(lambda f: struct.pack(">d", f))),
    "json": ("json", dict, st.text(max_size=8).map(lambda s: json.dumps(s).encode()),
             st.dictionaries(st.text(max_size=4), st.integers()).map(
                 lambda d: json.dumps(d).encode())),
    "pydantic": (str, Order, st.text(max_size=8).map(str.encode),
                 st.builds(Order, id=st.integers(), amount=st.floats(allow_nan=False)).map(
                     lambda o: o.model_dump_json().encode())),
}

header_name = st.one_of(st.text(max_size=12),
                        st.binary(max_size=12).map(lambda b: b.decode("utf-8", "surrogateescape"))
                        ).filter(lambda n: n != ID)
header = st.tuples(header_name, st.one_of(st.none(), st.binary(max_size=200)))


@st.composite
def example(draw: st.DrawFn) -> tuple[str, bool, list[OutgoingRecord]]:
    serdes = draw(st.sampled_from(sorted(SERDES)))
    _, _, keys, values = SERDES[serdes]
    records = []
    for i in range(draw(st.integers(1, 8))):
        headers = draw(st.lists(header, max_size=4))
        headers.insert(draw(st.integers(0, len(headers))), (ID, str(i).encode()))
        records.append(OutgoingRecord("in", draw(varied(keys)), draw(varied(values)), 1.0,
                                      tuple(headers)))
    return serdes, draw(st.booleans()), records


class ForwardSync(Processor[Any, Any]):
    def process(self, record: Record[Any, Any]) -> None:
        self.context.forward(record)


class ForwardAsync(Processor[Any, Any]):
    async def process(self, record: Record[Any, Any]) -> None:
        await asyncio.sleep(0)
        self.context.forward(record)


async def run(serdes: str, is_async: bool, records: list[OutgoingRecord]) -> int:
    """Run ``records`` through an app; check each landed once; return how many in "out"."""
    key, value, _, _ = SERDES[serdes]
    broker = MemoryBroker()
    broker.create_topic("in", 2)
    broker.append((r, i % 2) for i, r in enumerate(records))
    app = App("fuzz", transport=MemoryTransport(broker), dead_letter_topic="dlq",
              commit_interval_ms=5, poll_timeout=0.01)
    app.topic("in", key=key, value=value)
    app.topic("out", key=key, value=value)
    app.topology.add_source("src", "in").add_processor(
        "fwd", ForwardAsync if is_async else ForwardSync, "src").add_sink("sink", "out", "fwd")
    tps = [TopicPartition("in", p) for p in (0, 1)]
    async with app:
        async with asyncio.timeout(20):
            while any((broker.committed("fuzz", tp) or 0) < broker.end_offset(tp)
                      for tp in tps):
                worker = app.inspect().worker  # internal: awaits the worker's next commit
                assert worker is not None and worker.failure is None
                await worker.next_commit()
        assert (status := app.status().worker) is not None and status.failure is None
    landed = [dict(r.headers)[ID] for topic in ("out", "dlq")
              for r in (broker.records(topic) if topic in broker.topic_names() else [])]
    assert Counter(landed) == Counter(str(i).encode() for i in range(len(records)))
    for letter in broker.records("dlq") if "dlq" in broker.topic_names() else []:
        found = dict(letter.headers)
        original = records[int(found[ID])]
        cut = (found.get("aiostreams.dlq.truncated") or b"").split(b",")
        assert b"value" in cut or letter.value == original.value
        assert b"key" in cut or letter.key == original.key
    return len(broker.records("out")) if "out" in broker.topic_names() else 0


VALID = {"bytes": (b"\xff", b""), "str": (b"k", "\u00e9".encode()),
         "numbers": (struct.pack(">q", -1), struct.pack(">d", 0.5)),
         "json": (b'"k"', b'{"a": 1}'), "pydantic": (b"k", b'{"id": 1, "amount": 2.5}')}


async def test_valid_records_of_every_serde_reach_the_output() -> None:
    for serdes, (key, value) in VALID.items():
        record = OutgoingRecord("in", key, value, 1.0, ((ID, b"0"), ("\udcff", None)))
        assert await run(serdes, True, [record]) == 1, serdes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.data_too_large])
@given(example())
def test_any_record_lands_in_the_output_or_the_dead_letters_exactly_once(
        case: tuple[str, bool, list[OutgoingRecord]]) -> None:
    asyncio.run(run(*case))
