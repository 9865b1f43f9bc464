"""Keys a serde tells apart stay apart in every store and in the in-flight overlay, as in
Kafka (stores keyed by the key's bytes): under a JSON key serde ``1``, ``1.0``, ``True`` and
``"1"`` are four keys, and lists and dicts are keys too. The in-memory stores and the overlay
used to index decoded keys, so ``1`` and ``True`` shared one count without a word."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiostreams import App, JsonSerde
from aiostreams.state.base import TOMBSTONE
from aiostreams.state.memory import InMemoryKeyValueStore
from aiostreams.state.window import InMemoryWindowStore
from aiostreams.testing import TopologyTestDriver

json_keys = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, 1.0, -0.0, 2.5])
    | st.sampled_from(["", "1", "a"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from("ab"), inner,
                                                                max_size=2),
    max_leaves=4)


def key_bytes(key: Any) -> bytes:
    data = JsonSerde().serialize("t", key)
    assert data is not None
    return data


async def test_the_memory_store_keeps_keys_apart_that_python_calls_equal() -> None:
    store = InMemoryKeyValueStore("s")
    keys = [1, True, 1.0, "1", 0, False, 0.0, [1, 2], {"a": 1}]
    for i, key in enumerate(keys):
        store.apply(key, i)
    for i, key in enumerate(keys):
        assert await store.get(key) == i, key
    entries = [(k, v) async for k, v in store.range(None, None)]
    assert [key_bytes(k) for k, _ in entries] == sorted(map(key_bytes, keys))
    assert sorted(v for _, v in entries) == list(range(len(keys)))
    assert await store.get((1, 2)) == 7  # a tuple is the same JSON key as the list
    store.apply([1, 2], TOMBSTONE)
    assert await store.get([1, 2]) is None and await store.get(1) == 0
    assert await store.approximate_num_entries() == len(keys) - 1


async def test_a_memory_store_restored_from_its_changelog_keeps_the_keys_apart() -> None:
    first, second = InMemoryKeyValueStore("s"), InMemoryKeyValueStore("s")
    keys = [1, True, 1.0, [1]]
    for i, key in enumerate(keys):
        first.apply(key, i)
        second.restore(*first.changelog_record(key, i))
    assert [await second.get(k) for k in keys] == [0, 1, 2, 3]


async def test_the_memory_window_store_keeps_keys_apart_that_python_calls_equal() -> None:
    store = InMemoryWindowStore("w", retention=3600.0)
    keys = [1, True, 1.0, [1]]
    for i, key in enumerate(keys):
        store.apply((key, 60.0), i)
    for i, key in enumerate(keys):
        assert await store.get((key, 60.0)) == i
        assert [v async for _, v in store.fetch(key, 0.0, 120.0)] == [i]
    ranged = [(k, v) async for (k, _), v in store.range(None, None)]
    assert sorted(key_bytes(k) for k, _ in ranged) == sorted(map(key_bytes, keys))


async def counts_by_engine(keys: list[Any], *, persistent: bool, in_flight: int
                           ) -> Counter[bytes]:
    state_dir = tempfile.mkdtemp(prefix="aiostreams-keys-")
    try:
        app = App("keys", state_dir=state_dir, max_in_flight=in_flight)
        src = app.topic("in", key=JsonSerde(), value=JsonSerde())
        out = app.topic("out", key=JsonSerde(), value=int)
        (app.stream(src).group_by_key()
         .count(materialized="counts", persistent=persistent).to_stream().to(out))
        last: dict[bytes, int] = {}
        async with TopologyTestDriver(app) as driver:
            for key in keys:
                driver.pipe_input("in", key, "v")
            await driver.process_all()
            for record in driver.read_output("out"):
                last[key_bytes(record.key)] = record.value
        return Counter(last)
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


@pytest.mark.parametrize("persistent", [False, True], ids=["memory", "sqlite"])
@pytest.mark.parametrize("in_flight", [1, 64])
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(json_keys.filter(lambda k: k is not None), min_size=1, max_size=30))
async def test_counts_are_per_serialized_key_whatever_python_calls_equal(
        keys: list[Any], persistent: bool, in_flight: int) -> None:
    expected = Counter(key_bytes(k) for k in keys)
    got = await counts_by_engine(keys, persistent=persistent, in_flight=in_flight)
    assert got == expected, {json.loads(k): (got[k], n) for k, n in expected.items()}
