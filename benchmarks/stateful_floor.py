"""The floors of :mod:`benchmarks.stateful`: each case's logical work in a hand-rolled loop
over ``sqlite3`` - the physical limit of the store, what no framework on this store can beat.

Each floor reads the same raw input records from the same memory broker (two topics merged by
timestamp, as the engine chooses them), decodes keys and values, keeps its state in a dict
that holds every key it has seen (an unbounded read cache; a miss reads the file once), writes
each update's bytes once (Kafka Streams' timestamped layout: 8-byte timestamp + value) to a
dirty dict and a changelog list, and every :data:`FLUSH_EVERY` records writes the dirty rows
to a SQLite file of the store's schema in one transaction (WAL, ``synchronous=FULL``, keys
in order) and appends its outputs and changelog records to the broker. No slots, no key
order, no overlay, no retries: nothing but the work.

``ss_join`` keeps its buffers in memory, as the DSL does (see :mod:`benchmarks.stateful_cases`).
"""

from __future__ import annotations

import heapq
import sqlite3
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from aiostreams.transport.memory import MemoryBroker
from aiostreams.types import OutgoingRecord, RawRecord

FLUSH_EVERY = 10_000
LONG = struct.Struct(">q")
STAMPED = struct.Struct(">qq")  # ValueAndTimestamp of a long: timestamp ms, value
START = struct.Struct(">Q")
BIAS = 1 << 63
LEN = struct.Struct(">i")


class FloorStore:
    """A dict over a SQLite file: ``get`` from memory (a miss reads the file once),
    ``put`` into memory and the dirty rows, ``flush`` writes the dirty rows in one
    transaction."""

    def __init__(self, path: Path, *, windowed: bool = False) -> None:
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID")
        if windowed:  # the window store's index of starts: retention deletes by range
            self.db.execute("CREATE INDEX kv_window_start ON kv (substr(k, -8))")
        self.values: dict[bytes, Any] = {}
        self.dirty: dict[bytes, bytes] = {}

    def get(self, kb: bytes) -> Any:
        value = self.values.get(kb, self)
        if value is self:
            row = self.db.execute("SELECT v FROM kv WHERE k = ?", (kb,)).fetchone()
            value = None if row is None else STAMPED.unpack(row[0])
            self.values[kb] = value
        return value

    def put(self, kb: bytes, value: Any, vb: bytes) -> None:
        self.values[kb] = value
        self.dirty[kb] = vb

    def flush(self, expire_below: int | None = None) -> None:
        self.db.execute("BEGIN")
        self.db.executemany("INSERT INTO kv (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE "
                            "SET v = excluded.v", sorted(self.dirty.items()))
        if expire_below is not None:
            self.db.execute("DELETE FROM kv WHERE substr(k, -8) < ?",
                            (START.pack(expire_below + BIAS),))
        self.db.execute("COMMIT")
        self.dirty = {}


def merged(broker: MemoryBroker, topics: tuple[str, ...]) -> Iterator[RawRecord]:
    """The topics' records (partition 0) merged by timestamp, earlier topics first on ties."""
    return heapq.merge(*(broker.records(t, 0) for t in topics), key=lambda r: r.timestamp)


Step = Callable[[RawRecord, list[tuple[bytes, bytes, float]], list[tuple[bytes, bytes]]],
                None]
"""One record's work: appends ``(key, value, timestamp)`` outputs and ``(key, value)``
changelog records."""


def _count(store: FloorStore) -> Step:
    def step(r: RawRecord, out: list[tuple[bytes, bytes, float]],
             log: list[tuple[bytes, bytes]]) -> None:
        kb = r.key
        assert kb is not None
        kb.decode()
        ts = round(r.timestamp * 1000)
        old = store.get(kb)
        stamp, count = (ts, 1) if old is None else (max(ts, old[0]), old[1] + 1)
        vb = STAMPED.pack(stamp, count)
        store.put(kb, (stamp, count), vb)
        log.append((kb, vb))
        out.append((kb, LONG.pack(count), stamp / 1000))
    return step


def _windowed(store: FloorStore, size_ms: int, advance_ms: int) -> Step:
    def step(r: RawRecord, out: list[tuple[bytes, bytes, float]],
             log: list[tuple[bytes, bytes]]) -> None:
        kb = r.key
        assert kb is not None and r.value is not None
        key = kb.decode()
        (value,) = LONG.unpack(r.value)
        ts = round(r.timestamp * 1000)
        start = max(0, ts - size_ms + advance_ms) // advance_ms * advance_ms
        while start <= ts:
            composite = kb + START.pack(start + BIAS)
            old = store.get(composite)
            stamp, total = (ts, value) if old is None else (max(ts, old[0]), old[1] + value)
            vb = STAMPED.pack(stamp, total)
            store.put(composite, (stamp, total), vb)
            log.append((composite, vb))
            out.append((f"{key}@{start / 1000:.0f}".encode(), LONG.pack(total), stamp / 1000))
            start += advance_ms
    return step


