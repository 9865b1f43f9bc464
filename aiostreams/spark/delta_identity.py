"""Who a Delta table is written for, and the transaction ids that make its appends idempotent.

A Delta sink records its identity in the table's metadata when it creates the table: the
``description`` field holds ``{"aiostreams": {"app": ..., "sources": [...]}}`` (delta-rs
1.6 rejects custom keys in the table ``configuration``, so the description carries it; Spark
and every other Delta client keep it). A sink then refuses, loudly and before writing, a table
whose identity names another app, or a batch from a source topic the table was not created
for: their durable offsets (the app transactions below) are another stream's, and appending
would drop this stream's records at or below them as replays, or mix two streams in one table.

Each Delta commit of a sink carries one *app transaction* per source partition it writes:
``appId`` = :func:`transaction_app_id` (app, topic, partition) and ``version`` = the highest
source offset in the commit. Delta keeps the newest version per appId in the table's
snapshot, so ``DeltaTable.transaction_version(app_id)`` is the partition's durable offset, in
the same atomic commit as the rows. Invariant: per appId, versions only grow (the sink asserts
it before each commit).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
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
    """The app a table is written for and the source topics it holds (sorted, unique)."""

    app: str
    sources: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.app:
            raise ConfigError("a Delta sink writes for an app: its app id is empty")
        if tuple(sorted(set(self.sources))) != self.sources:
            raise ValueError(f"sources must be sorted and unique, got {self.sources}")

    @classmethod
    def of(cls, app: str, sources: Iterable[str]) -> TableIdentity:
        return cls(app, tuple(sorted(set(sources))))

    def to_description(self) -> str:
        return json.dumps({_KEY: {"app": self.app, "sources": list(self.sources)}},
                          sort_keys=True)

    @classmethod
    def from_description(cls, description: str | None, table: str) -> TableIdentity | None:
        """The identity in a table's description; None when the table has none (not
        written by aiostreams). Raises :class:`TableIdentityError` for a malformed one."""
        if not description:
            return None
        try:
            found = json.loads(description)
        except ValueError:
            return None  # a description a person wrote: no identity
        if not isinstance(found, dict) or _KEY not in found:
            return None
        mine = found[_KEY]
        if (not isinstance(mine, dict) or not isinstance(mine.get("app"), str)
                or not isinstance(mine.get("sources"), list)
                or not all(isinstance(s, str) for s in mine["sources"])):
            raise TableIdentityError(
                f"the Delta table at {table} has a malformed aiostreams identity in its "
                f"description: {description!r}; fix the description or use another path")
        return cls.of(mine["app"], mine["sources"])

    def check(self, app: str, sources: Iterable[str], table: str) -> None:
        """Raise :class:`TableIdentityError` unless this (the table's) identity names
        ``app`` and every topic of ``sources``."""
        if app != self.app:
            raise TableIdentityError(
                f"the Delta table at {table} is written for app {self.app!r} (sources "
                f"{list(self.sources)}); this sink writes for app {app!r}. Its transaction "
                "ids are that app's: give each app its own table path (a renamed app is "
                "another app)")
        foreign = sorted(set(sources) - set(self.sources))
        if foreign:
            raise TableIdentityError(
                f"the Delta table at {table} holds topics {list(self.sources)} of app "
                f"{app!r}; this sink got rows from {foreign}. Nothing was written. Write "
                "another source to another table path")
