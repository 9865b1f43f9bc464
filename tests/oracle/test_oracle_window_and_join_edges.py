"""Window and join edges found wrong once (session merges and tombstones, window stamps,
null keys in a left join, per-window stream time), each its own case: Kafka Streams' output
is pinned, and aiostreams must give it byte for byte for every max_in_flight and
ordering, with an async step completing in a random order in front."""

from __future__ import annotations

from typing import Any

import pytest
from oracle_check import check, describe, oracle_outputs, prepare
from oracle_jvm import OracleJVM

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(600)]

RUNS = [(n, o) for n in (1, 7, 64, 1024) for o in ("key", "partition")]


def aggregate(windows: dict[str, Any], inputs: list[tuple[str | None, int, int]],
              kind: str = "count") -> dict[str, Any]:
    return {"id": "window-and-join-edges", "outputs": ["out"],
            "inputs": [{"topic": "in", "key": k, "value": v, "ts": ts} for k, v, ts in inputs],
            "ops": [{"op": "stream", "id": "in", "topic": "in"},
                    {"op": "group_by_key", "id": "g", "from": "in"},
                    {"op": "windowed_by", "id": "w", "from": "g", **windows},
                    {"op": kind, "id": "agg", "from": "w"},
                    {"op": "to_stream", "id": "changes", "from": "agg"},
                    {"op": "to", "from": "changes", "topic": "out"}]}


def expect(oracle: OracleJVM, case: dict[str, Any], stated: str) -> None:
    """Kafka Streams gives what the issue states, and aiostreams gives the same under every
    concurrency setting."""
    assert describe(oracle_outputs(oracle, prepare(case))["out"]) == stated
    for seed, (max_in_flight, ordering) in enumerate(RUNS):
        check(oracle, "window-and-join-edges", case, max_in_flight=max_in_flight, ordering=ordering,
              seed=seed)


SESSION = {"windows": "session", "gap": 5000, "grace": 2000}


def test_a_closed_session_is_never_extended(oracle: OracleJVM) -> None:
    # item 1: x@12, y@20, x@14; 12 + 5 + 2 <= 20, so x@14 opens a session of its own
    expect(oracle, aggregate(SESSION, [("x", 1, 12000), ("y", 1, 20000), ("x", 1, 14000)]),
           "x[12000,12000]=1@12000, y[20000,20000]=1@20000, x[14000,14000]=1@14000")


def test_a_window_update_is_stamped_with_its_latest_record(oracle: OracleJVM) -> None:
    # item 4: a@14.999, a@10.001 in one window: the second update is stamped 14.999
    tumbling = {"windows": "time", "size": 10000, "advance": 10000, "grace": 10000}
    expect(oracle, aggregate(tumbling, [("a", 1, 14999), ("a", 1, 10001)]),
           "a[10000]=1@14999, a[10000]=2@14999")


def test_a_merged_session_tombstone_is_stamped_with_its_end(oracle: OracleJVM) -> None:
    # item 4: y@8, y@10: the tombstone of y[8,8] is stamped 8, the merged session 10
    expect(oracle, aggregate(SESSION, [("y", 1, 8000), ("y", 1, 10000)]),
           "y[8000,8000]=1@8000, y[8000,8000]=null@8000, y[10000,8000]=2@10000")


def test_a_same_time_session_merge_emits_no_tombstone(oracle: OracleJVM) -> None:
    # item 4: x@1, x@1 gives 1, 2 (no tombstone in between)
    expect(oracle, aggregate(SESSION, [("x", 1, 1000), ("x", 1, 1000)]),
           "x[1000,1000]=1@1000, x[1000,1000]=2@1000")


def test_a_null_key_survives_a_stream_table_left_join(oracle: OracleJVM) -> None:
    # item 5 (KIP-962): the null-key record is joined with a null table side
    case = {"id": "window-and-join-edges", "outputs": ["out"],
            "ops": [{"op": "stream", "id": "s", "topic": "in"},
                    {"op": "table", "id": "t", "topic": "tin"},
                    {"op": "left_join", "id": "j", "from": "s", "other": "t"},
                    {"op": "to", "from": "j", "topic": "out"}],
            "inputs": [{"topic": "tin", "key": "a", "value": 7, "ts": 0},
                       {"topic": "in", "key": None, "value": 3, "ts": 1},
                       {"topic": "in", "key": "a", "value": 4, "ts": 2}]}
    expect(oracle, case, "null=2999@1, a=4007@2")


def test_stream_time_of_a_window_counts_only_the_records_reaching_it(
        oracle: OracleJVM) -> None:
    # item 6: b@100 is filtered out before the window, so a@1 is not late for it
    tumbling = {"windows": "time", "size": 10000, "advance": 10000, "grace": 0}
    case = aggregate(tumbling, [("b", 1, 100000), ("a", 2, 1000)])
    case["ops"].insert(1, {"op": "filter", "id": "f", "from": "in", "m": 2, "r": 0})
    case["ops"][2]["from"] = "f"
    expect(oracle, case, "a[0]=1@1000")
