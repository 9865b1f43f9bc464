"""``Table.suppress``: a suppression step after a table, holding its updates back in a
buffer store (:mod:`aiostreams.processors.suppress` has the processor and its semantics).

``until_window_closes()`` needs a windowed aggregation (or a table derived from one): the
window close time is its end plus grace. ``until_time_limit(...)`` works after any table.
Build-time checks (each a :class:`~aiostreams.errors.TopologyError` naming the node): a
:class:`~aiostreams.windows.Suppressed` argument, not a versioned table, known key and
value serdes (the buffer store encodes both). The suppressed table has no value getter: a
join on it is refused at build time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiostreams.errors import TopologyError
from aiostreams.processors.store_values import kv_store_spec
from aiostreams.processors.suppress import BufferEntrySerde, SuppressProcessor
from aiostreams.processors.tables import ValueGetter
from aiostreams.windows import Suppressed

if TYPE_CHECKING:
    from aiostreams.dsl.table import Table

__all__ = ["suppress_table"]


def suppress_table(table: Table[Any, Any], suppressed: Suppressed, *, name: str | None,
                   ) -> Table[Any, Any]:
    """``table.suppress(suppressed)`` (see :meth:`Table.suppress`)."""
    if not isinstance(suppressed, Suppressed):
        raise TopologyError(f"suppress() takes until_window_closes(...) or "
                            f"until_time_limit(...), got {type(suppressed).__name__}")
    from aiostreams.dsl.table import Table
    from aiostreams.dsl.versioned_wiring import refuse_versioned

    refuse_versioned(table, "suppress()")
    builder = table.builder
    if suppressed.until == "window_closes":
        if table.window_grace_ms is None:
            raise TopologyError(
                f"suppress(until_window_closes()) after {table.node}: window close time is "
                f"only defined for windowed aggregations (windowed_by(...).count/reduce/"
                f"aggregate and the tables derived from them); use until_time_limit() on "
                f"other tables")
        wait_ms = table.window_grace_ms
    else:
        wait_ms = suppressed.wait_ms
    store = builder.store_name("KTABLE-SUPPRESS-STATE-STORE",
                               None if name is None else f"{name}-store")
    key_serde = table.key_serde
    value_serde = table.value_serde
    if key_serde is None or value_serde is None:
        raise TopologyError(f"suppress() after {table.node}: the table's key and value "
                            f"serdes are unknown; give value_serde= to the step before")
    table.old_values.enable()
    node = builder.new_name("KTABLE-SUPPRESS", name)
    builder.add_processor("KTABLE-SUPPRESS",
                          lambda: SuppressProcessor(node, store, suppressed, wait_ms,
                                                    key_serde),
                          [table.node], name=node)
    builder.add_store(kv_store_spec(store, persistent=False, key_serde=key_serde,
                                    value_serde=BufferEntrySerde(value_serde)), node)
    # Kafka's view of a suppressed table answers from the buffer's prior values; none is
    # offered here, so a join on it is refused at build time ("no store to read").
    return Table(builder, node, ValueGetter(), key_serde=key_serde, value_serde=value_serde,
                 store=None, materialized_upstream=table.materialized_upstream)
