"""Nexmark's three event types and their wire format, shared byte for byte with
``benchmarks/kstreams/Nexmark.java``.

Every field is a big-endian 64-bit integer (Kafka's ``LongSerializer`` layout), except a
person's ``state``: two ASCII letters. Prices are in cents; times in milliseconds since the
epoch. Keys are 8-byte longs too (``LongSerde`` / ``Serdes.Long()``): a person's id, an
auction's id, and a bid's auction id, so the producer's murmur2 partitioner puts each key
on the partition Kafka Streams' would.

==========  ==========================================  =====
record      fields, in order                            bytes
==========  ==========================================  =====
Person      id, date_time, state (2 ASCII)              18
Auction     id, seller, category, initial_bid,          48
            date_time, expires
Bid         auction, bidder, price, date_time           32
==========  ==========================================  =====

The queries' outputs use :data:`PAIR` (two longs) and :data:`TRIPLE` (three), and
:class:`SellerSerde` for q3's (seller, state, auction).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from aiostreams.errors import DeserializationError

PERSON = struct.Struct(">qq2s")
AUCTION = struct.Struct(">qqqqqq")
BID = struct.Struct(">qqqq")
PAIR = struct.Struct(">qq")
TRIPLE = struct.Struct(">qqq")
SELLER = struct.Struct(">q2sq")


class Person(NamedTuple):
    id: int
    date_time: int
    state: str


class Auction(NamedTuple):
    id: int
    seller: int
    category: int
    initial_bid: int
    date_time: int
    expires: int


class Bid(NamedTuple):
    auction: int
    bidder: int
    price: int
    date_time: int


class Seller(NamedTuple):
    """q3's output: an auction of category 10 and its seller's id and state."""

    seller: int
    state: str
    auction: int


def encode_person(p: Person) -> bytes:
    return PERSON.pack(p.id, p.date_time, p.state.encode("ascii"))


def encode_auction(a: Auction) -> bytes:
    return AUCTION.pack(*a)


def encode_bid(b: Bid) -> bytes:
    return BID.pack(*b)


def _unpack(layout: struct.Struct, what: str, topic: str, data: bytes) -> tuple[object, ...]:
    try:
        return layout.unpack(data)
    except struct.error as e:
        raise DeserializationError(
            f"a Nexmark {what} of {topic!r} is {layout.size} bytes, got {len(data)}: write "
            "the topic with benchmarks.nexmark.generator", topic=topic) from e


class _Fixed:
    """Base of the fixed-layout serdes: equal when of the same class."""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))


class PersonSerde(_Fixed):
    def serialize(self, topic: str, value: Person | None) -> bytes | None:
        return None if value is None else encode_person(value)

    def deserialize(self, topic: str, data: bytes | None) -> Person | None:
        if data is None:
            return None
        pid, at, state = _unpack(PERSON, "person", topic, data)
        assert isinstance(state, bytes)
        return Person(pid, at, state.decode("ascii"))  # type: ignore[arg-type]


class AuctionSerde(_Fixed):
    def serialize(self, topic: str, value: Auction | None) -> bytes | None:
        return None if value is None else AUCTION.pack(*value)

    def deserialize(self, topic: str, data: bytes | None) -> Auction | None:
        if data is None:
            return None
        return Auction._make(_unpack(AUCTION, "auction", topic, data))


class BidSerde(_Fixed):
    def serialize(self, topic: str, value: Bid | None) -> bytes | None:
        return None if value is None else BID.pack(*value)

    def deserialize(self, topic: str, data: bytes | None) -> Bid | None:
        if data is None:
            return None
        return Bid._make(_unpack(BID, "bid", topic, data))


class PairSerde(_Fixed):
    """Two longs (a tuple of two ints)."""

    def serialize(self, topic: str, value: tuple[int, int] | None) -> bytes | None:
        return None if value is None else PAIR.pack(*value)

    def deserialize(self, topic: str, data: bytes | None) -> tuple[int, int] | None:
        if data is None:
            return None
        first, second = _unpack(PAIR, "pair", topic, data)
        return first, second  # type: ignore[return-value]


class TripleSerde(_Fixed):
    """Three longs (a tuple of three ints)."""

    def serialize(self, topic: str, value: tuple[int, int, int] | None) -> bytes | None:
        return None if value is None else TRIPLE.pack(*value)

    def deserialize(self, topic: str, data: bytes | None) -> tuple[int, int, int] | None:
        if data is None:
            return None
        a, b, c = _unpack(TRIPLE, "triple", topic, data)
        return a, b, c  # type: ignore[return-value]


class SellerSerde(_Fixed):
    def serialize(self, topic: str, value: Seller | None) -> bytes | None:
        if value is None:
            return None
        return SELLER.pack(value.seller, value.state.encode("ascii"), value.auction)

    def deserialize(self, topic: str, data: bytes | None) -> Seller | None:
        if data is None:
            return None
        seller, state, auction = _unpack(SELLER, "seller", topic, data)
        assert isinstance(state, bytes)
        return Seller(seller, state.decode("ascii"), auction)  # type: ignore[arg-type]
