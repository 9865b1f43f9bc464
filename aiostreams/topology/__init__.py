"""The topology model (internal package): the processor API (KIP-28, made async), nodes and
sub-topologies, the internal topics' configs, stream time, ``describe()``.

Meant for users: :class:`~aiostreams.Topology` and the processor API (re-exported by
:mod:`aiostreams`); a built topology's parts in :mod:`aiostreams.topology.topology`. The
classes the DSL returns are in :mod:`aiostreams.dsl`, the processors it generates in
:mod:`aiostreams.processors`; window specs in :mod:`aiostreams.windows`.
"""

__all__: list[str] = []
