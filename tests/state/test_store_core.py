"""What all four stores share (:class:`~aiostreams.state.core.StoreCore`): lifecycle, the
null-key refusals, and changelog records that restore what was written."""

from __future__ import annotations

from typing import Any

import pytest
from statekit import KV_IMPLS, WINDOW_IMPLS, MakeStore

from aiostreams.state.base import TOMBSTONE, StoreContext, StoreStateError

IMPLS = [("kv", name) for name in sorted(KV_IMPLS)] + [
    ("window", name) for name in sorted(WINDOW_IMPLS)]


def a_key(kind: str, key: str) -> Any:
    return key if kind == "kv" else (key, 60.0)


@pytest.fixture(params=IMPLS, ids="-".join)
def impl(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def kind(impl: tuple[str, str]) -> str:
    return impl[0]


@pytest.fixture
async def make(impl: tuple[str, str], open_store: MakeStore) -> MakeStore:
    """``await make(name=...)``: an opened store of the implementation under test."""
    kind, implementation = impl

    async def made(name: str = "store") -> Any:
        if kind == "kv":
            return await open_store(KV_IMPLS[implementation], name)
        return await open_store(WINDOW_IMPLS[implementation], name, retention=3600.0)

    return made


async def test_a_store_opens_once(make: MakeStore, context: StoreContext) -> None:
    store = await make()
    with pytest.raises(StoreStateError, match=r"store 'store' is open; open\(\) a new instance"):
        await store.open(context)


async def test_a_changelog_record_restores_the_write_in_a_new_store(
        make: MakeStore, kind: str) -> None:
    writer = await make()
    reader = await make(name="copy")
    key = a_key(kind, "k")
    kb, vb = writer.changelog_record(key, {"n": [1, 2]})
    assert kb == writer.sort_key(key)
    reader.restore(kb, vb)
    await reader.flush()
    assert await reader.get(key) == {"n": [1, 2]}
    kb, vb = writer.changelog_record(key, TOMBSTONE)
    assert (kb, vb) == (writer.sort_key(key), None)
    reader.restore(kb, vb)
    await reader.flush()
    assert await reader.get(key) is None


async def test_a_null_changelog_key_is_refused_and_changes_nothing(
        make: MakeStore, kind: str) -> None:
    store = await make()
    key = a_key(kind, "k")
    store.apply(key, 1)
    with pytest.raises(ValueError, match="null key; the changelog topic holds records"):
        store.restore(None, b"2")
    await store.flush()
    assert await store.get(key) == 1


async def test_a_key_the_serde_makes_none_is_refused(make: MakeStore, kind: str) -> None:
    store = await make()
    with pytest.raises(ValueError, match="a key cannot be None"):
        store.sort_key(a_key(kind, None))  # type: ignore[arg-type]
