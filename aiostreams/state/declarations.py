"""Declaring a store: :func:`kv_store` and :func:`window_store` give the
:class:`~aiostreams.state.store_spec.StoreSpec` a topology adds (see :mod:`aiostreams.state`)."""

from __future__ import annotations

import functools
from typing import Any

from aiostreams.errors import ConfigError
from aiostreams.serde import JsonSerde, Serde, serde_for
from aiostreams.state.base import check_store_name
from aiostreams.state.memory import InMemoryKeyValueStore
from aiostreams.state.sqlite import SQLiteKeyValueStore
from aiostreams.state.store_spec import StoreSpec, window_changelog_config
from aiostreams.state.window import InMemoryWindowStore, SQLiteWindowStore
from aiostreams.state.window_keys import check_retention

__all__ = ["kv_store", "window_store"]


def _store_serde(spec: Any) -> Serde[Any]:
    # None means JSON here (topics default to raw bytes): a store holds Python values.
    return JsonSerde() if spec is None else serde_for(spec)


def kv_store(
    name: str,
    *,
    persistent: bool = False,
    key_serde: Any = None,
    value_serde: Any = None,
    logged: bool = True,
) -> StoreSpec:
    """A key-value store: in memory, or in SQLite under ``state_dir`` (``persistent``).

    ``key_serde``/``value_serde`` take what a topic does (``str``, ``int``, a pydantic
    model, a serde instance); None is JSON. They encode the changelog and the file, and the
    key serde's bytes order ``range`` (``str`` keys: pass ``key_serde=str`` for Python's
    order)."""
    check_store_name(name)
    ks, vs = _store_serde(key_serde), _store_serde(value_serde)
    factory = functools.partial(
        SQLiteKeyValueStore if persistent else InMemoryKeyValueStore, name, ks, vs)
    return StoreSpec(name, factory, logged=logged)


def window_store(
    name: str,
    *,
    retention: float,
    persistent: bool = False,
    key_serde: Any = None,
    value_serde: Any = None,
    logged: bool = True,
) -> StoreSpec:
    """A window store keeping windows that start within ``retention`` seconds of the latest
    start written (keep it >= window size + grace). Serdes as for :func:`kv_store`.

    Its changelog is compacted and also deleted by time, after ``retention`` plus a day."""
    check_store_name(name)
    retention = check_retention(name, retention)
    ks, vs = _store_serde(key_serde), _store_serde(value_serde)
    cls = SQLiteWindowStore if persistent else InMemoryWindowStore
    factory = functools.partial(cls, name, retention=retention, key_serde=ks, value_serde=vs)
    config = window_changelog_config(round(retention * 1000))
    if int(dict(config)["retention.ms"]) >= 1 << 63:
        raise ConfigError(f"window store {name!r}: retention {retention!r}s is too large")
    return StoreSpec(name, factory, logged=logged, changelog_config=config)
