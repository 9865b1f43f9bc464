"""The broker side of a Nexmark run: the input topics written once, output topics read back
and reduced to what both frameworks must agree on.

Inputs: ``<prefix>-persons``, ``<prefix>-auctions``, ``<prefix>-bids``, each with
``partitions`` partitions, keyed by 8-byte longs (person id, auction id, a bid's auction)
and partitioned by the producer's murmur2 (Kafka's default, the same for both readers),
each record stamped with its event time, kept for ever (:data:`KEEP`).

Outputs are compared in one of two forms (:data:`FORMS`):

* ``"records"``: every output record, as a sorted multiset of (key, value) bytes: for
  queries that emit one record per input (q0-q2) or per join match (q8);
* ``"final"``: the last value per key (a null value deletes it): for queries whose
  intermediate updates depend on caching and on how the tasks interleave, but whose final
  table does not (q3-q7). A key's records all land on one partition, in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import OutgoingRecord
from benchmarks.nexmark.generator import Config, Event, events
from benchmarks.nexmark.model import Auction, Bid, Person, encode_auction, encode_bid, encode_person
from benchmarks.peers.topics import create_topics

CHUNK = 20_000
KEEP = {"retention.ms": "-1"}
"""Config of the input and output topics: the events' times are of 2023 (fixed, for
deterministic bytes), older than a broker's default retention (7 days), which would delete
them minutes after they are written."""
KINDS = ("persons", "auctions", "bids")


@dataclass(frozen=True)
class Inputs:
    """Where a run's inputs are and how many records each topic holds."""

    prefix: str
    partitions: int
    counts: dict[str, int]

    def topic(self, kind: str) -> str:
        if kind not in KINDS:
            raise ValueError(f"Nexmark has {KINDS} topics, not {kind!r}")
        return f"{self.prefix}-{kind}"

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def encoded(event: Event) -> tuple[str, bytes, bytes]:
    """``(kind, key, value)`` of ``event`` as written to its topic."""
    if isinstance(event, Person):
        return "persons", event.id.to_bytes(8, "big", signed=True), encode_person(event)
    if isinstance(event, Auction):
        return "auctions", event.id.to_bytes(8, "big", signed=True), encode_auction(event)
    assert isinstance(event, Bid)
    return "bids", event.auction.to_bytes(8, "big", signed=True), encode_bid(event)


async def write_inputs(bootstrap: str, prefix: str, config: Config,
                       partitions: int) -> Inputs:
    """Create the three input topics and write ``config``'s events to them, in order."""
    inputs = Inputs(prefix, partitions, dict.fromkeys(KINDS, 0))
    await create_topics(bootstrap, [inputs.topic(k) for k in KINDS], partitions, KEEP)
    producer = KafkaTransport(bootstrap).producer()
    await producer.start()
    try:
        chunk: list[OutgoingRecord] = []
        for event in events(config):
            kind, key, value = encoded(event)
            inputs.counts[kind] += 1
            chunk.append(OutgoingRecord(inputs.topic(kind), key, value,
                                        timestamp=event.date_time / 1000))
            if len(chunk) == CHUNK:
                await producer.send_batch(chunk)
                chunk = []
        if chunk:
            await producer.send_batch(chunk)
        await producer.flush()
    finally:
        await producer.stop()
    return inputs


Pair = tuple[bytes | None, bytes | None]
FORMS = {"q0": "records", "q1": "records", "q2": "records", "q3": "final", "q4": "final",
         "q5": "final", "q7": "final", "q8": "records"}


def canonical(query: str, records: Iterable[Pair]) -> list[Pair]:
    """``(key, value)`` records (in each partition's order) in the form ``query`` is
    compared in."""
    if FORMS[query] == "records":
        return sorted(records, key=_order)
    final: dict[bytes | None, bytes | None] = {}
    for key, value in records:
        final[key] = value
    return sorted(((k, v) for k, v in final.items() if v is not None), key=_order)


def _order(pair: Pair) -> tuple[bytes, bytes]:
    return pair[0] or b"", pair[1] or b""
