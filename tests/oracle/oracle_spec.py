"""The oracle's topology vocabulary, and its aiostreams side.

A *case* is ``{"id", "ops", "inputs", "outputs"}``. ``ops`` is a list of statements run in
order; each names its result ``id`` and most read a variable ``from``. Keys are strings or
null (StringSerde), values longs or null (LongSerde). The named functions below are the only
functions a spec can use; ``java/Oracle.java`` implements the same ones.

==================  ============================================================
op                  meaning (``v`` the value; ``None`` stays ``None`` unless said)
==================  ============================================================
stream / table      ``topic``: a source stream / a (materialized) source table; a
                    table with ``versioned`` (history retention, ms) is versioned
filter              keep ``pick(v, m, r)`` (``not``: drop them); stream or table
map_values          ``affine(v, a, b)``; stream or table
select_key          key ``bucket("k", v, n)``
map                 ``(bucket("k", v, n), affine(v, a, b))``
flat_map_values     ``copies(v, n)``
merge               ``from`` and ``other``
branch              ``<id>_0``: records with ``pick(v, m, r)``; ``<id>_1``: the rest
group_by_key        group (repartitions after a key change)
group_by            group by ``bucket("g", v, n)``; a table: rows re-grouped to
                    ``(bucket("g", v, n), affine(v, a, b))``
to_table            a stream as a table (``toTable``)
cogroup             from a grouped stream: aggregate by ``total(agg, v)``; from a cogroup,
                    add ``other`` (grouped) by ``total(agg, affine(v, a, b))``
windowed_by         (of a grouped stream or a cogroup; a cogroup: time windows only)
                    ``windows``: tumbling (``size``) / hopping (``size``, ``advance``) /
                    session (``gap``) / sliding (``diff``), with ``grace`` (all ms)
                    ``emit: "on_window_close"`` (not of a cogroup): final results only
count/reduce/...    ``count``; ``reduce``: ``total``; ``aggregate``: from ``init`` by
                    ``total`` (sessions merge by ``total``; a grouped table subtracts
                    by ``minus``)
suppress            ``until``: ``window_closes`` / ``time_limit`` (``wait`` ms), with
                    ``max_records`` and ``when_full`` (``emit_early``/``shut_down``)
to_stream, to       a table's updates as a stream; write a stream to ``topic``
join/left_join/     stream-stream (``before``, ``after``, ``grace`` ms), stream-table or
outer_join          table-table, by the kinds of ``from`` and ``other``; ``joined(l, r)``;
                    stream-table with ``grace`` (ms): KIP-923's buffered join
global_table        ``topic`` as a global table (replicated, not partitioned)
join_global/        stream ``from`` with global table ``other`` on key
left_join_global    ``bucket("g", v, n)``, by ``joined(l, r)``
fk_join/            foreign-key table-table join (KIP-213) of table ``from`` with table
fk_left_join        ``other`` on ``foreign(v, n)``, by ``joined(l, r)``
==================  ============================================================
"""

from __future__ import annotations

import asyncio
import random
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiostreams import App, Versioned
from aiostreams.dsl.builder import Stream, Table
from aiostreams.dsl.cogrouped import CogroupedStream, TimeWindowedCogroupedStream
from aiostreams.dsl.grouped_table import GroupedTable
from aiostreams.testing.driver import TopologyTestDriver
from aiostreams.windows import (
    HoppingWindows,
    JoinWindows,
    SessionWindowedSerde,
    SessionWindows,
    SlidingWindows,
    TimeWindowedSerde,
    TumblingWindows,
    until_time_limit,
    until_window_closes,
)

Case = dict[str, Any]
IDLE_MS = 60_000.0
Out = dict[str, Any]
STATEFUL = {"table", "cogroup", "suppress", "to_table", "group_by_key", "group_by", "windowed_by",
            "count", "reduce", "aggregate", "join", "left_join", "outer_join", "fk_join",
            "fk_left_join"}

# -- the named functions (Oracle.java has the same) ------------------------------------------


def pick(v: int | None, m: int, r: int) -> bool:
    return v is not None and v % m == r


def affine(v: int | None, a: int, b: int) -> int | None:
    return None if v is None else v * a + b


def bucket(prefix: str, v: int | None, n: int) -> str | None:
    return None if v is None else f"{prefix}{v % n}"


