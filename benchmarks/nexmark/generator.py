"""A deterministic, seeded, event-time Nexmark generator (our own, after the benchmark's
description: Tucker et al., "NEXMark - A Benchmark for Queries over Data Streams").

Event ``n`` (from 0) is, by ``n mod 50``: a person (0), an auction (1-3) or a bid (4-49):
Nexmark's 1 : 3 : 46 proportions. Its time is ``BASE_MS + n * 1000 // rate`` (``rate``
events per second of event time), so times never decrease. Ids are dense and increasing:
person ``FIRST_PERSON + n // 50``, auction ``FIRST_AUCTION + 3 * (n // 50) + offset - 1``.

* an auction's seller is a person already generated: half the time a *hot* seller (the
  latest person id rounded down to a multiple of ``HOT_SELLER``), else one of the latest
  ``RECENT`` persons; its category is one of ``CATEGORIES`` (10-14); it expires a lifetime
  after it starts, a lifetime longer than any bid can lag (see below);
* a bid's auction is one already generated: half the time the hot auction (the latest id
  rounded down to a multiple of ``HOT_AUCTION``), else one of the latest ``RECENT``
  auctions; so **every bid falls within its auction's lifetime** (``date_time`` between the
  auction's ``date_time`` and ``expires``): the invariant q4 relies on (checked by
  :func:`check_lifetimes`); its bidder is chosen like a seller; its price (cents) is
  ``round(10 ** (6 u) * 100)`` for a uniform ``u`` (Nexmark's long-tailed prices);
* a person lives in one of ``STATES``.

The same seed and sizes give the same bytes: both frameworks read what was written once.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from benchmarks.nexmark.model import Auction, Bid, Person

BASE_MS = 1_700_000_000_000
FIRST_PERSON = 1000
FIRST_AUCTION = 1000
CATEGORIES = (10, 11, 12, 13, 14)
STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
RECENT = 100
HOT_SELLER = 4
HOT_AUCTION = 8
EVENTS_PER_EPOCH = 50
AUCTIONS_PER_EPOCH = 3


@dataclass(frozen=True)
class Config:
    events: int
    rate: int = 10_000
    """Events per second of event time."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.events < 1 or self.rate < 1:
            raise ValueError(f"a Nexmark run needs events >= 1 and rate >= 1, got {self}")

    def event_ms(self, n: int) -> int:
        return BASE_MS + n * 1000 // self.rate

    @property
    def lifetime_floor_ms(self) -> int:
        """Longer than a bid can lag its auction: a bid picks among the latest ``RECENT``
        auctions (or the hot one, rounded down ``HOT_AUCTION`` ids), created at most this
        many events earlier (plus one epoch), and a millisecond of rounding."""
        lag_events = ((RECENT + HOT_AUCTION) // AUCTIONS_PER_EPOCH + 2) * EVENTS_PER_EPOCH
        return math.ceil(lag_events * 1000 / self.rate) + 1


Event = Person | Auction | Bid


def events(config: Config) -> Iterator[Event]:
    """The ``config.events`` events in order (see the module docstring)."""
    rng = random.Random(config.seed)
    floor = config.lifetime_floor_ms
    for n in range(config.events):
        epoch, offset = divmod(n, EVENTS_PER_EPOCH)
        at = config.event_ms(n)
        last_person = FIRST_PERSON + epoch
        if offset == 0:
            yield Person(last_person, at, rng.choice(STATES))
            continue
        if offset <= AUCTIONS_PER_EPOCH:
            seller = _pick(rng, FIRST_PERSON, last_person, HOT_SELLER)
            yield Auction(FIRST_AUCTION + AUCTIONS_PER_EPOCH * epoch + offset - 1, seller,
                          rng.choice(CATEGORIES), _price(rng), at,
                          at + floor + rng.randrange(10_000))
            continue
        last_auction = FIRST_AUCTION + AUCTIONS_PER_EPOCH * epoch + AUCTIONS_PER_EPOCH - 1
        yield Bid(_pick(rng, FIRST_AUCTION, last_auction, HOT_AUCTION),
                  _pick(rng, FIRST_PERSON, last_person, HOT_SELLER), _price(rng), at)


def _pick(rng: random.Random, first: int, last: int, hot: int) -> int:
    """An id in ``[first, last]``: half the time the hot one, else one of the latest."""
    if rng.random() < 0.5:
        return max(first, last - last % hot)
    return max(first, last - rng.randrange(RECENT))


def _price(rng: random.Random) -> int:
    return round(math.pow(10.0, rng.random() * 6.0) * 100.0)


def check_lifetimes(config: Config) -> None:
    """Raise when a bid falls outside its auction's lifetime (q4's premise)."""
    spans: dict[int, tuple[int, int]] = {}
    for event in events(config):
        if isinstance(event, Auction):
            spans[event.id] = (event.date_time, event.expires)
        elif isinstance(event, Bid):
            start, end = spans[event.auction]
            if not start <= event.date_time <= end:
                raise AssertionError(f"bid {event} is outside auction {event.auction}'s "
                                     f"lifetime [{start}, {end}]")
