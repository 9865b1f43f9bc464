"""Operating a running app: its status views (:mod:`~aiostreams.ops.status`), Prometheus
metrics and the health/status server (:mod:`~aiostreams.ops.metrics`), progress and lag,
interactive queries and their HTTP face (:mod:`~aiostreams.ops.queries`,
:mod:`~aiostreams.ops.query_http`), and the live status page the metrics server serves at
``/`` (:mod:`~aiostreams.ops.status_page`: its numbers from
:mod:`~aiostreams.ops.status_report`, its graph from :mod:`~aiostreams.ops.topology_graph`).

Everything here reads the app through its inspection interface (``App.inspect()``), never
through its private members; nothing below the app imports this package.
"""

__all__: list[str] = []
