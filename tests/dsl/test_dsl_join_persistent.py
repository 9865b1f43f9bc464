"""Stream-stream joins with ``persistent=True``: the records a join holds for its window
live in SQLite stores under ``state_dir`` (not in memory) and the join answers exactly as
the in-memory one, for inner, left and outer joins, with out-of-order records and windows
that close; the held records survive a restart from the store files."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from dslkit import In, make_app, produce, run_app
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiostreams import TopologyError
from aiostreams.windows import JoinWindows

IDLE = {"max_task_idle_ms": 100.0}
KINDS = ("join", "left_join", "outer_join")


def joined_app(kind: str, persistent: bool, state_dir: Path | None, name: str | None = None,
               ) -> tuple[Any, Any, Any, Any]:
    app = make_app(name, state_dir=state_dir, **IDLE)
    views = app.topic("views", key=str, value=str)
    clicks = app.topic("clicks", key=str, value=str)
    out = app.topic("joined", key=str, value="json")
    join = getattr(app.stream(views), kind)
    join(app.stream(clicks), lambda v, c: [v, c], JoinWindows.of(3.0, grace=5.0),
         persistent=persistent).to(out)
    return app, views, clicks, out


def sqlite_files(state_dir: Path) -> list[str]:
    """The stores' database files under ``state_dir`` (one directory per task)."""
    return sorted(p.stem for p in state_dir.glob("*/*.sqlite"))


side = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 40)), max_size=12)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(KINDS), views=side, clicks=side)
async def test_a_persistent_join_answers_as_the_in_memory_one(
        kind: str, views: list[tuple[str, int]], clicks: list[tuple[str, int]]) -> None:
    results = []
    with tempfile.TemporaryDirectory() as state_dir:
        for persistent in (False, True):
            app, v, c, out = joined_app(kind, persistent, Path(state_dir) if persistent
                                        else None)
            produce(app, v, [In(k, f"v{i}", float(t)) for i, (k, t) in enumerate(views)])
            # a late click closes every window (outer/left joins emit the unmatched)
            produce(app, c, [*(In(k, f"c{i}", float(t)) for i, (k, t) in enumerate(clicks)),
                             In("z", "closer", 1000.0)])
            result = await run_app(app, [out])
            results.append(result.outputs["joined"])
        # both sides' window stores (and an outer join's waiting records) were SQLite files
        files = sqlite_files(Path(state_dir))
        assert len(files) == (2 if kind == "join" else 3), files
    assert results[0] == results[1]


async def test_a_persistent_joins_held_records_survive_a_restart(tmp_path: Path) -> None:
    """A view held before a clean stop joins a click that comes after the restart: the
    second run reads it from the store files under state_dir."""
    name = "persistent-join-restart"
    app, views, clicks, out = joined_app("join", True, tmp_path, name)
    produce(app, views, [In("a", "v1", 10.0)])
    produce(app, clicks, [])  # the topic, empty
    first = await run_app(app, [out])
    assert first.outputs["joined"] == []
    assert len(sqlite_files(tmp_path)) == 2  # the two sides' window stores
    again, _, clicks_again, out_again = joined_app("join", True, tmp_path, name)
    again.settings.broker = app.settings.broker  # the same memory broker: the same topics
    produce(again, clicks_again, [In("a", "c1", 11.0)])
    second = await run_app(again, [out_again])
    assert [value for _, _, value, _ in second.outputs["joined"]] == [["v1", "c1"]]


def test_persistent_is_refused_for_a_stream_table_join() -> None:
    app = make_app()
    orders = app.topic("orders", key=str, value=str)
    customers = app.topic("customers", key=str, value=str)
    with pytest.raises(TopologyError, match="persistent= is for stream-stream joins"):
        app.stream(orders).join(app.table(customers), lambda o, c: o,
                                persistent=True)  # type: ignore[call-overload]
