"""Who a Delta table is written for, and the transaction ids that make its appends idempotent.

A Delta sink records its identity in the table's metadata when it creates the table: the
``description`` field holds ``{"aiostreams": {"app": ..., "sources": [...], "topic_ids":
{topic: id}}}`` (delta-rs 1.6 rejects custom keys in the table ``configuration``, so the
description carries it; Spark and every other Delta client keep it). A sink then refuses,
loudly and before writing, a table whose identity names another app, a batch from a source
topic the table was not created for, or a source topic whose id (its incarnation, see
:mod:`aiostreams.sinks.incarnations`) is not the one recorded: their durable offsets (the app
transactions below) are another stream's, and appending would drop this stream's records at
or below them as replays, or mix two streams in one table. A table whose identity has no
id for a source topic (written before ids were recorded) gets it recorded at the sink's
start (:meth:`TableIdentity.with_topic_ids`).

Each Delta commit of a sink carries one *app transaction* per source partition it writes:
``appId`` = :func:`transaction_app_id` (app, topic, partition) and ``version`` = the highest
source offset in the commit. Delta keeps the newest version per appId in the table's
snapshot, so ``DeltaTable.transaction_version(app_id)`` is the partition's durable offset, in
the same atomic commit as the rows. Invariant: per appId, versions only grow (the sink asserts
it before each commit).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiostreams.errors import ConfigError
from aiostreams.types import TopicPartition

__all__ = ["TableIdentity", "TableIdentityError", "transaction_app_id"]

_KEY = "aiostreams"


class TableIdentityError(ConfigError):
    """A Delta table was written for another app or another source than this sink's."""


def transaction_app_id(app: str, source: TopicPartition) -> str:
    """The Delta app-transaction id of ``source``'s rows written by ``app``."""
    return f"aiostreams:{app}:{source.topic}:{source.partition}"


@dataclass(frozen=True)
class TableIdentity:
    """The app a table is written for, the source topics it holds (sorted, unique) and the
    ids of those topics' incarnations, where known (sorted (topic, id) pairs)."""

    app: str
    sources: tuple[str, ...]
    topic_ids: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.app:
            raise ConfigError("a Delta sink writes for an app: its app id is empty")
        if tuple(sorted(set(self.sources))) != self.sources:
            raise ValueError(f"sources must be sorted and unique, got {self.sources}")
        if tuple(sorted(dict(self.topic_ids).items())) != self.topic_ids:
            raise ValueError(f"topic_ids must be sorted pairs, got {self.topic_ids}")
        assert {t for t, _ in self.topic_ids} <= set(self.sources), "ids of foreign topics"

    @classmethod
    def of(cls, app: str, sources: Iterable[str],
           topic_ids: Mapping[str, str | None] | None = None) -> TableIdentity:
        """The identity of a table of ``app`` holding ``sources``, with the known
        ``topic_ids`` of those sources."""
        unique = tuple(sorted(set(sources)))
        ids = {t: i for t, i in (topic_ids or {}).items() if i is not None and t in unique}
        return cls(app, unique, tuple(sorted(ids.items())))

    @property
    def ids(self) -> dict[str, str]:
        return dict(self.topic_ids)

    def with_topic_ids(self, topic_ids: Mapping[str, str | None]) -> TableIdentity:
        """This identity with the ids it lacks added from ``topic_ids`` (ids it has are
        kept: a different one is a mismatch, for the caller to refuse)."""
        return TableIdentity.of(self.app, self.sources, {**topic_ids, **self.ids})

    def to_description(self) -> str:
        return json.dumps({_KEY: {"app": self.app, "sources": list(self.sources),
                                  "topic_ids": self.ids}}, sort_keys=True)

    @classmethod
    def from_description(cls, description: str | None, table: str,
                         kind: str = "the Delta table at") -> TableIdentity | None:
        """The identity in a table's description; None when the table has none (not
        written by aiostreams). Raises :class:`TableIdentityError` for a malformed one.
        ``kind`` words the table in errors ("the Iceberg table")."""
        if not description:
            return None
        try:
            found = json.loads(description)
        except ValueError:
            return None  # a description a person wrote: no identity
        if not isinstance(found, dict) or _KEY not in found:
            return None
        mine = found[_KEY]
        ids = mine.get("topic_ids", {}) if isinstance(mine, dict) else None
        if (not isinstance(mine, dict) or not isinstance(mine.get("app"), str)
                or not isinstance(mine.get("sources"), list)
                or not all(isinstance(s, str) for s in mine["sources"])
                or not isinstance(ids, dict)
                or not all(isinstance(i, str) and t in mine["sources"]
                           for t, i in ids.items())):
            raise TableIdentityError(
                f"{kind} {table} has a malformed aiostreams identity in its "
                f"description: {description!r}; fix the description or use another path")
        return cls.of(mine["app"], mine["sources"], ids)

    def check(self, app: str, sources: Iterable[str], table: str,
              kind: str = "the Delta table at") -> None:
        """Raise :class:`TableIdentityError` unless this (the table's) identity names
        ``app`` and every topic of ``sources``; ``kind`` words the table in errors."""
        if app != self.app:
            raise TableIdentityError(
                f"{kind} {table} is written for app {self.app!r} (sources "
                f"{list(self.sources)}); this sink writes for app {app!r}. Its transaction "
                "ids are that app's: give each app its own table path (a renamed app is "
                "another app)")
        foreign = sorted(set(sources) - set(self.sources))
        if foreign:
            raise TableIdentityError(
                f"{kind} {table} holds topics {list(self.sources)} of app "
                f"{app!r}; this sink got rows from {foreign}. Nothing was written. Write "
                "another source to another table path")
