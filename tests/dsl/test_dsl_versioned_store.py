"""The versioned store behind versioned tables: what ``put`` returns and what ``get``
sees, as Kafka Streams' ``RocksDBVersionedStore`` answers, for both backends, with writes
still in flight (buffered in the overlay) or retired, across flushes (which drop what no
read can see) and across a restore from the changelog."""

from __future__ import annotations

import asyncio
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiostreams.runtime.slot import CURRENT_SLOT, Slot, SlotKind
from aiostreams.serde import StrSerde
from aiostreams.state.base import StoreContext
from aiostreams.state.overlay import StoreOverlay, view_for
from aiostreams.state.versioned import VersionedKeyValueStore
from aiostreams.state.versioned_view import VersionedStoreView


class Engine:
    """One store driven the engine's way: each write in its own slot, buffered in the
    overlay until it retires (oldest first), the changelog kept as the engine sends it."""

    def __init__(self, store: VersionedKeyValueStore) -> None:
        self.store = store
        self.overlay = StoreOverlay(store)
        self.view = view_for(self.overlay)
        assert isinstance(self.view, VersionedStoreView)
        self.in_flight: list[Slot] = []
        self.changelog: list[tuple[bytes | None, bytes | None]] = []

    async def put(self, key: str, value: str | None, ms: int) -> float | None:
        slot = Slot(SlotKind.RECORD, None, None, None)
        token = CURRENT_SLOT.set(slot)
        try:
            result: float | None = await self.view.put(key, value, ms / 1000)
        finally:
            CURRENT_SLOT.reset(token)
        self.in_flight.append(slot)
        return result

    def retire(self, n: int) -> None:
        for slot in self.in_flight[:n]:
            for overlay, key, value in slot.writes:
                overlay.retire(slot, key, value)
                self.changelog.append(self.store.changelog_record(key, value))
        del self.in_flight[:n]


class Model:
    """KIP-889's contract, stated directly: versions per key, stream time, retention."""

    def __init__(self, retention_ms: int) -> None:
        self.retention_ms = retention_ms
        self.versions: dict[str, dict[int, str | None]] = {}
        self.stream_ms = -(2**62)

    def put(self, key: str, value: str | None, ms: int) -> float | None:
        if ms < self.stream_ms - self.retention_ms:
            return None
        self.stream_ms = max(self.stream_ms, ms)
        versions = self.versions.setdefault(key, {})
        versions[ms] = value
        later = [t for t in versions if t > ms]
        return min(later) / 1000 if later else math.inf

    def get(self, key: str, as_of_ms: int | None) -> tuple[str, float, float | None] | None:
        versions = sorted(self.versions.get(key, {}).items())
        if not versions:
            return None
        newest_ms, newest = versions[-1]
        if as_of_ms is None or as_of_ms < self.stream_ms - self.retention_ms:
            if newest is None or (as_of_ms is not None and newest_ms > as_of_ms):
                return None
            return newest, newest_ms / 1000, None
        valid = [(i, t, v) for i, (t, v) in enumerate(versions) if t <= as_of_ms]
        if not valid:
            return None
        i, t, v = valid[-1]
        if v is None:
            return None
        return v, t / 1000, versions[i + 1][0] / 1000 if i + 1 < len(versions) else None


KEYS = st.sampled_from(["a", "b", "c"])
STEPS = st.lists(st.one_of(
    st.tuples(st.just("put"), KEYS, st.one_of(st.none(), st.sampled_from("xyz")),
              st.integers(0, 40)),
    st.tuples(st.just("get"), KEYS, st.one_of(st.none(), st.integers(0, 45))),
    st.tuples(st.just("retire"), st.integers(1, 4)),
    st.tuples(st.just("flush")),
), max_size=60)


def make_store(persistent: bool, retention_ms: int) -> VersionedKeyValueStore:
    return VersionedKeyValueStore("versions", history_retention=retention_ms / 1000,
                                  persistent=persistent, key_serde=StrSerde(),
                                  value_serde=StrSerde())


