"""A worker process for the SIGKILL test: an app on a real broker writing a Parquet dataset.

    python parquet_chaos_worker.py <bootstrap> <topic> <group> <path>
"""

from __future__ import annotations

import sys

from sparkkit import Order

from aiostreams import App
from aiostreams.sinks import ParquetSink, add_parquet_sink
from aiostreams.transport.kafka import KafkaTransport


def chaos_app(bootstrap: str, topic: str, group: str, sink: ParquetSink) -> App:
    transport = KafkaTransport(bootstrap, session_timeout=6.0, heartbeat_interval=1.0)
    app = App(group, transport=transport, commit_interval_ms=200, group_instance_id="worker-1")
    app.topic(topic, key=str, value=Order)
    app.topology.add_source("orders", topic)
    add_parquet_sink(app.topology, "parquet", "orders", sink)
    return app


def sink_for(path: str, sink_type: type[ParquetSink] = ParquetSink) -> ParquetSink:
    # several chunks per batch, so a kill also lands between a chunk's conversion and the
    # write that joins them
    return sink_type(path, Order, engine="pyarrow", include=("partition", "offset"),
                     batch_rows=500, convert_rows=150)


if __name__ == "__main__":
    bootstrap, topic, group, path = sys.argv[1:5]
    chaos_app(bootstrap, topic, group, sink_for(path)).run()