def joined(left: int | None, right: int | None) -> int:
    return (-1 if left is None else left) * 1000 + (-1 if right is None else right)


def total(a: int | None, b: int | None) -> int:
    """Null-safe sum: windowed aggregations hand null values to the aggregator."""
    return (0 if a is None else a) + (0 if b is None else b)


def minus(a: int | None, b: int | None) -> int:
    """Null-safe difference: the subtractor of a re-grouped table's aggregation."""
    return (0 if a is None else a) - (0 if b is None else b)


def foreign(v: int | None, n: int) -> str | None:
    """The foreign key of a left value: ``f<v mod n>``, none for a negative value."""
    return None if v is None or v < 0 else f"f{v % n}"


def copies(v: int | None, n: int) -> list[int]:
    return [] if v is None else [v + i for i in range(n)]


# -- wire formats ------------------------------------------------------------------------------


def key_bytes(key: str | None) -> bytes | None:
    return None if key is None else key.encode()


def value_bytes(value: int | None) -> bytes | None:
    return None if value is None else struct.pack(">q", value)


def stateless(case: Case) -> bool:
    """Whether every op of ``case`` is stateless (``ordering="unordered"`` allowed)."""
    return not any(op["op"] in STATEFUL for op in case["ops"])


def input_topics(case: Case) -> list[str]:
    return list(dict.fromkeys(r["topic"] for r in case["inputs"]))


# -- building the aiostreams app -----------------------------------------------------------


@dataclass
class Var:
    value: Any
    windowing: str = ""  # "", "time" or "session"
    size_ms: int = 0  # of time windows


def random_yields(seed: int, limit: int = 12) -> Callable[[Any], Any]:
    """An async identity awaiting a seeded-random number of loop turns per call."""
    rng = random.Random(seed)

    async def step(value: Any) -> Any:
        for _ in range(rng.randint(0, limit)):
            await asyncio.sleep(0)
        return value

    return step


def windowed_serde(windowing: str, size_ms: int) -> TimeWindowedSerde | SessionWindowedSerde:
    """aiostreams' serde for the windowed keys of a ``time`` or ``session`` aggregate."""
    if windowing == "session":
        return SessionWindowedSerde(str)
    return TimeWindowedSerde(str, size=size_ms / 1000)


def build(app: App, case: Case, seed: int | None) -> None:
    """Declare ``case``'s topology on ``app``; an async identity step with seeded random
    completion order follows every stream source when ``seed`` is given."""
    sources = {op["topic"] for op in case["ops"]
               if op["op"] in ("stream", "table", "global_table")}
    for name in sorted(sources):
        app.topic(name, key=str, value=int, partitions=1)
    env: dict[str, Var] = {}
    for op in case["ops"]:
        _apply(app, env, op, seed)