async def run_steps(persistent: bool, retention_ms: int, steps: list[Any],
                    state_dir: Path) -> None:
    store = make_store(persistent, retention_ms)
    await store.open(StoreContext("0_0", state_dir, 0))
    engine, model = Engine(store), Model(retention_ms)
    try:
        for step in steps:
            if step[0] == "put":
                _, key, value, at = step
                ms = at * 100
                assert await engine.put(key, value, ms) == model.put(key, value, ms), step
            elif step[0] == "get":
                _, key, at = step
                as_of = None if at is None else at * 100
                found = await engine.view.get(key, None if as_of is None else as_of / 1000)
                assert (None if found is None else tuple(found)) == model.get(key, as_of), step
            elif step[0] == "retire":
                engine.retire(step[1])
            else:
                await store.flush()
        engine.retire(len(engine.in_flight))
        await store.flush()
        # A fresh store restored from the changelog answers every read the same.
        restored = make_store(False, retention_ms)
        await restored.open(StoreContext("0_1", None, 0))
        for key, value in engine.changelog:
            restored.restore(key, value)
        again = Engine(restored)
        for key in ("a", "b", "c"):
            for at in [None, *range(0, 46, 3)]:
                as_of = None if at is None else at * 100 / 1000
                assert await again.view.get(key, as_of) == await engine.view.get(key, as_of)
        await restored.close()
    finally:
        await store.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS, retention_ms=st.sampled_from([0, 500, 1000, 2500]),
       persistent=st.booleans())
def test_versioned_store_answers_as_kafkas_contract_with_writes_in_flight(
        steps: list[Any], retention_ms: int, persistent: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run_steps(persistent, retention_ms, steps, Path(tmp)))


async def test_a_read_older_than_the_history_retention_sees_only_the_newest_version(
        tmp_path: Path) -> None:
    store = make_store(False, 1000)
    await store.open(StoreContext("0_0", None, 0))
    engine = Engine(store)
    assert await engine.put("a", "old", 1000) == math.inf
    assert await engine.put("a", "mid", 3000) == math.inf
    assert await engine.put("a", "early", 2000) == 3.0  # out of order: valid until mid
    assert await engine.put("b", "b", 9000) == math.inf  # stream time 9 s
    assert await engine.put("a", "too-late", 7999) is None  # older than 9 s - 1 s
    assert await engine.view.get("a", 2.5) is None  # history gone: mid began after 2.5
    assert await engine.view.get("a", 4.0) == ("mid", 3.0, None)
    engine.retire(5)
    assert await engine.view.get("a", 2.5) is None
    assert await engine.view.get("a") == ("mid", 3.0, None)
    await store.flush()
    assert [ms for ms, _ in await store.versions("a")] == [3000]  # the rest was dropped
    await store.close()


@pytest.mark.parametrize("persistent", [False, True])
async def test_a_tombstone_is_a_version(tmp_path: Path, persistent: bool) -> None:
    store = make_store(persistent, 10_000)
    await store.open(StoreContext("0_0", tmp_path, 0))
    engine = Engine(store)
    await engine.put("a", "x", 1000)
    assert await engine.put("a", None, 2000) == math.inf
    engine.retire(2)
    assert await engine.put("a", "y", 1500) == 2.0  # ends where the tombstone begins
    assert await engine.view.get("a") is None
    assert await engine.view.get("a", 1.7) == ("y", 1.5, 2.0)
    assert await engine.view.get("a", 2.5) is None
    await store.close()


async def test_a_reopened_sqlite_store_keeps_its_history_and_stream_time(
        tmp_path: Path) -> None:
    store = make_store(True, 2000)
    await store.open(StoreContext("0_0", tmp_path, 0))
    engine = Engine(store)
    for key, value, ms in [("a", "x", 1001), ("a", "y", 3003), ("a", "w", 2002),
                           ("b", None, 4567)]:
        await engine.put(key, value, ms)
    engine.retire(4)
    await store.flush()
    await store.close()
    reopened = make_store(True, 2000)
    await reopened.open(StoreContext("0_0", tmp_path, 0))
    assert not reopened.fresh
    assert reopened.observed_ms == 4567
    again = Engine(reopened)
    assert await again.view.get("a", 2.6) == ("w", 2.002, 3.003)
    assert await again.view.get("a", 2.5) is None  # older than 4.567 - 2: newest only
    assert await again.put("a", "late", 2566) is None  # 2.566 < 4.567 - 2: refused
    assert await again.put("a", "ok", 2567) == 3.003
    await reopened.close()
