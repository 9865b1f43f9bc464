"""The one lifecycle enum: its transition table, and an app's run following it."""

from __future__ import annotations

import pytest

from aiostreams import App, AppState
from aiostreams.lifecycle.state import TRANSITIONS


def reachable_from_created() -> set[AppState]:
    seen, todo = set(), [AppState.CREATED]
    while todo:
        state = todo.pop()
        if state not in seen:
            seen.add(state)
            todo.extend(TRANSITIONS[state])
    return seen


def test_every_state_is_reachable_and_stopped_is_the_only_end() -> None:
    assert reachable_from_created() == set(AppState)
    assert [s for s in AppState if not TRANSITIONS[s]] == [AppState.STOPPED]


def test_a_failed_app_or_worker_still_stops() -> None:
    assert AppState.FAILED.advance(AppState.STOPPING, who="w") is AppState.STOPPING
    assert AppState.STOPPING.advance(AppState.FAILED, who="w") is AppState.FAILED


def test_a_step_outside_the_table_names_who_took_it() -> None:
    with pytest.raises(AssertionError, match="app 'x': stopped -> running"):
        AppState.STOPPED.advance(AppState.RUNNING, who="app 'x'")


async def test_an_app_run_takes_only_allowed_steps() -> None:
    app = App("steps", broker="memory://")
    app.topology.add_source("src", app.topic("in", partitions=1)).add_sink("sink", "out", "src")
    states = [app.state]
    async with app:
        states.append(app.state)
    states.append(app.state)
    assert states == [AppState.CREATED, AppState.RUNNING, AppState.STOPPED]
    with pytest.raises(RuntimeError, match="starts once"):
        await app.start()