def _ss_join(before_ms: int, after_ms: int, left_topic: str) -> Step:
    sides: dict[bool, dict[bytes, list[tuple[int, list[bytes]]]]] = {True: {}, False: {}}

    def step(r: RawRecord, out: list[tuple[bytes, bytes, float]],
             log: list[tuple[bytes, bytes]]) -> None:
        kb, vb = r.key, r.value
        assert kb is not None and vb is not None
        kb.decode()
        (value,) = LONG.unpack(vb)
        ts = round(r.timestamp * 1000)
        left = r.topic == left_topic
        lo, hi = (ts - before_ms, ts + after_ms) if left else (ts - after_ms, ts + before_ms)
        for other_ts, others in sides[not left].get(kb, ()):
            if lo <= other_ts <= hi:
                for other in others:
                    out.append((kb, LONG.pack(value + LONG.unpack(other)[0]),
                                max(ts, other_ts) / 1000))
        mine = sides[left].setdefault(kb, [])
        while mine and mine[0][0] < ts - before_ms - after_ms:
            mine.pop(0)  # expired (retention: the join window)
        if mine and mine[-1][0] == ts:
            mine[-1][1].append(vb)
        else:
            mine.append((ts, [vb]))
        listed = b"".join(LEN.pack(len(v)) + v for v in mine[-1][1])
        log.append((kb + START.pack(ts + BIAS), listed))
    return step


def _st_join(store: FloorStore, table_topic: str) -> Step:
    def step(r: RawRecord, out: list[tuple[bytes, bytes, float]],
             log: list[tuple[bytes, bytes]]) -> None:
        kb, vb = r.key, r.value
        assert kb is not None and vb is not None
        kb.decode()
        (value,) = LONG.unpack(vb)
        ts = round(r.timestamp * 1000)
        if r.topic == table_topic:
            stamped = STAMPED.pack(ts, value)
            store.put(kb, (ts, value), stamped)
            log.append((kb, stamped))
            return
        row = store.get(kb)
        if row is not None:
            out.append((kb, LONG.pack(value + row[1]), r.timestamp))
    return step


def run_floor(case: str, broker: MemoryBroker, topics: tuple[str, ...], out_topic: str,
              state_dir: Path) -> tuple[float, float, int]:
    """Run ``case``'s floor over the records preloaded on ``broker``: its wall seconds, CPU
    seconds and input records."""
    store = FloorStore(state_dir / "floor.sqlite", windowed=case in ("tumbling", "hopping"))
    retention_ms: int | None = None
    step: Step
    if case == "count":
        step = _count(store)
    elif case == "tumbling":
        step, retention_ms = _windowed(store, 60_000, 60_000), 60_000
    elif case == "hopping":
        step, retention_ms = _windowed(store, 50_000, 10_000), 50_000
    elif case == "ss_join":
        step = _ss_join(1000, 1000, topics[0])
    elif case == "st_join":
        step = _st_join(store, topics[0])
    else:
        raise ValueError(f"no floor for case {case!r}")
    changelog = out_topic + "-changelog"
    broker.create_topic(changelog, 1)
    started, cpu_started = time.perf_counter(), time.process_time()
    out: list[tuple[bytes, bytes, float]] = []
    log: list[tuple[bytes, bytes]] = []
    done = max_ts = 0
    for record in merged(broker, topics):
        step(record, out, log)
        done += 1
        max_ts = max(max_ts, round(record.timestamp * 1000))
        if done % FLUSH_EVERY == 0:
            _flush(broker, store, out, log, out_topic, changelog, retention_ms, max_ts)
            out, log = [], []
    _flush(broker, store, out, log, out_topic, changelog, retention_ms, max_ts)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    store.db.close()
    return elapsed, cpu, done


def _flush(broker: MemoryBroker, store: FloorStore, out: list[tuple[bytes, bytes, float]],
           log: list[tuple[bytes, bytes]], out_topic: str, changelog: str,
           retention_ms: int | None, max_ts: int) -> None:
    store.flush(None if retention_ms is None else max_ts - retention_ms)
    broker.append((OutgoingRecord(out_topic, k, v, ts), 0) for k, v, ts in out)
    broker.append((OutgoingRecord(changelog, k, v, 0.0), 0) for k, v in log)


__all__ = ["FLUSH_EVERY", "FloorStore", "run_floor"]
