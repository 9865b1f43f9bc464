"""A worker process for the Iceberg SIGKILL tests: an app on a real broker writing an Iceberg
table (the SQL catalog in a warehouse directory), which SIGKILLs itself at a chosen point of
its ``nth`` batch:

* ``before_write``: the batch's replays were checked against the table; nothing written;
* ``after_files``: the batch's data files and manifests are written, not committed (orphans);
* ``after_write``: the batch's snapshot landed; its offsets are not committed;
* ``after_commit``: the consumer's offset commit covering the batch returned;

and, with table maintenance on (``maintenance``: compaction after every batch), at its
``nth`` compaction that rewrites files:

* ``during_compaction``: the compacted files are written, the replace snapshot is not
  committed (orphans);
* ``after_compaction``: the replace snapshot landed.

    python iceberg_chaos_worker.py <bootstrap> <topic> <group> <warehouse> <kill_point> <nth>
                                   [maintenance]

Also the app of the ``--workers`` test (``aiostreams run iceberg_chaos_worker:app``), set up
from the environment: ``IW_BOOTSTRAP``, ``IW_TOPIC``, ``IW_WAREHOUSE``, ``IW_KILL_POINT``,
``IW_NTH``, ``IW_GUARANTEE``, ``IW_MAINTENANCE`` (set: maintenance on), ``IW_TOKENS`` (a
directory of kill tokens: a process dies only if it can delete one, so the test sets how many
kills happen in all) and ``IW_ENDS`` (JSON: the last offset of each partition); a worker
whose table covers them after a flush prints :data:`DONE_LINE`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from icebergkit import TABLE, Order, make_iceberg_app, table_durable

from aiostreams import App
from aiostreams.sinks import TableMaintenance
from aiostreams.sinks.iceberg_sink import IcebergSink, IcebergStep
from aiostreams.sinks.maintenance import MaintenanceStep
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.transport.kafka_consumer import KafkaConsumer
from aiostreams.types import TopicPartition

KILL_POINTS = ("before_write", "after_files", "after_write", "after_commit")
MAINTENANCE_KILL_POINTS = ("during_compaction", "after_compaction")
MAINTENANCE = TableMaintenance(compact_every=0.2, vacuum_every=2.0, retention=120.0,
                               target_file_size=1 << 20)
"""Compaction after (about) every batch; vacuums that expire and delete only what is two
minutes old (a test is over by then: no file a reader or another writer may still need)."""
DONE_LINE = "iceberg-workers-app: the table holds every input offset"
_AT = {"before_write": IcebergStep.CHECKED, "after_files": IcebergStep.FILES_WRITTEN,
       "after_write": IcebergStep.COMMITTED}
_MAINTENANCE_AT = {"during_compaction": MaintenanceStep.REWRITTEN,
                   "after_compaction": MaintenanceStep.COMPACTED}


class KillingSink(IcebergSink):
    def __init__(self, *args: Any, kill_point: str, nth: int, tokens: Path | None = None,
                 ends: dict[TopicPartition, int] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kill_point, self.nth, self.written = kill_point, nth, 0
        self.tokens, self.ends = tokens, ends
        self.compactions = 0  # that reached the kill point's step

    def _after(self, step: IcebergStep) -> None:
        if step is IcebergStep.COMMITTED:
            self.written += 1
        if _AT.get(self.kill_point) is step and self.written >= self.nth - (
                step is not IcebergStep.COMMITTED):
            self.die()

    def _after_maintenance(self, step: MaintenanceStep) -> None:
        if _MAINTENANCE_AT.get(self.kill_point) is step:
            self.compactions += 1
            if self.compactions >= self.nth:
                self.die()

    def die(self) -> None:
        """SIGKILL this process (with tokens: only if one is left to take)."""
        if self.tokens is not None:
            for token in sorted(self.tokens.iterdir()):
                try:
                    token.unlink()
                except FileNotFoundError:
                    continue  # another process took it
                break
            else:
                return
            print(f"iceberg-workers-app: pid {os.getpid()} dies ({self.kill_point}, batch "
                  f"{self.written})", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

    async def flush(self) -> None:
        await super().flush()
        if self.ends is not None:
            durable = table_durable(self)
            if all(durable.get(tp, -1) >= last for tp, last in self.ends.items()):
                print(DONE_LINE, file=sys.stderr, flush=True)


class KillingTransport(KafkaTransport):
    """Kills the process once an offset commit returns after the sink's ``nth`` batch."""

    sink: KillingSink | None = None

    def consumer(self, group_id: str | None, **kwargs: Any) -> KafkaConsumer:
        consumer = super().consumer(group_id, **kwargs)
        commit = consumer.commit
        sink = self.sink

        async def commit_then_die(offsets: Mapping[TopicPartition, int]) -> None:
            await commit(offsets)
            if sink is not None and sink.kill_point == "after_commit" \
                    and sink.written >= sink.nth:
                sink.die()

        consumer.commit = commit_then_die  # type: ignore[method-assign]
        return consumer


def chaos_app(bootstrap: str, topic: str, group: str, sink: IcebergSink,
              **settings: Any) -> App:
    transport = KillingTransport(bootstrap, session_timeout=6.0, heartbeat_interval=1.0)
    if isinstance(sink, KillingSink):
        transport.sink = sink
    settings.setdefault("max_poll_records", 100)  # batches of about batch_rows, not a topic's
    settings.setdefault("max_buffered_per_partition", 200)  # worth in one first commit
    return make_iceberg_app(group, transport, topic, sink, commit_interval_ms=200, **settings)


def sink_for(warehouse: str, kill_point: str, nth: int, *, maintenance: bool = False,
             **kwargs: Any) -> KillingSink:
    return KillingSink(TABLE, Order, warehouse=warehouse, include=("partition", "offset"),
                       partition_by=("region",) if maintenance else (),
                       maintenance=MAINTENANCE if maintenance else None,
                       batch_rows=400, batch_interval=0.5, kill_point=kill_point, nth=nth,
                       **kwargs)


def build_from_env() -> App:
    env = os.environ
    topic = env["IW_TOPIC"]
    ends = {TopicPartition(topic, p): last for p, last in enumerate(json.loads(env["IW_ENDS"]))}
    sink = sink_for(env["IW_WAREHOUSE"], env["IW_KILL_POINT"], int(env["IW_NTH"]),
                    tokens=Path(env["IW_TOKENS"]), ends=ends,
                    maintenance="IW_MAINTENANCE" in env)
    return chaos_app(env["IW_BOOTSTRAP"], topic, f"iw-{topic}", sink,
                     processing_guarantee=env.get("IW_GUARANTEE", "at_least_once"),
                     broker=f"kafka://{env['IW_BOOTSTRAP']}")


app = build_from_env() if "IW_TOPIC" in os.environ else None

if __name__ == "__main__":
    bootstrap, topic, group, warehouse, kill_point, nth = sys.argv[1:7]
    maintained = sys.argv[7:] == ["maintenance"]
    assert kill_point in KILL_POINTS + MAINTENANCE_KILL_POINTS, kill_point
    chaos_app(bootstrap, topic, group,
              sink_for(warehouse, kill_point, int(nth), maintenance=maintained),
              group_instance_id="worker-1").run()