def _apply(app: App, env: dict[str, Var], op: dict[str, Any], seed: int | None) -> None:
    kind, ident = op["op"], op.get("id", "")
    var = env.get(op.get("from", ""))
    src: Any = var.value if var is not None else None
    windowing = var.windowing if var is not None else ""
    size_ms = var.size_ms if var is not None else 0
    m, r, a, b, n = (op.get(x, d) for x, d in
                     (("m", 1), ("r", 0), ("a", 1), ("b", 0), ("n", 1)))
    result: Any
    if kind == "stream":
        result = app.stream(op["topic"])
        if seed is not None:
            result = result.map_values_async(random_yields(seed + len(env)))
    elif kind == "table" and "versioned" in op:
        result = app.table(op["topic"], materialized=f"table-{ident}",
                           versioned=Versioned(op["versioned"] / 1000))
    elif kind == "table":
        result = app.table(op["topic"], materialized=f"table-{ident}")
    elif kind == "filter":
        keep = not op.get("not", False)
        result = src.filter(lambda k, v: pick(v, m, r) is keep)
    elif kind == "map_values":
        result = src.map_values(lambda v: affine(v, a, b))
    elif kind == "select_key":
        result = src.select_key(lambda k, v: bucket("k", v, n))
    elif kind == "map":
        result = src.map(lambda k, v: (bucket("k", v, n), affine(v, a, b)))
    elif kind == "flat_map_values":
        result = src.flat_map_values(lambda v: copies(v, n))
    elif kind == "merge":
        result = src.merge(env[op["other"]].value)
    elif kind == "branch":
        branches = src.split(name=f"{ident}_").branch(
            lambda k, v: pick(v, m, r), name="0").default_branch(name="1")
        env[f"{ident}_0"] = Var(branches[f"{ident}_0"])
        env[f"{ident}_1"] = Var(branches[f"{ident}_1"])
        return
    elif kind == "group_by_key":
        result = src.group_by_key(key_serde=str, value_serde=int)
    elif kind == "group_by" and isinstance(src, Table):
        result = src.group_by(lambda k, v: (bucket("g", v, n), affine(v, a, b)),
                              key_serde=str, value_serde=int)
        windowing = ""  # re-grouped by a bucket of the values: plain keys, windowed or not
    elif kind == "group_by":
        result = src.group_by(lambda k, v: bucket("g", v, n), key_serde=str, value_serde=int)
    elif kind == "to_table":
        result = src.to_table()
    elif kind == "cogroup" and isinstance(src, CogroupedStream):
        result = src.cogroup(env[op["other"]].value,
                             lambda k, v, agg: total(agg, affine(v, a, b)))
    elif kind == "cogroup":
        result = src.cogroup(lambda k, v, agg: total(agg, v))
    elif kind == "windowed_by":
        grace = op["grace"] / 1000
        if op["windows"] == "session":
            windowing = "session"
            result = src.windowed_by(SessionWindows(op["gap"] / 1000, grace=grace))
            if op.get("emit") == "on_window_close":
                result = result.emit_on_window_close()
        elif op["windows"] == "sliding":
            windowing, size_ms = "time", op["diff"]
            result = src.windowed_by(
                SlidingWindows.of_time_difference_and_grace(op["diff"] / 1000, grace))
            if op.get("emit") == "on_window_close":
                result = result.emit_on_window_close()
        else:
            windowing = "time"
            size_ms = op["size"]
            size = op["size"] / 1000
            advance = op.get("advance", op["size"]) / 1000
            result = src.windowed_by(
                TumblingWindows(size, grace=grace) if advance == size
                else HoppingWindows(size, advance, grace=grace))
            if op.get("emit") == "on_window_close":
                result = result.emit_on_window_close()
    elif kind == "count":
        result = src.count()
    elif kind == "reduce" and isinstance(src, GroupedTable):
        result = src.reduce(total, minus, value_serde=int)
    elif kind == "reduce":
        result = src.reduce(total, value_serde=int)
    elif kind == "aggregate" and isinstance(src, (CogroupedStream,
                                                   TimeWindowedCogroupedStream)):
        init = op.get("init", 0)
        result = src.aggregate(lambda: init, value_serde=int)
    elif kind == "aggregate" and isinstance(src, GroupedTable):
        init = op.get("init", 0)
        result = src.aggregate(lambda: init, lambda k, v, agg: total(agg, v),
                               lambda k, v, agg: minus(agg, v), value_serde=int)
    elif kind == "aggregate":
        init = op.get("init", 0)
        if windowing == "session":
            result = src.aggregate(lambda: init, lambda k, v, agg: total(agg, v),
                                   lambda k, x, y: total(x, y), value_serde=int)
        else:
            result = src.aggregate(lambda: init, lambda k, v, agg: total(agg, v),
                                   value_serde=int)
    elif kind == "suppress":
        limit = op.get("max_records")
        if op["until"] == "window_closes":
            result = src.suppress(until_window_closes(max_records=limit))
        else:
            result = src.suppress(until_time_limit(
                op["wait"] / 1000, max_records=limit,
                when_full=op.get("when_full", "emit_early")))
    elif kind == "to_stream":
        result = src.to_stream()
    elif kind == "to":
        key = windowed_serde(windowing, size_ms) if windowing else str
        src.to(app.topic(op["topic"], key=key, value=int, partitions=1))
        return
    elif kind == "global_table":
        result = app.global_table(op["topic"])
    elif kind in ("join_global", "left_join_global"):
        method = src.join_global if kind == "join_global" else src.left_join_global
        result = method(env[op["other"]].value, lambda k, v: bucket("g", v, n), joined)
    elif kind in ("fk_join", "fk_left_join"):
        other = env[op["other"]].value
        method = (src.join_on_foreign_key if kind == "fk_join"
                  else src.left_join_on_foreign_key)
        result = method(other, lambda v: foreign(v, n), joined, value_serde=int)
    elif kind in ("join", "left_join", "outer_join"):
        other = env[op["other"]].value
        method = getattr(src, kind)
        if isinstance(src, Stream) and isinstance(other, Stream):
            windows = JoinWindows(op["before"] / 1000, op["after"] / 1000,
                                  grace=op["grace"] / 1000)
            result = method(other, joined, windows)
        else:
            assert isinstance(other, Table)
            grace = op.get("grace")
            result = (method(other, joined) if grace is None
                      else method(other, joined, grace=grace / 1000))
    else:
        raise ValueError(f"unknown op {kind!r} in an oracle spec")
    env[ident] = Var(result, windowing, size_ms)


