"""Module paths that moved in 0.4 (the house, step two), kept importable for one release.

``import aiostreams.spark`` or ``from aiostreams.topology.dsl_stream import Stream`` still
works: a finder on ``sys.meta_path`` answers the old name with the module at its new path
(the same module object, so classes compare equal) and warns once per old path with a
:class:`DeprecationWarning` naming the new one. Names a moved module no longer defines
(things that moved to another module as well) are not carried over. The finder is
installed when this module is imported (by ``import aiostreams``); :data:`MOVED` is removed
in the next release.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

__all__ = ["MOVED", "install"]

MOVED: dict[str, str] = {
    "aiostreams.app_status": "aiostreams.ops.app_status",
    "aiostreams.client_options": "aiostreams.settings.client_options",
    "aiostreams.config": "aiostreams.settings.config",
    "aiostreams.driver_broker": "aiostreams.testing.driver_broker",
    "aiostreams.engine.clock": "aiostreams.runtime.clock",
    "aiostreams.engine.permit_wait": "aiostreams.runtime.permit_wait",
    "aiostreams.engine.trace_hooks": "aiostreams.runtime.trace_hooks",
    "aiostreams.engine_settings": "aiostreams.settings.engine",
    "aiostreams.event_loop": "aiostreams.lifecycle.event_loop",
    "aiostreams.lifecycle_state": "aiostreams.lifecycle.state",
    "aiostreams.metrics": "aiostreams.ops.metrics",
    "aiostreams.progress": "aiostreams.ops.progress",
    "aiostreams.queries": "aiostreams.ops.queries",
    "aiostreams.query_http": "aiostreams.ops.query_http",
    "aiostreams.spark": "aiostreams.sinks",
    "aiostreams.spark.attach": "aiostreams.sinks.attach",
    "aiostreams.spark.commit_log": "aiostreams.sinks.commit_log",
    "aiostreams.spark.delta_identity": "aiostreams.sinks.delta_identity",
    "aiostreams.spark.delta_sink": "aiostreams.sinks.delta_sink",
    "aiostreams.spark.delta_spark": "aiostreams.sinks.spark.delta_spark",
    "aiostreams.spark.delta_table": "aiostreams.sinks.delta_table",
    "aiostreams.spark.file_stats": "aiostreams.sinks.file_stats",
    "aiostreams.spark.incarnations": "aiostreams.sinks.incarnations",
    "aiostreams.spark.object_store": "aiostreams.sinks.object_store",
    "aiostreams.spark.parquet_sink": "aiostreams.sinks.parquet_sink",
    "aiostreams.spark.parquet_writer": "aiostreams.sinks.parquet_writer",
    "aiostreams.spark.paths": "aiostreams.sinks.paths",
    "aiostreams.spark.rows": "aiostreams.sinks.rows",
    "aiostreams.spark.schema": "aiostreams.sinks.schema",
    "aiostreams.spark.schema_compile": "aiostreams.sinks.schema_compile",
    "aiostreams.spark.schema_evolution": "aiostreams.sinks.schema_evolution",
    "aiostreams.spark.schema_nodes": "aiostreams.sinks.schema_nodes",
    "aiostreams.spark.session": "aiostreams.sinks.spark.session",
    "aiostreams.spark.sink_batching": "aiostreams.sinks.sink_batching",
    "aiostreams.spark.sink_columns": "aiostreams.sinks.sink_columns",
    "aiostreams.spark.sink_state": "aiostreams.sinks.sink_state",
    "aiostreams.spark.spark_errors": "aiostreams.sinks.spark.spark_errors",
    "aiostreams.spark.spark_thread": "aiostreams.sinks.spark.spark_thread",
    "aiostreams.spark.structured": "aiostreams.sinks.spark.structured",
    "aiostreams.start_stop": "aiostreams.lifecycle.start_stop",
    "aiostreams.status": "aiostreams.ops.status",
    "aiostreams.task_totals": "aiostreams.ops.task_totals",
    "aiostreams.test_driver": "aiostreams.testing.driver",
    "aiostreams.topology.dsl": "aiostreams.dsl.builder",
    "aiostreams.topology.dsl_async_steps": "aiostreams.dsl.async_step_wiring",
    "aiostreams.topology.dsl_batch": "aiostreams.processors.batch_caller",
    "aiostreams.topology.dsl_branch": "aiostreams.dsl.branched",
    "aiostreams.topology.dsl_cogroup": "aiostreams.dsl.cogrouped",
    "aiostreams.topology.dsl_fk_join": "aiostreams.dsl.fk_join_wiring",
    "aiostreams.topology.dsl_grouped_stream": "aiostreams.dsl.grouped_stream",
    "aiostreams.topology.dsl_grouped_table": "aiostreams.dsl.grouped_table",
    "aiostreams.topology.dsl_joins": "aiostreams.dsl.join_wiring",
    "aiostreams.topology.dsl_processors": "aiostreams.processors.steps",
    "aiostreams.topology.dsl_service": "aiostreams.processors.service_caller",
    "aiostreams.topology.dsl_sinks": "aiostreams.dsl.sink_wiring",
    "aiostreams.topology.dsl_stores": "aiostreams.processors.store_values",
    "aiostreams.topology.dsl_stream": "aiostreams.dsl.stream",
    "aiostreams.topology.dsl_suppress": "aiostreams.dsl.suppress_wiring",
    "aiostreams.topology.dsl_table": "aiostreams.dsl.table",
    "aiostreams.topology.dsl_versioned": "aiostreams.dsl.versioned_wiring",
    "aiostreams.topology.dsl_windows": "aiostreams.dsl.windowed",
    "aiostreams.topology.emit_final": "aiostreams.processors.emit_final",
    "aiostreams.topology.fk_join": "aiostreams.processors.fk_join",
    "aiostreams.topology.fk_join_wire": "aiostreams.processors.fk_join_wire",
    "aiostreams.topology.global_state": "aiostreams.state.global_copy",
    "aiostreams.topology.global_table": "aiostreams.dsl.global_table",
    "aiostreams.topology.join_processors": "aiostreams.processors.joins",
    "aiostreams.topology.sliding_windows": "aiostreams.processors.sliding_windows",
    "aiostreams.topology.stream_stream_join": "aiostreams.processors.stream_stream_join",
    "aiostreams.topology.suppress": "aiostreams.processors.suppress",
    "aiostreams.topology.table_changes": "aiostreams.processors.table_changes",
    "aiostreams.topology.table_processors": "aiostreams.processors.tables",
    "aiostreams.topology.table_regroup": "aiostreams.processors.table_regroup",
    "aiostreams.topology.table_sources": "aiostreams.processors.table_sources",
    "aiostreams.topology.versioned_join": "aiostreams.processors.versioned_join",
    "aiostreams.topology.window_processors": "aiostreams.processors.windows",
}
"""Old module path → new module path."""


class _Alias(importlib.abc.Loader):
    def __init__(self, old: str, new: str) -> None:
        self.old = old
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{self.old} moved to {self.new}; import it from there (the old path "
                      "is removed in the next release)", DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at the new path is already executed."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(fullname, new))


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once; before the path finders, since a
    leftover ``.pyc`` or a stale install could otherwise answer an old path)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())


install()
