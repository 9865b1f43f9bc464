"""Where aiostreams differs from Kafka Streams 4.4.0 (java/pom.xml) on purpose: the ONE list.

Each entry names the Kafka setting behind the difference; the oracle runs with
``oracle_config`` (so the differential suite compares semantics, not the setting), and
``test_oracle_deviations.py`` shows, for each entry, that Kafka with its default differs
from aiostreams on ``case`` while Kafka with ``oracle_config`` agrees. The same list is in
``docs/guides/windows-joins.md`` ("Differences from Kafka Streams").

An entry without a setting (``kafka_default`` and ``oracle_config`` ``None``) differs only
under races Kafka's ``TopologyTestDriver`` never produces (it finishes each input's cascade
before the next): its ``case`` marks the inputs that race the next one (``"racing"``), and
the test shows that aiostreams agrees with Kafka on ``case`` processed serially, and ends,
raced, at the same final table, where Kafka on a broker keeps the entry's stale result
(``what``; not reproducible in its driver).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Deviation:
    name: str
    what: str
    why: str
    kafka_default: dict[str, str] | None
    oracle_config: dict[str, str] | None
    case: dict[str, Any]


def _left_join_case() -> dict[str, Any]:
    # a@0 and b@10 find no match; each later record closes the window of the one before
    inputs = [("in", "a", 1, 0), ("in", "b", 2, 10000), ("in", "c", 3, 20000),
              ("in2", "a", 5, 40000), ("in", "a", 6, 38000)]
    return {"id": "deviation", "outputs": ["out"],
            "ops": [{"op": "stream", "id": "l", "topic": "in"},
                    {"op": "stream", "id": "r", "topic": "in2"},
                    {"op": "left_join", "id": "j", "from": "l", "other": "r",
                     "before": 1000, "after": 1000, "grace": 0},
                    {"op": "to", "from": "j", "topic": "out"}],
            "inputs": [{"topic": t, "key": k, "value": v, "ts": ts}
                       for t, k, v, ts in inputs]}


def _fk_join_case() -> dict[str, Any]:
    # issue 32: o1 joins f0's row, then at once leaves it for no foreign key (-1) and for
    # f2, which has no row (foreign(v, 3) is f<v mod 3>, none for a negative v)
    inputs = [("rin", "f0", 1, 0, False), ("lin", "o1", 0, 1, False),
              ("lin", "o1", -1, 2, True), ("lin", "o1", 2, 3, False)]
    return {"id": "deviation", "outputs": ["out"], "step": True,
            "ops": [{"op": "table", "id": "l", "topic": "lin"},
                    {"op": "table", "id": "r", "topic": "rin"},
                    {"op": "fk_join", "id": "j", "from": "l", "other": "r", "n": 3},
                    {"op": "to_stream", "id": "changes", "from": "j"},
                    {"op": "to", "from": "changes", "topic": "out"}],
            "inputs": [{"topic": t, "key": k, "value": v, "ts": ts, "racing": racing}
                       for t, k, v, ts, racing in inputs]}


def _cached_session_case() -> dict[str, Any]:
    # b@2 s moves the store's time to 2 s: a's session [0, 0] falls out of its retention
    # (gap 2 s + grace 0) just as a@2 s, exactly a gap after it, could still join it
    inputs = [("a", 1, 0), ("b", 1, 2000), ("a", 1, 2000)]
    return {"id": "deviation", "outputs": ["out"],
            "ops": [{"op": "stream", "id": "in", "topic": "in"},
                    {"op": "group_by_key", "id": "g", "from": "in", "n": 1},
                    {"op": "windowed_by", "id": "w", "from": "g", "windows": "session",
                     "gap": 2000, "grace": 0},
                    {"op": "count", "id": "agg", "from": "w", "init": 0},
                    {"op": "to_stream", "id": "changes", "from": "agg"},
                    {"op": "to", "from": "changes", "topic": "out"}],
            "inputs": [{"topic": "in", "key": k, "value": v, "ts": ts}
                       for k, v, ts in inputs]}


CACHE_BYTES = "statestore.cache.max.bytes"

EMIT_INTERVAL = "__emit.interval.ms.kstreams.outer.join.spurious.results.fix__"

DEVIATIONS = [
    Deviation(
        name="non-joined results are not throttled by wall-clock time",
        what=("A left/outer stream-stream join emits a non-joined record as soon as stream "
              "time closes its window. Kafka Streams checks for closed windows at most once "
              "per internal emit interval of wall-clock time (1 s), so which records it "
              "emits when depends on how fast it runs; in TopologyTestDriver, whose wall "
              "clock stands still, it may emit none."),
        why=("Results must not depend on wall-clock time: aiostreams' outputs are the same "
             "for every completion order and speed. Kafka with the interval at 0 gives "
             "aiostreams' results."),
        kafka_default={EMIT_INTERVAL: "1000"},
        oracle_config={EMIT_INTERVAL: "0"},
        case=_left_join_case(),
    ),
    Deviation(
        name="a foreign-key join converges under every interleaving",
        what=("An inner foreign-key join whose left row changes again before the answer to "
              "its previous change comes back: Kafka Streams drops that answer as stale "
              "(value-hash check) and sends no answer at all for a foreign key without a "
              "right row (PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE) nor for a change between two "
              "null foreign keys, so a result it emitted earlier can stay forever (issue "
              "32: o1 -> c06|x+A kept after o1 -> none|y, c03|z on a broker). aiostreams "
              "answers the first with a retraction and makes the second retract locally, "
              "each applied only while the join holds a result for the key."),
        why=("The joined table must be the join of the final tables whatever the "
             "interleaving of the two sides and the internal topics (a race Kafka's "
             "TopologyTestDriver never produces, so it has no setting here). Processed "
             "one input at a time the join never holds a result in those cases, so the "
             "retractions find nothing and the output is Kafka's record for record."),
        kafka_default=None,
        oracle_config=None,
        case=_fk_join_case(),
    ),
    Deviation(
        name="a record cache never shows a window past its store's retention",
        what=("With its record cache on (10 MB by default), Kafka Streams' session and "
              "window stores answer a range read from the cache too, and the cache keeps "
              "entries after a flush; the store below hides windows past its retention, "
              "the cache does not. So a record can merge with a session (or find a sliding "
              "window) that the same run without the cache had already forgotten: "
              "a@0, b@2 s, a@2 s with gap 2 s and no grace makes [0, 2 s] with the cache, "
              "[2 s, 2 s] without."),
        why=("A cache must not change results: aiostreams hides a window past the store's "
             "retention whether the cache holds it or not (with ``cache_max_bytes`` set "
             "the final tables equal the uncached run's), which is Kafka's result with "
             "its cache off. They can differ only for a record about the grace period or more "
             "behind stream time (with no grace, any record)."),
        kafka_default={CACHE_BYTES: str(10 * 1024 * 1024)},
        oracle_config={CACHE_BYTES: "0"},
        case=_cached_session_case(),
    ),
]
