"""What a table's update carries besides its new value: the old value and the timestamps.

Kafka Streams forwards a table's updates as ``Change(new, old)`` and keeps a timestamp
with every stored value (``ValueAndTimestamp``). Two of its rules need them:

* **old values** — a table-table join skips an update whose new *and* old values are null
  when the other side has no value (a delete of a key it never had), and a table
  ``filter`` whose old and new results are both null forwards nothing. Kafka computes old
  values only for the tables a left/outer join reads (``enableSendingOldValues``, which
  reaches up through ``filter``/``map_values`` to the source); elsewhere they are null, so
  e.g. a filtered table that feeds no join forwards a delete for every failing update.
* **timestamps** — a table-table join's result is stamped with the later of the two
  sides' timestamps; a key-value aggregation's update with the latest timestamp of the
  records that made it.

:class:`TableUpdate` is a :class:`~aiostreams.types.Record` that also carries ``old``;
:class:`OldValues` is the per-table switch; a materialized table stores each value with
its timestamp (:class:`~aiostreams.processors.store_values.ValueAndTimestamp`, as Kafka's
timestamped stores), read and written by :func:`read_stamped` / :func:`write_stamped`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiostreams.processors.store_values import ValueAndTimestamp
from aiostreams.topology.processor import ProcessorContext
from aiostreams.types import Record
from aiostreams.windows import to_ms

NO_TIMESTAMP = -1
"""The timestamp of a value that has none (Kafka's ``UNKNOWN``)."""


@dataclass(slots=True)
class TableUpdate(Record[Any, Any]):
    """A table's update: ``value`` is the key's new value (``None``: deleted), ``old`` its
    value before, when the table tracks old values (else ``None``)."""

    old: Any = None


def old_value(record: Record[Any, Any]) -> Any:
    """The old value ``record`` carries (``None`` for a plain record)."""
    return record.old if isinstance(record, TableUpdate) else None


def update(record: Record[Any, Any], new: Any, old: Any,
           timestamp: float | None = None) -> TableUpdate:
    """``record`` as a table update with ``new``/``old`` (and a new timestamp, seconds)."""
    return TableUpdate(record.key, new, record.topic, record.partition, record.offset,
                       record.timestamp if timestamp is None else timestamp,
                       record.headers, old)


class OldValues:
    """Whether a table's processor computes old values; turning it on turns it on for the
    table it derives from (Kafka's ``enableSendingOldValues``). Set while building, read
    by the processors when they run."""

    def __init__(self, *parents: OldValues) -> None:
        self.enabled = False
        self.parents = parents
        """The tables this one derives from (both sides, for a table-table join)."""

    def enable(self) -> None:
        self.enabled = True
        for parent in self.parents:
            parent.enable()


def write_stamped(ctx: ProcessorContext, store: str, key: Any, value: Any,
                  ts_ms: int) -> None:
    """Put ``value`` with its timestamp in ``store`` (or, for ``None``, delete ``key``)."""
    if value is None:
        ctx.store(store).delete(key)
    else:
        ctx.store(store).put(key, ValueAndTimestamp(value, ts_ms / 1000))


async def read_stamped(ctx: ProcessorContext, store: str, key: Any) -> tuple[Any, int]:
    """``key``'s value in ``store`` and its timestamp (ms; :data:`NO_TIMESTAMP` if none)."""
    return _unstamped(await ctx.store(store).get(key))


def read_stamped_now(ctx: ProcessorContext, store: str, key: Any) -> tuple[Any, int]:
    """:func:`read_stamped` without awaiting (the store's view ``get_now``)."""
    return _unstamped(ctx.store(store).get_now(key))


def _unstamped(stored: Any) -> tuple[Any, int]:
    if stored is None:
        return None, NO_TIMESTAMP
    if isinstance(stored, ValueAndTimestamp):
        return stored.value, to_ms(stored.timestamp)
    return stored, NO_TIMESTAMP
