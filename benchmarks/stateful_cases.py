"""The workloads of :mod:`benchmarks.stateful`: each case's input, its aiostreams topology
and what it outputs.

Every input record is ``(topic, key bytes, value bytes, timestamp seconds)``; keys are
``k<i mod keys>`` (strings), values 8-byte longs, timestamps one millisecond apart, so a key
comes back every ``keys`` ms of event time. The cases, each with persistent (SQLite) stores
where the DSL lets a user choose them:

* ``count``: ``group_by_key().count()``: one key-value store, a read and a write a record;
* ``tumbling``: a sum per key per 60-s tumbling window (a key gets ``60 s / keys ms``
  updates a window: 6 at 10k keys; at 100k every record opens a new window);
* ``hopping``: the same sum over 50-s windows advancing by 10 s: 5 windows a record;
* ``ss_join``: a stream-stream inner join, 1-s windows: two inputs of ``n`` records each
  (``orders`` and ``payments``), the payment of order ``i`` with its key and timestamp, so
  each order joins exactly one payment. The DSL keeps join buffers in memory (it has no
  persistent option for them): this case measures the window store *logic* and its
  changelog, not SQLite;
* ``st_join``: a stream-table inner join: a table of ``keys`` rows (``customers``,
  timestamp 0, a persistent store) and ``n`` stream records joining it.

The figures are per *input* record (both sides of ``ss_join``; the table's rows included in
``st_join``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from aiostreams import App
from aiostreams.windows import HoppingWindows, JoinWindows, TumblingWindows, Windowed

LONG = struct.Struct(">q")
Input = tuple[str, bytes, bytes, float]
"""(topic, key, value, timestamp in seconds)."""


def keyed(topic: str, n: int, keys: int, offset_ms: int = 0) -> Iterator[Input]:
    """``n`` records of ``topic``: key ``k<i % keys>``, value ``i``, timestamp ``i`` ms."""
    pack = LONG.pack
    for i in range(n):
        yield topic, f"k{i % keys}".encode(), pack(i), (i + offset_ms) / 1000


def _window_key(wk: Windowed[str]) -> str:
    return f"{wk.key}@{wk.start:.0f}"


@dataclass(frozen=True)
class Case:
    """One workload: its inputs (per topic, in order), its topology (on topics named
    ``prefix + name``: a real broker gets fresh ones each run), and how many output records
    say it is done."""

    name: str
    topics: tuple[str, ...]
    inputs: Callable[[int, int], Iterator[Input]]
    build: Callable[[App, str], None]
    outputs: Callable[[int, int], int]

    def input_count(self, n: int, keys: int) -> int:
        return sum(1 for _ in self.inputs(n, keys))


def _count(app: App, prefix: str) -> None:
    events = app.topic(prefix + "events", key=str, value=int)
    out = app.topic(prefix + "out", key=str, value=int, partitions=1)
    (app.stream(events).group_by_key()
     .count(materialized="counts", persistent=True).to_stream().to(out))


def _windowed(windows: TumblingWindows | HoppingWindows) -> Callable[[App, str], None]:
    def build(app: App, prefix: str) -> None:
        events = app.topic(prefix + "events", key=str, value=int)
        out = app.topic(prefix + "out", key=str, value=int, partitions=1)
        (app.stream(events).group_by_key().windowed_by(windows)
         .aggregate(0, lambda _k, v, total: total + v, materialized="sums",
                    persistent=True, value_serde=int)
         .to_stream().map(lambda wk, total: (_window_key(wk), total)).to(out))
    return build


def _ss_join(app: App, prefix: str) -> None:
    orders = app.topic(prefix + "orders", key=str, value=int)
    payments = app.topic(prefix + "payments", key=str, value=int)
    out = app.topic(prefix + "out", key=str, value=int, partitions=1)
    (app.stream(orders)
     .join(app.stream(payments), lambda order, paid: order + paid, JoinWindows.of(1.0))
     .to(out))


def _st_join(app: App, prefix: str) -> None:
    orders = app.topic(prefix + "orders", key=str, value=int)
    customers = app.topic(prefix + "customers", key=str, value=int)
    out = app.topic(prefix + "out", key=str, value=int, partitions=1)
    table = app.table(customers, materialized=prefix + "customers-store", persistent=True)
    app.stream(orders).join(table, lambda order, tier: order + tier).to(out)


def _ss_inputs(n: int, keys: int) -> Iterator[Input]:
    yield from keyed("orders", n, keys)
    yield from keyed("payments", n, keys)


def _st_inputs(n: int, keys: int) -> Iterator[Input]:
    yield from keyed("customers", keys, keys)
    yield from keyed("orders", n, keys, offset_ms=1)


def hopping_outputs(n: int) -> int:
    """Window updates of ``n`` records at 1-ms steps in 50-s windows advancing by 10 s:
    records before 40 s fall in fewer than 5 windows (windows start at 0)."""
    return sum(min(5, i // 10_000 + 1) for i in range(n))


def ss_join_outputs(n: int, keys: int) -> int:
    """Joined pairs: order ``i`` and payment ``j`` share a key when ``j - i`` is a multiple
    of ``keys``, and join when ``|i - j| <= 1000`` ms (one pair each at 1,000 keys or more)."""
    reach = 1000 // keys
    return sum(1 for i in range(n) for m in range(-reach, reach + 1)
               if 0 <= i + m * keys < n)


CASES: dict[str, Case] = {c.name: c for c in (
    Case("count", ("events",), lambda n, k: keyed("events", n, k), _count,
         lambda n, _k: n),
    Case("tumbling", ("events",), lambda n, k: keyed("events", n, k),
         _windowed(TumblingWindows(60.0)), lambda n, _k: n),
    Case("hopping", ("events",), lambda n, k: keyed("events", n, k),
         _windowed(HoppingWindows(50.0, 10.0)), lambda n, _k: hopping_outputs(n)),
    Case("ss_join", ("orders", "payments"), _ss_inputs, _ss_join, ss_join_outputs),
    Case("st_join", ("customers", "orders"), _st_inputs, _st_join, lambda n, _k: n),
)}


__all__ = ["CASES", "LONG", "Case", "Input", "hopping_outputs", "keyed", "ss_join_outputs"]
