"""``stream.to_table()`` and re-grouped table aggregations, end to end on the memory broker:
what they emit, the repartition topic's wire format (Kafka's ChangedSerializer), build-time
errors, and state that continues exactly after the local state is deleted."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
from dslkit import In, make_app, produce, random_yields, run_app
from hypothesis import given
from hypothesis import strategies as st

from aiostreams import App, TopologyError
from aiostreams.processors.table_regroup import Change, ChangeSerde
from aiostreams.serde import LongSerde


def users_app(**settings: Any) -> tuple[App, Any, Any]:
    app = make_app(**settings)
    users = app.topic("users", key=str, value=str, partitions=2)
    counts = app.topic("per-region", key=str, value=int, partitions=2)
    return app, users, counts


async def test_regrouped_count_moves_a_row_from_its_old_group_to_its_new() -> None:
    app, users, counts = users_app()
    (app.table(users).group_by(lambda user, region: (region, user), key_serde=str,
                               value_serde=str)
     .count().to_stream().to(counts))
    produce(app, users, [In("u1", "eu", 1), In("u2", "eu", 2), In("u1", "us", 3),
                         In("u2", None, 4)])
    result = await run_app(app, [counts])
    by_region: dict[str, list[int]] = {}
    for region, n in result.pairs("per-region"):
        by_region.setdefault(region, []).append(n)
    # u1 leaves eu before it joins us; a delete leaves a group at 0, not deleted.
    assert by_region == {"eu": [1, 2, 1, 0], "us": [1]}


async def test_a_row_changing_within_its_group_sends_one_change() -> None:
    app = make_app()
    amounts = app.topic("amounts", key=str, value=int, partitions=1)
    totals = app.topic("totals", key=str, value=int, partitions=1)
    (app.table(amounts).group_by(lambda k, v: (k[0], v), key_serde=str, value_serde=int)
     .reduce(lambda agg, v: agg + v, lambda agg, v: agg - v).to_stream().to(totals))
    produce(app, amounts, [In("x1", 5, 1), In("x2", 7, 2), In("x1", 9, 3)])
    result = await run_app(app, [totals])
    # x1 5 -> 9 stays in group "x": one update 12 -> 16, no intermediate 7.
    assert result.pairs("totals") == [("x", 5), ("x", 12), ("x", 16)]


async def test_regrouped_aggregate_stamps_with_the_latest_timestamp() -> None:
    app = make_app()
    amounts = app.topic("amounts", key=str, value=int, partitions=1)
    totals = app.topic("totals", key=str, value=int, partitions=1)
    (app.table(amounts).group_by(lambda k, v: ("all", v), key_serde=str, value_serde=int)
     .aggregate(lambda: 0, lambda _k, v, agg: agg + v, lambda _k, v, agg: agg - v,
                value_serde=int).to_stream().to(totals))
    produce(app, amounts, [In("a", 1, 10.0), In("b", 2, 4.0)])
    result = await run_app(app, [totals])
    assert [(v, ts) for _, _, v, ts in result.outputs["totals"]] == [(1, 10.0), (3, 10.0)]


async def test_to_table_drops_null_keys_and_repartitions_a_key_changed_stream() -> None:
    app = make_app()
    events = app.topic("events", key=str, value=int, partitions=2)
    latest = app.topic("latest", key=str, value=int, partitions=2)
    (app.stream(events).select_key(lambda k, v: None if v < 0 else f"k{v % 2}")
     .to_table(materialized="latest-by-parity").to_stream().to(latest))
    produce(app, events, [In("a", 1), In("b", 2), In("c", -1), In("d", 3)])
    result = await run_app(app, [latest])
    assert sorted(result.pairs("latest")) == [("k0", 2), ("k1", 1), ("k1", 3)]
    assert result.stores["latest-by-parity"] == {"k0": 2, "k1": 3}
    assert any("repartition" in t for t in app.build()[-1].source_topics)


def test_change_serde_writes_kafkas_changed_serializer_bytes() -> None:
    serde = ChangeSerde(LongSerde())
    five, three = struct.pack(">q", 5), struct.pack(">q", 3)
    assert serde.serialize("t", Change(5, None)) == five + b"\x01"
    assert serde.serialize("t", Change(None, 3)) == three + b"\x00"
    # zig-zag varint of 8 is 0x10
    assert serde.serialize("t", Change(5, 3)) == b"\x10" + five + three + b"\x02"


@given(new=st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)),
       old=st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)))
def test_change_serde_round_trips_every_change(new: int | None, old: int | None) -> None:
    serde = ChangeSerde(LongSerde())
    if new is None and old is None:
        return
    assert serde.deserialize("t", serde.serialize("t", Change(new, old))) == Change(new, old)


def test_table_group_by_refuses_a_coroutine_selector() -> None:
    app, users, _ = users_app()

    async def selector(k: str, v: str) -> tuple[str, str]:
        return v, k

    with pytest.raises(TopologyError, match="group_by"):
        app.table(users).group_by(selector)


def regroup_app(name: str, broker: str, state: Path) -> tuple[App, Any, Any, Any]:
    """Per-region counts of a table built from a stream (``to_table``), persistent."""
    app = App(name, broker=broker, commit_interval_ms=5.0, poll_timeout=0.01,
              state_dir=state, max_in_flight=16)
    moves = app.topic("moves", key=str, value=str, partitions=2)
    counts = app.topic("per-region", key=str, value=int, partitions=2)
    latest = app.topic("latest", key=str, value=str, partitions=2)
    table = (app.stream(moves).map_values_async(random_yields(7))
             .to_table(materialized="where", persistent=True))
    table.to_stream().to(latest)
    (table.group_by(lambda user, region: (region, user), key_serde=str, value_serde=str)
     .count(materialized="region-counts", persistent=True).to_stream().to(counts))
    return app, moves, counts, latest


MOVES = [In(f"u{i % 5}", ["eu", "us", "ap", None][(i * 7) % 4], float(i)) for i in range(40)]


async def test_to_table_and_regrouped_count_continue_exactly_after_state_is_deleted(
        tmp_path: Path) -> None:
    whole, moves, counts, latest = regroup_app("whole", "memory://regroup-whole",
                                               tmp_path / "whole")
    produce(whole, moves, MOVES)
    expected = await run_app(whole, [counts, latest])

    state = tmp_path / "split"
    first, moves, counts, latest = regroup_app("split", "memory://regroup-split", state)
    produce(first, moves, MOVES[:20])
    await run_app(first, [counts, latest])
    shutil.rmtree(state)
    second, moves, counts, latest = regroup_app("split", "memory://regroup-split", state)
    produce(second, moves, MOVES[20:])
    result = await run_app(second, [counts, latest])

    for topic in ("per-region", "latest"):
        assert result.by_partition(topic) == expected.by_partition(topic), topic
    assert result.stores["region-counts"] == expected.stores["region-counts"]
    assert result.stores["where"] == expected.stores["where"]


def test_the_guides_regrouping_example_runs_and_prints_what_it_says(
        capsys: pytest.CaptureFixture[str]) -> None:
    guide = Path(__file__).parents[2] / "docs" / "guides" / "windows-joins.md"
    text = guide.read_text()
    start = text.index("```python", text.index("## Tables from streams"))
    code = text[start + len("```python"):text.index("```", start + 3)]
    expected = code.strip().splitlines()[-1].removeprefix("# ")
    exec(compile(code, str(guide), "exec"), {"__name__": "guide_example"})
    assert capsys.readouterr().out.strip() == expected
