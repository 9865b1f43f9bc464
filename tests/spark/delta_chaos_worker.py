"""A worker process for the Delta SIGKILL test: an app on a real broker writing a Delta table,
which SIGKILLs itself at a chosen point of its ``nth`` batch:

* ``before_write``: the batch's replays were checked against the table; nothing written;
* ``after_write``: the batch's Delta commit landed; its offsets are not committed;
* ``after_commit``: the consumer's offset commit covering the batch returned.

    python delta_chaos_worker.py <bootstrap> <topic> <group> <path> <kill_point> <nth>
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from typing import Any

from deltakit import make_delta_app
from sparkkit import Order

from aiostreams import App
from aiostreams.sinks import DeltaSink, DeltaStep
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.transport.kafka_consumer import KafkaConsumer
from aiostreams.types import TopicPartition

KILL_POINTS = ("before_write", "after_write", "after_commit")


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class KillingSink(DeltaSink):
    def __init__(self, *args: Any, kill_point: str, nth: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kill_point, self.nth, self.written = kill_point, nth, 0

    def _after(self, step: DeltaStep) -> None:
        if step is DeltaStep.COMMITTED:
            self.written += 1
        at = {"before_write": DeltaStep.CHECKED, "after_write": DeltaStep.COMMITTED}
        if at.get(self.kill_point) is step and self.written >= self.nth - (
                step is DeltaStep.CHECKED):
            self.die()

    def die(self) -> None:
        """Kill the process (a subclass may decline)."""
        die()


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


def sink_for(path: str, kill_point: str, nth: int) -> KillingSink:
    return KillingSink(path, Order, include=("partition", "offset"), batch_rows=400,
                       batch_interval=0.5, kill_point=kill_point, nth=nth)


def chaos_app(bootstrap: str, topic: str, group: str, sink: DeltaSink) -> App:
    transport = KillingTransport(bootstrap, session_timeout=6.0, heartbeat_interval=1.0)
    if isinstance(sink, KillingSink):
        transport.sink = sink
    return make_delta_app(group, transport, topic, sink, commit_interval_ms=200,
                          group_instance_id="worker-1")


if __name__ == "__main__":
    bootstrap, topic, group, path, kill_point, nth = sys.argv[1:7]
    assert kill_point in KILL_POINTS, kill_point
    chaos_app(bootstrap, topic, group, sink_for(path, kill_point, int(nth))).run()
