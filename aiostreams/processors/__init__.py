"""What the DSL generates (internal package): the processors behind its operations —
per-record steps sync and async, windows, joins (stream-stream, stream-table, table-table,
foreign-key, versioned, global), suppression, table changes and regrouping — the callers
of declared services (one record or a batch per call), and the formats of the values their
stores hold.

Users write their own processors against :mod:`aiostreams.topology.processor`; nothing here
is imported by a program. Layer: below :mod:`aiostreams.dsl`, beside the topology model,
above the engine's kernel (:mod:`aiostreams.runtime`), state and services.
"""

__all__: list[str] = []
