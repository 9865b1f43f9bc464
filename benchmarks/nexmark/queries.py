"""The Nexmark queries in aiostreams' DSL; ``benchmarks/kstreams/Nexmark.java`` has the same
topologies in Kafka Streams' DSL, operator for operator.

Stores are persistent (SQLite under the app's ``state_dir``) wherever the DSL lets a store
be, as Kafka Streams' default stores are RocksDB; the stream-stream join's window stores
are in memory in aiostreams (its DSL offers no persistent one).

=====  ==========================================================================
query  what it computes (``GRACE`` admits any lateness a run can have: its results
       never depend on how far one task runs ahead of another)
=====  ==========================================================================
q0     pass-through: every bid, decoded and encoded again
q1     currency map: every bid with ``price * 908 // 1000`` (dollars to euros, in
       whole cents, integer arithmetic so both languages agree to the cent)
q2     filter: ``(auction, price)`` of the bids whose ``auction % 123 == 0``
q3     local item suggestion: auctions of category 10 whose seller lives in OR, ID
       or CA: a foreign-key table-table join (KIP-213) of the auctions table with the
       persons table on ``seller`` -> ``(seller, state, auction)`` keyed by auction
q4     average closing price per category: the highest bid per auction (a table),
       joined table-table to its auction (its category), re-grouped by category and
       averaged with an adder and a subtractor (``sum // count``). Nexmark takes the
       highest bid *within the auction's lifetime*; the generator puts every bid
       within it (``generator.check_lifetimes``), so the highest bid is that one, and
       the average covers every auction with a bid, closed or not
q5     hot items: bids counted per auction in hopping windows (10 s, advancing 2 s),
       then per window the auction with the most (ties: the lower id) -> key window
       start (ms), value ``(auction, count)``
q7     highest bid per tumbling 10 s window: all bids grouped under one key
       (``0``), windowed, reduced to the highest (:func:`higher_bid`)
q8     new users: persons joined with the auctions they created in the same tumbling
       10 s window: a stream-stream join on person id = seller (auctions re-keyed
       by seller) within 10 s, kept when both fall in the same window ->
       ``(person, window start, auction)``
=====  ==========================================================================

Outputs are compared as whole multisets (q0-q2, q8) or as final values per key (q3-q7):
see :mod:`benchmarks.nexmark.topics`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiostreams import App
from aiostreams.dsl.builder import Stream
from aiostreams.serde import LongSerde
from aiostreams.windows import (
    HoppingWindows,
    JoinWindows,
    TimeWindowedSerde,
    TumblingWindows,
    Windowed,
    to_ms,
)
from benchmarks.nexmark.model import (
    Auction,
    AuctionSerde,
    Bid,
    BidSerde,
    PairSerde,
    Person,
    PersonSerde,
    Seller,
    SellerSerde,
    TripleSerde,
)
from benchmarks.nexmark.topics import Inputs

QUERIES = ("q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8")
READS = {"q0": ("bids",), "q1": ("bids",), "q2": ("bids",), "q3": ("persons", "auctions"),
         "q4": ("auctions", "bids"), "q5": ("bids",), "q7": ("bids",),
         "q8": ("persons", "auctions")}
"""The input topics each query reads."""
GRACE = 3600.0
WINDOW = 10.0
HOP = 2.0
Q3_STATES = frozenset({"OR", "ID", "CA"})
Hook = Callable[[Any, Any], None]


def _ignore(_key: Any, _value: Any) -> None:
    return None


@dataclass
class Hooks:
    """Called with each record read from an input topic (``seen``) and each record written
    to the output (``produced``): how a run is timed. No-ops by default."""

    seen: Hook = _ignore
    produced: Hook = _ignore


def higher_bid(a: Bid, b: Bid) -> Bid:
    """The higher of two bids by price, then time, bidder and auction (a total order, so
    both frameworks pick the same bid whatever order they see them in)."""
    return b if (b.price, b.date_time, b.bidder, b.auction) > (
        a.price, a.date_time, a.bidder, a.auction) else a


def hotter(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """Of two ``(auction, count)``: the higher count, then the lower auction id."""
    return b if (b[1], -b[0]) > (a[1], -a[0]) else a


def window_start(ms: int) -> int:
    size = round(WINDOW * 1000)
    return ms - ms % size


def new_user(p: Person, a: Auction) -> tuple[int, int, int] | None:
    start = window_start(p.date_time)
    return (p.id, start, a.id) if start == window_start(a.date_time) else None


def build(app: App, query: str, inputs: Inputs, output: str, hooks: Hooks | None = None,
          ) -> None:
    """Declare ``query``'s topology on ``app``, reading ``inputs`` and writing ``output``."""
    if query not in QUERIES:
        raise ValueError(f"unknown Nexmark query {query!r}; choose from {', '.join(QUERIES)}")
    h = hooks or Hooks()
    p = inputs.partitions
    long = LongSerde()
    app.topic(inputs.topic("persons"), key=long, value=PersonSerde(), partitions=p)
    app.topic(inputs.topic("auctions"), key=long, value=AuctionSerde(), partitions=p)
    app.topic(inputs.topic("bids"), key=long, value=BidSerde(), partitions=p)

    def source(kind: str) -> Stream[Any, Any]:
        return app.stream(inputs.topic(kind)).peek(h.seen)

    def sink(stream: Stream[Any, Any], key: Any, value: Any) -> None:
        stream.peek(h.produced).to(app.topic(output, key=key, value=value, partitions=p))

    if query in ("q0", "q1", "q2"):
        bids = source("bids")
        if query == "q0":
            sink(bids, long, BidSerde())
        elif query == "q1":
            sink(bids.map_values(lambda b: b._replace(price=b.price * 908 // 1000)),
                 long, BidSerde())
        else:
            sink(bids.filter(lambda _k, b: b.auction % 123 == 0)
                 .map_values(lambda b: (b.auction, b.price)), long, PairSerde())
    elif query == "q3":
        persons = source("persons").filter(lambda _k, s: s.state in Q3_STATES).to_table(
            persistent=True)
        auctions = source("auctions").filter(lambda _k, a: a.category == 10).to_table(
            persistent=True)
        sellers = auctions.join_on_foreign_key(
            persons, lambda a: a.seller, lambda a, s: Seller(s.id, s.state, a.id),
            persistent=True, value_serde=SellerSerde())
        sink(sellers.to_stream(), long, SellerSerde())
    elif query == "q4":
        highest = source("bids").group_by_key().reduce(
            higher_bid, persistent=True, value_serde=BidSerde())
        auctions = source("auctions").to_table(persistent=True)
        closing = highest.join(auctions, lambda b, a: (a.category, b.price))
        averages = closing.group_by(lambda _k, cp: cp, key_serde=long,
                                    value_serde=long).aggregate(
            (0, 0), lambda _k, price, agg: (agg[0] + price, agg[1] + 1),
            lambda _k, price, agg: (agg[0] - price, agg[1] - 1),
            persistent=True, value_serde=PairSerde())
        sink(averages.to_stream().map_values(
            lambda agg: None if agg is None or agg[1] == 0 else agg[0] // agg[1]),
            long, long)
    elif query == "q5":
        counts = source("bids").group_by_key().windowed_by(
            HoppingWindows(WINDOW, HOP, grace=GRACE)).count(persistent=True)

        def by_window(w: Windowed[int], n: int | None) -> tuple[int, tuple[int, int]]:
            assert n is not None, "a windowed count is never deleted"
            return to_ms(w.start), (w.key, n)

        hot = counts.to_stream().map(by_window).group_by_key(
            key_serde=long, value_serde=PairSerde()).reduce(
            hotter, persistent=True, value_serde=PairSerde())
        sink(hot.to_stream(), long, PairSerde())
    elif query == "q7":
        highest = source("bids").group_by(lambda _k, _b: 0, key_serde=long,
                                          value_serde=BidSerde()).windowed_by(
            TumblingWindows(WINDOW, grace=GRACE)).reduce(
            higher_bid, persistent=True, value_serde=BidSerde())
        sink(highest.to_stream(), TimeWindowedSerde(long, size=WINDOW), BidSerde())
    else:
        people = source("persons")
        by_seller = source("auctions").select_key(lambda _k, a: a.seller).repartitioned(
            key_serde=long, value_serde=AuctionSerde())
        joined = people.join(by_seller, new_user, JoinWindows.of(WINDOW, grace=GRACE))
        sink(joined.filter(lambda _k, v: v is not None), long, TripleSerde())
