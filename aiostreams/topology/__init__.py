"""Topologies and the stream DSL (internal package).

Meant for users: :class:`~aiostreams.Topology` and the processor API (re-exported by
:mod:`aiostreams`); the classes the DSL returns (``Stream``, ``GroupedStream``, ``Table``,
...) listed in :mod:`aiostreams.topology.dsl`; a built topology's parts in
:mod:`aiostreams.topology.topology`. Window specs are in :mod:`aiostreams.windows`. The
other modules (processors the DSL generates, stores' helpers) are internal.
"""

__all__: list[str] = []