# -- running a case in aiostreams' TopologyTestDriver ------------------------------------------


def chooser_order(case: Case, source_order: list[str]) -> list[dict[str, Any]]:
    """``case``'s inputs in the order one task processes them when all are buffered: the
    head with the smallest timestamp first, ties to the topic listed first
    (``source_order``), each topic's own records in their order. The oracle is fed this
    order, as Kafka's driver processes each record when it is piped."""
    queues: dict[str, list[dict[str, Any]]] = {}
    for record in case["inputs"]:
        queues.setdefault(record["topic"], []).append(record)
    rank = {t: i for i, t in enumerate(source_order)}
    heads = {t: 0 for t in queues}
    ordered: list[dict[str, Any]] = []
    while len(ordered) < len(case["inputs"]):
        best = min((t for t in queues if heads[t] < len(queues[t])),
                   key=lambda t: (queues[t][heads[t]]["ts"], rank.get(t, len(rank))))
        ordered.append(queues[best][heads[best]])
        heads[best] += 1
    return ordered


def task_source_order(case: Case) -> list[str]:
    """The input topics of ``case`` in the order aiostreams' task lists them."""
    app = App(f"order-{uuid.uuid4().hex[:8]}", broker=f"memory://{uuid.uuid4().hex}")
    build(app, case, None)
    order: list[str] = []
    for sub in app.build():
        order.extend(t for t in sub.source_topics if t not in order)
    return order


async def run_aiostreams(case: Case, *, max_in_flight: int, ordering: str,
                         seed: int | None) -> dict[str, list[Out]]:
    """Run ``case`` through aiostreams' driver (all inputs piped, then processed; with
    ``"step": true``, each input processed to the end before the next is piped, as Kafka's
    driver does) and return each output topic's records as the oracle prints them.

    Step mode is for topologies whose sub-topologies talk both ways through internal
    topics (foreign-key joins): piped all at once, a task would merge an internal topic
    with an input topic by timestamp, an interleaving Kafka's driver never produces (it
    finishes each piped record's cascade first); the join's final results agree, its
    intermediate updates need not. An input marked ``"racing"`` is not processed before
    the next is piped (a deviation's race, see ``deviations.py``; Kafka's driver ignores
    the mark)."""
    several = len(input_topics(case)) > 1 and not case.get("step")
    # With several input topics, a task must wait for all of them to be buffered before it
    # chooses (the chooser_order the oracle is fed); the idle wait is then ended by moving
    # the driver's clock past it.
    app = App(f"oracle-{uuid.uuid4().hex[:8]}", broker=f"memory://{uuid.uuid4().hex}",
              max_in_flight=max_in_flight, ordering=ordering, default_partitions=1,
              max_task_idle_ms=IDLE_MS if several else 0.0)
    build(app, case, seed)
    async with TopologyTestDriver(app) as driver:
        for record in case["inputs"]:
            driver.pipe_raw_input(record["topic"], key_bytes(record["key"]),
                                  value_bytes(record["value"]), record["ts"] / 1000,
                                  headers=tuple((h, bytes.fromhex(x))
                                                for h, x in record.get("headers", [])))
            if case.get("step") and not record.get("racing"):
                await driver.process_all()
        await driver.process_all()
        if several:
            for _ in range(len(case["inputs"])):
                await driver.advance_wall_clock(IDLE_MS / 1000)
        return {topic: [_out(raw) for raw in driver.read_raw_output(topic)]
                for topic in case["outputs"]}


def _out(raw: Any) -> Out:
    return {"k": None if raw.key is None else raw.key.hex(),
            "v": None if raw.value is None else raw.value.hex(),
            "ts": round(raw.timestamp * 1000),
            "h": [[name, None if value is None else value.hex()]
                  for name, value in raw.headers]}
