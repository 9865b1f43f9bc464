"""Sliding and session aggregates on persistent (SQLite) state, many records in flight,
stopped at any record, their local state deleted and restored from the changelog: every
window's results are those of one uninterrupted run on in-memory state (and, for sliding
windows emitted on close, the true count of the records each window holds).

A store read that awaits I/O (SQLite) while an earlier record of the same key retires must
still see that record's write: a lost write counted sliding windows too low or too high and
merged a session with its own older copy (counts 2^n - 1).
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import tempfile
from pathlib import Path
from typing import Any

from dslkit import In, produce, run_app
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiostreams import App
from aiostreams.windows import (
    SessionWindowedSerde,
    SessionWindows,
    SlidingWindows,
    TimeWindowedSerde,
)

DIFFERENCE_MS = 3000
GRACE_MS = 1000
_apps = itertools.count()


def window_app(n: int, state: Path, kind: str, final: bool,
               persistent: bool) -> tuple[App, Any, Any]:
    """Counts per key in sliding windows (3 s, grace 1 s) or sessions (gap 2 s, grace
    1 s), emitted on window close when ``final``, else on every update; app ``n`` (one
    broker per ``n``)."""
    app = App(f"restart{n}", broker=f"memory://window-restart-{n}", commit_interval_ms=5.0,
              poll_timeout=0.01, state_dir=state, max_in_flight=16)
    clicks = app.topic("clicks", key=str, value=int, partitions=2)
    grouped = app.stream(clicks).group_by_key()
    if kind == "session":
        out = app.topic("counts", key=SessionWindowedSerde(str), value=int, partitions=2)
        windowed: Any = grouped.windowed_by(SessionWindows(2.0, grace=GRACE_MS / 1000))
    else:
        out = app.topic("counts", key=TimeWindowedSerde(str, size=DIFFERENCE_MS / 1000),
                        value=int, partitions=2)
        windowed = grouped.windowed_by(SlidingWindows.of_time_difference_and_grace(
            DIFFERENCE_MS / 1000, GRACE_MS / 1000))
    if final:
        windowed = windowed.emit_on_window_close()
    windowed.count(materialized="counts", persistent=persistent).to_stream().to(out)
    return app, clicks, out


Outputs = dict[str, list[tuple[float, float, int | None]]]


def per_key(run: Any) -> Outputs:
    """Each key's outputs in order: (window start, window end, count)."""
    got: Outputs = {}
    for _, window, count, _ in run.outputs["counts"]:
        got.setdefault(window.key, []).append((window.start, window.end, count))
    return got


async def uninterrupted(records: list[In], kind: str, final: bool, persistent: bool,
                        state: Path) -> Outputs:
    app, clicks, out = window_app(next(_apps), state, kind, final, persistent)
    produce(app, clicks, records)
    return per_key(await run_app(app, [out], timeout=60))


async def restarted(records: list[In], stop_at: int, kind: str, final: bool,
                    state: Path) -> Outputs:
    """Run ``records[:stop_at]``, stop, delete the local state, run the rest on a new
    instance of the same app (same broker, so it restores from the changelogs); the
    outputs of both runs."""
    n = next(_apps)
    first, clicks, out = window_app(n, state, kind, final, persistent=True)
    produce(first, clicks, records[:stop_at])
    await run_app(first, [out], timeout=60)
    shutil.rmtree(state, ignore_errors=True)
    second, clicks, out = window_app(n, state, kind, final, persistent=True)
    produce(second, clicks, records[stop_at:])
    return per_key(await run_app(second, [out], timeout=60))


def true_sliding_counts(records: list[In]) -> dict[tuple[str, int], int]:
    """Every sliding window's count by definition: each record's left window [t - d, t]
    and right window [t + 1, t + 1 + d], both ends inclusive."""
    times: dict[str, list[int]] = {}
    for r in records:
        times.setdefault(r.key, []).append(round(r.ts * 1000))
    counts: dict[tuple[str, int], int] = {}
    for key, ts in times.items():
        for t in ts:
            for start in (t - DIFFERENCE_MS, t + 1):
                n = sum(start <= u <= start + DIFFERENCE_MS for u in ts)
                if n:
                    counts[(key, start)] = n
    return counts


@st.composite
def clicks(draw: st.DrawFn) -> list[In]:
    """Three keys; gaps of 0-1.5 s with pauses of 6 s (windows and sessions close); some
    records out of order by up to the grace period."""
    records: list[In] = []
    now = 10_000
    for i in range(draw(st.integers(20, 40))):
        now += draw(st.sampled_from([0, 50, 300, 700, 1500, 6000]))
        late = draw(st.sampled_from([0, 0, 0, 400, GRACE_MS]))
        records.append(In(draw(st.sampled_from(["a", "b", "c"])), i, (now - late) / 1000))
    return records


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(records=clicks(), cut=st.floats(0.0, 1.0), kind=st.sampled_from(["sliding", "session"]),
       final=st.booleans())
def test_window_results_after_a_restart_with_state_deleted_match_one_in_memory_run(
        records: list[In], cut: float, kind: str, final: bool) -> None:
    stop_at = round(cut * len(records))

    async def both() -> tuple[Outputs, Outputs]:
        tmp = Path(tempfile.mkdtemp())
        try:
            expected = await uninterrupted(records, kind, final, False, tmp / "memory")
            got = await restarted(records, stop_at, kind, final, tmp / "sqlite")
            return expected, got
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    expected, got = asyncio.run(both())
    assert got == expected
    if kind == "sliding" and final:
        truth = true_sliding_counts(records)
        assert all(truth[(key, round(start * 1000))] == count
                   for key, windows in got.items() for start, _, count in windows)


async def test_a_restarted_session_aggregate_still_hides_sessions_past_its_retention(
        tmp_path: Path) -> None:
    """The store's time survives a restart (restored with its contents): a@16.5 is past
    the store's retention (3 s) once a@20 is written, so a@17.5 (not late: stream time
    20 - grace - gap = 17) starts a session of its own instead of merging with it - after a
    restart between a@20 and a@17.5 as in one run."""
    records = [In("a", 0, 16.5), In("a", 1, 20.0), In("a", 2, 17.5)]
    expected = await uninterrupted(records, "session", False, False, tmp_path / "memory")
    # (outputs of different sessions land on different output partitions: compared sorted)
    assert sorted(expected["a"]) == [(16.5, 16.5, 1), (17.5, 17.5, 1), (20.0, 20.0, 1)]
    got = await restarted(records, 2, "session", False, tmp_path / "sqlite")
    assert sorted(got["a"]) == sorted(expected["a"])  # no (16.5, 17.5, 2) after a restart
