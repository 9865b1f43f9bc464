"""The stream DSL: the classes users hold, one module each, named after them.

``app.stream(topic)`` gives a :class:`Stream`; its operations return the others
(:class:`GroupedStream`, :class:`Table`, :class:`GroupedTable`, the windowed streams,
:class:`CogroupedStream`, :class:`BranchedStream`); ``app.global_table(topic)`` a
:class:`GlobalTable`. They build a :class:`~aiostreams.topology.topology.Topology` from the
processors of :mod:`aiostreams.processors`, and know nothing of the app that runs it.

The ``*_wiring`` modules are internal: how each family of operations (joins, foreign-key
joins, suppression, versioned tables, lake sinks, async steps) adds its nodes and stores.
The user classes return each other (``Stream.group_by → GroupedStream``, ``GroupedStream.count
→ Table``, ``Table.to_stream → Stream``), like Kafka's ``KStreamImpl`` and ``KTableImpl``:
that import circle is the only one the package allows (tests/test_layers.py).
"""

from aiostreams.dsl.branched import BranchedStream
from aiostreams.dsl.builder import StreamsBuilder
from aiostreams.dsl.cogrouped import CogroupedStream, TimeWindowedCogroupedStream
from aiostreams.dsl.global_table import GlobalTable
from aiostreams.dsl.grouped_stream import GroupedStream
from aiostreams.dsl.grouped_table import GroupedTable
from aiostreams.dsl.stream import Stream
from aiostreams.dsl.table import Table
from aiostreams.dsl.windowed import SessionWindowedStream, SlidingWindowedStream, TimeWindowedStream

__all__ = [
    "BranchedStream",
    "CogroupedStream",
    "GlobalTable",
    "GroupedStream",
    "GroupedTable",
    "SessionWindowedStream",
    "SlidingWindowedStream",
    "Stream",
    "StreamsBuilder",
    "Table",
    "TimeWindowedCogroupedStream",
    "TimeWindowedStream",
]
