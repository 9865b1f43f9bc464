"""A worker process for the Spark engine's SIGKILL test: an app on a real broker writing a
Delta table with ``DeltaSink(engine="spark")`` on a standalone cluster, which SIGKILLs itself
at a chosen point of its ``nth`` batch: the points of ``delta_chaos_worker.py`` and
``after_spark_write`` (Spark wrote the batch's files; nothing committed).

    python delta_spark_chaos_worker.py <bootstrap> <topic> <group> <path> <kill_point> <nth>
                                       <SparkConfig as JSON>
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from delta_chaos_worker import KILL_POINTS, KillingSink, chaos_app, die
from sparkkit import Order

from aiostreams.sinks import SparkConfig
from aiostreams.sinks.spark.delta_spark import SparkDeltaEngine

SPARK_KILL_POINTS = ("before_write", "after_spark_write", *KILL_POINTS[1:])
BATCH_ROWS = 3000


class KillingSparkEngine(SparkDeltaEngine):
    def __init__(self, config: SparkConfig, sink: KillingSink) -> None:
        super().__init__(config)
        self.sink = sink

    def files_written(self, batch_dir: Path, files: Sequence[Path]) -> None:
        if self.sink.kill_point == "after_spark_write" and \
                self.sink.written >= self.sink.nth - 1:
            die()


def spark_sink_for(path: str, kill_point: str, nth: int, config: SparkConfig) -> KillingSink:
    sink = KillingSink(path, Order, include=("partition", "offset"), batch_rows=BATCH_ROWS,
                       batch_interval=0.5, kill_point=kill_point, nth=nth, engine="spark",
                       spark=config)
    sink.spark_engine = KillingSparkEngine(config, sink)
    return sink


if __name__ == "__main__":
    bootstrap, topic, group, path, kill_point, nth, config = sys.argv[1:8]
    assert kill_point in SPARK_KILL_POINTS, kill_point
    sink = spark_sink_for(path, kill_point, int(nth), SparkConfig.model_validate_json(config))
    chaos_app(bootstrap, topic, group, sink).run()
