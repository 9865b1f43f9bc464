"""Where aiostreams differs from Kafka Streams 3.9.1 on purpose: the ONE list.

Each entry names the Kafka setting behind the difference; the oracle runs with
``oracle_config`` (so the differential suite compares semantics, not the setting), and
``test_oracle_deviations.py`` shows, for each entry, that Kafka with its default differs
from aiostreams on ``case`` while Kafka with ``oracle_config`` agrees. The same list is in
``docs/guides/windows-joins.md`` ("Differences from Kafka Streams").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Deviation:
    name: str
    what: str
    why: str
    kafka_default: dict[str, str]
    oracle_config: dict[str, str]
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
]
