"""The app of the ``--workers`` SIGKILL test, for ``aiostreams run delta_workers_app:app
--workers 2``: orders from a real broker into one Delta table, written by every worker.

Each worker process counts its own batches and, from its ``DW_NTH``-th on, SIGKILLs itself
at ``DW_KILL_POINT`` (see :mod:`delta_chaos_worker`) when it can take a kill token: it
deletes one file of the ``DW_TOKENS`` directory (an unlink succeeds in one process only),
so the test sets how many kills happen in all, whichever workers and restarts take them.
After each flush, a worker whose table's app transactions cover ``DW_ENDS`` (JSON: the last
offset of each partition of ``DW_TOPIC``) prints ``DONE_LINE`` to stderr.

Environment: ``DW_BOOTSTRAP``, ``DW_TOPIC``, ``DW_PATH``, ``DW_KILL_POINT``, ``DW_NTH``,
``DW_TOKENS``, ``DW_ENDS``, ``DW_STORAGE_OPTIONS`` (JSON) for a table on S3, and
``DW_MAINTENANCE`` (set: the table partitioned by region, with a compaction after about
every batch on every worker), ``DW_ENGINE``: the sink's engine (``pyarrow``, the default,
or ``spark``: each worker process then writes through a ``local[1]`` SparkSession of its
own).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from delta_chaos_worker import KillingSink, KillingTransport
from deltakit import make_delta_app
from deltalake import DeltaTable
from sparkkit import Order

from aiostreams.sinks import SparkConfig, TableMaintenance
from aiostreams.sinks.delta_identity import transaction_app_id
from aiostreams.types import TopicPartition

DONE_LINE = "delta-workers-app: the table holds every input offset"


class TokenKillingSink(KillingSink):
    def __init__(self, *args: Any, tokens: Path, ends: dict[TopicPartition, int],
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tokens, self.ends = tokens, ends

    def die(self) -> None:
        for token in sorted(self.tokens.iterdir()):
            try:
                token.unlink()
            except FileNotFoundError:
                continue  # another process took it
            print(f"delta-workers-app: pid {os.getpid()} dies ({self.kill_point}, batch "
                  f"{self.written})", file=sys.stderr, flush=True)
            super().die()

    async def flush(self) -> None:
        await super().flush()
        options = self.storage_options or None
        if not DeltaTable.is_deltatable(str(self.path), storage_options=options):
            return
        table = DeltaTable(str(self.path), storage_options=options)
        versions = {tp: table.transaction_version(transaction_app_id(self.app, tp))
                    for tp in self.ends}
        if all(v is not None and v >= self.ends[tp] for tp, v in versions.items()):
            print(DONE_LINE, file=sys.stderr, flush=True)


def maintained(env: Any) -> dict[str, Any]:
    """The sink's options for maintenance, when ``DW_MAINTENANCE`` is set: compaction after
    about every batch; vacuums that take only what is two minutes old (a test is over by
    then: nothing a reader or another worker may still need)."""
    if "DW_MAINTENANCE" not in env:
        return {}
    return {"partition_by": ("region",), "maintenance": TableMaintenance(
        compact_every=0.2, vacuum_every=2.0, retention=120.0, target_file_size=1 << 20)}


def build() -> Any:
    env = os.environ
    topic = env["DW_TOPIC"]
    ends = {TopicPartition(topic, p): last for p, last in enumerate(json.loads(env["DW_ENDS"]))}
    engine = env.get("DW_ENGINE", "pyarrow")
    spark = (SparkConfig(master="local[1]", driver_memory="512m", app_name=f"dw-{os.getpid()}")
             if engine == "spark" else None)
    sink = TokenKillingSink(env["DW_PATH"], Order, include=("partition", "offset"),
                            batch_rows=400, batch_interval=0.5, kill_point=env["DW_KILL_POINT"],
                            nth=int(env["DW_NTH"]), tokens=Path(env["DW_TOKENS"]), ends=ends,
                            storage_options=json.loads(env.get("DW_STORAGE_OPTIONS", "{}")),
                            engine=engine, spark=spark, **maintained(env))
    transport = KillingTransport(env["DW_BOOTSTRAP"], session_timeout=6.0, heartbeat_interval=1.0)
    transport.sink = sink
    return make_delta_app(f"dw-{topic}", transport, topic, sink, commit_interval_ms=200,
                          max_poll_records=100, max_buffered_per_partition=200,
                          broker=f"kafka://{env['DW_BOOTSTRAP']}")


app = build() if "DW_TOPIC" in os.environ else None
