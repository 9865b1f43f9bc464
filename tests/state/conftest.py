"""Factories for opened stores of every implementation (closed after the test)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from statekit import KV_IMPLS, WINDOW_IMPLS, MakeStore

from aiostreams.state.base import StateStore, StoreContext


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def context(state_dir: Path) -> StoreContext:
    return StoreContext(task_id="1_0", state_dir=state_dir, partition=0)


@pytest.fixture
async def open_store(context: StoreContext) -> AsyncIterator[MakeStore]:
    """``await open_store(SomeStore, "name", ...)``: an opened store, closed at teardown."""
    opened: list[StateStore] = []

    async def make(cls: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        store = cls(*args, **kwargs)
        await store.open(context)
        opened.append(store)
        return store

    yield make
    for store in reversed(opened):
        await store.close()


@pytest.fixture(params=sorted(KV_IMPLS))
def kv_impl(request: pytest.FixtureRequest) -> Callable[..., StateStore]:
    """Each key-value store implementation in turn."""
    return KV_IMPLS[request.param]


@pytest.fixture(params=sorted(WINDOW_IMPLS))
def window_impl(request: pytest.FixtureRequest) -> Callable[..., StateStore]:
    """Each window store implementation in turn."""
    return WINDOW_IMPLS[request.param]


@pytest.fixture
async def make_kv(open_store: MakeStore, kv_impl: Callable[..., StateStore]) -> MakeStore:
    """``await make_kv(name="s", key_serde=..., value_serde=...)`` of the current impl."""

    async def make(name: str = "store", **kwargs: Any) -> Any:
        return await open_store(kv_impl, name, **kwargs)

    return make


@pytest.fixture
async def make_window(open_store: MakeStore,
                      window_impl: Callable[..., StateStore]) -> MakeStore:
    """``await make_window(retention=..., name="w", ...)`` of the current impl."""

    async def make(name: str = "windows", *, retention: float = 3600.0,
                   **kwargs: Any) -> Any:
        return await open_store(window_impl, name, retention=retention, **kwargs)

    return make
