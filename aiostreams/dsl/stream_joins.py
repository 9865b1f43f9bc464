"""``Stream``'s joins: with another stream (windowed), a table, or a global table.

:class:`StreamJoins` is a base of :class:`~aiostreams.dsl.stream.Stream` holding only the
join methods users call (``stream.join(...)``, ``left_join``, ``outer_join``,
``join_global``, ``left_join_global``): which join each call means, by the other side's
kind. How each join is wired - placement, repartitioning, the processors and their stores,
the semantics of each kind - is :mod:`aiostreams.dsl.join_wiring`.

Invariant: these methods are ``Stream``'s only (asserted): every join reads this stream's
node, serdes and key-changed mark, and returns a new ``Stream``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

if TYPE_CHECKING:
    from aiostreams.dsl.global_table import GlobalTable
    from aiostreams.dsl.stream import Stream
    from aiostreams.dsl.table import Table
    from aiostreams.windows import JoinWindows

__all__ = ["StreamJoins"]

K = TypeVar("K")
V = TypeVar("V")
VR = TypeVar("VR")
VO = TypeVar("VO")


class StreamJoins(Generic[K, V]):
    """The join methods of :class:`~aiostreams.dsl.stream.Stream` (see the module
    docstring)."""

    def _stream(self) -> Stream[K, V]:
        from aiostreams.dsl.stream import Stream

        assert isinstance(self, Stream), "StreamJoins is a base of Stream only"
        return self

    @overload
    def join(self, other: Table[K, VO], joiner: Callable[[V, VO], VR], windows: None = None,
             *, name: str | None = None,
             grace: float | None = None) -> Stream[K, VR]: ...

    @overload
    def join(self, other: Stream[K, VO], joiner: Callable[[V, VO], VR],
             windows: JoinWindows, *, name: str | None = None) -> Stream[K, VR]: ...

    def join(self, other: Stream[K, VO] | Table[K, VO], joiner: Callable[[V, VO], VR],
             windows: JoinWindows | None = None, *,
             name: str | None = None, grace: float | None = None) -> Stream[K, VR]:
        """Inner join. With a :class:`Table`: each record joins the table's current value
        of its key (records without one are dropped; table updates emit nothing). With a
        :class:`Stream`: records of both sides whose timestamps are within ``windows`` of
        each other join. ``joiner(this_value, other_value)``. With a versioned table, each
        record joins the value valid at its timestamp; ``grace`` (seconds, versioned tables
        only) holds records back to join them in timestamp order (KIP-923)."""
        from aiostreams.dsl.join_wiring import join_streams

        return join_streams(self._stream(), other, joiner, windows, "inner", name=name,
                            grace=grace)

    def join_global(self, table: GlobalTable, key_selector: Callable[[K, V], Any],
                    joiner: Callable[[V, Any], VR], *, name: str | None = None,
                    ) -> Stream[K, VR]:
        """Inner join with a global table: each record joins the table's value of
        ``key_selector(key, value)`` (records without one are dropped); no repartition.
        See :mod:`aiostreams.dsl.global_table`."""
        from aiostreams.dsl.join_wiring import join_global

        return join_global(self._stream(), table, key_selector, joiner, False, name)

    def left_join_global(self, table: GlobalTable, key_selector: Callable[[K, V], Any],
                         joiner: Callable[[V, Any], VR], *, name: str | None = None,
                         ) -> Stream[K, VR]:
        """Like :meth:`join_global`, but a record without a match is emitted too, as
        ``joiner(value, None)``."""
        from aiostreams.dsl.join_wiring import join_global

        return join_global(self._stream(), table, key_selector, joiner, True, name)

    @overload
    def left_join(self, other: Table[K, VO], joiner: Callable[[V, VO | None], VR],
                  windows: None = None, *, name: str | None = None,
                  grace: float | None = None) -> Stream[K, VR]: ...

    @overload
    def left_join(self, other: Stream[K, VO], joiner: Callable[[V, VO | None], VR],
                  windows: JoinWindows, *, name: str | None = None) -> Stream[K, VR]: ...

    def left_join(self, other: Stream[K, VO] | Table[K, VO],
                  joiner: Callable[[V, VO | None], VR], windows: JoinWindows | None = None,
                  *, name: str | None = None, grace: float | None = None) -> Stream[K, VR]:
        """Like :meth:`join`, but a record of this stream with no match is emitted too,
        as ``joiner(value, None)``."""
        from aiostreams.dsl.join_wiring import join_streams

        return join_streams(self._stream(), other, joiner, windows, "left", name=name,
                            grace=grace)

    def outer_join(self, other: Stream[K, VO], joiner: Callable[[V | None, VO | None], VR],
                   windows: JoinWindows, *, name: str | None = None) -> Stream[K, VR]:
        """Stream-stream outer join: unmatched records of either side are emitted too
        (``joiner(value, None)`` / ``joiner(None, value)``)."""
        from aiostreams.dsl.join_wiring import join_streams

        return join_streams(self._stream(), other, joiner, windows, "outer", name=name)
