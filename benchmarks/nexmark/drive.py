"""The queries on both sides without a broker: aiostreams' and Kafka Streams'
TopologyTestDriver over the same small input, outputs compared (``python -m
benchmarks.nexmark --check``, and the differential test ``tests/oracle/
test_oracle_nexmark.py``).

aiostreams' driver is fed all of a query's inputs, then processes them (the task choosing
by timestamp); Kafka Streams' processes each record as it is piped, in event order. The
interleavings differ, so the compared forms are those the queries promise do not depend on
it (:data:`~benchmarks.nexmark.topics.FORMS`). Kafka Streams' record cache is off here.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from dataclasses import dataclass

from aiostreams import App
from aiostreams.testing.driver import TopologyTestDriver
from benchmarks.nexmark import jvm, queries
from benchmarks.nexmark.generator import Config, events
from benchmarks.nexmark.topics import KINDS, Inputs, Pair, canonical, encoded

PREFIX = "nx"
OUTPUT = "out"


def input_lines(config: Config) -> str:
    """``config``'s events in ``Nexmark.java``'s ``drive`` format."""
    lines = []
    for event in events(config):
        kind, key, value = encoded(event)
        lines.append(f"{kind} {key.hex()} {value.hex()} {event.date_time}\n")
    return "".join(lines)


async def drive_aiostreams(query: str, config: Config) -> list[Pair]:
    """``query``'s output records from aiostreams' TopologyTestDriver over ``config``."""
    inputs = Inputs(PREFIX, 1, dict.fromkeys(KINDS, 0))
    with tempfile.TemporaryDirectory() as tmp:
        app = App(f"nexmark-{query}-{uuid.uuid4().hex[:8]}",
                  broker=f"memory://{uuid.uuid4().hex}", state_dir=tmp,
                  default_partitions=1)
        queries.build(app, query, inputs, OUTPUT)
        async with TopologyTestDriver(app) as driver:
            for event in events(config):
                kind, key, value = encoded(event)
                if kind in queries.READS[query]:
                    driver.pipe_raw_input(inputs.topic(kind), key, value,
                                          event.date_time / 1000)
            await driver.process_all()
            return [(r.key, r.value) for r in driver.read_raw_output(OUTPUT)]


@dataclass(frozen=True)
class Compared:
    query: str
    aiostreams: list[Pair]
    kafka_streams: list[Pair]

    @property
    def equal(self) -> bool:
        return self.aiostreams == self.kafka_streams

    def describe(self) -> str:
        """One line: equal, or the first difference."""
        if self.equal:
            return f"{self.query}: equal ({len(self.aiostreams)} compared)"
        ours, theirs = set(self.aiostreams), set(self.kafka_streams)
        return (f"{self.query}: DIFFERENT: {len(self.aiostreams)} against "
                f"{len(self.kafka_streams)}; only aiostreams: {sorted(ours - theirs)[:3]}; "
                f"only Kafka Streams: {sorted(theirs - ours)[:3]}")


def check(config: Config, which: list[str]) -> list[Compared]:
    """Each query of ``which`` on both drivers over ``config``'s events, compared in the
    query's form."""
    theirs = jvm.drive(which, input_lines(config))
    compared = []
    for query in which:
        ours = asyncio.run(drive_aiostreams(query, config))
        compared.append(Compared(query, canonical(query, ours),
                                 canonical(query, theirs[query])))
    return compared
