"""``kv_store`` and ``window_store``: the StoreSpecs users and the DSL declare stores with."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from aiostreams.errors import ConfigError
from aiostreams.serde import JsonSerde, LongSerde, PydanticSerde, StrSerde
from aiostreams.state import (
    InMemoryKeyValueStore,
    InMemoryWindowStore,
    SQLiteKeyValueStore,
    SQLiteWindowStore,
    kv_store,
    window_store,
)
from aiostreams.topology.topology import StoreSpec


class Total(BaseModel):
    amount: float


def test_kv_store_spec_makes_a_new_in_memory_store_per_call() -> None:
    spec = kv_store("counts")
    assert isinstance(spec, StoreSpec)
    assert (spec.name, spec.logged) == ("counts", True)
    assert dict(spec.changelog_config) == {"cleanup.policy": "compact",
                                           "message.timestamp.type": "CreateTime"}
    first, second = spec.factory(), spec.factory()
    assert type(first) is InMemoryKeyValueStore
    assert first is not second
    assert (first.key_serde, first.value_serde) == (JsonSerde(), JsonSerde())


def test_persistent_kv_store_spec_makes_sqlite_stores_with_resolved_serdes() -> None:
    spec = kv_store("totals", persistent=True, key_serde=str, value_serde=Total, logged=False)
    store = spec.factory()
    assert type(store) is SQLiteKeyValueStore
    assert store.key_serde == StrSerde()
    assert store.value_serde == PydanticSerde(Total)
    assert spec.logged is False


@pytest.mark.parametrize("persistent", [False, True])
def test_window_store_spec_has_a_compacted_and_time_limited_changelog(
        persistent: bool) -> None:
    spec = window_store("clicks", retention=3600.0, persistent=persistent, key_serde=str,
                        value_serde=int)
    store = spec.factory()
    assert type(store) is (SQLiteWindowStore if persistent else InMemoryWindowStore)
    assert store.retention == 3600.0
    assert (store.key_serde, store.value_serde) == (StrSerde(), LongSerde())
    assert dict(spec.changelog_config) == {
        "cleanup.policy": "compact,delete",
        "retention.ms": str((3600 + 86400) * 1000),
        "message.timestamp.type": "CreateTime",
    }


@pytest.mark.parametrize("retention", [0.0, -5.0, float("inf")])
def test_window_store_spec_refuses_a_retention_that_is_not_positive(retention: Any) -> None:
    with pytest.raises(ConfigError, match="retention"):
        window_store("w", retention=retention)


def test_specs_refuse_names_that_cannot_name_a_topic_or_file() -> None:
    with pytest.raises(ConfigError, match="letters, digits"):
        kv_store("my store")
    with pytest.raises(ConfigError, match="letters, digits"):
        window_store("a/b", retention=1.0)


def test_specs_refuse_an_unknown_serde_spec() -> None:
    with pytest.raises(ConfigError):
        kv_store("s", key_serde="yaml")
