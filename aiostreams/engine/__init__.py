"""The engine (internal): tasks, the worker, the reorder buffer and the commit protocol.

Nothing here is meant to be imported by users: the policies and views an app exposes are
re-exported by :mod:`aiostreams` (and :mod:`aiostreams.ops.status`, :mod:`aiostreams.testing`).
"""

__all__: list[str] = []
