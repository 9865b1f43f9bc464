"""A worker process for integration tests: ``python tests/integration/kafka_worker.py``.

Configured by environment variables so tests can start, SIGTERM and SIGKILL it:

``WORKER_BROKER`` (kafka://…), ``WORKER_APP`` (group id), ``WORKER_SRC``, ``WORKER_DST``,
``WORKER_GUARANTEE`` (at_least_once | exactly_once), ``WORKER_MAX_DELAY_MS`` (each record
awaits a random 0..N ms), ``WORKER_INSTANCE`` (group_instance_id / transactional id suffix),
``WORKER_SESSION_TIMEOUT`` (seconds; the heartbeat goes every sixth of it),
``WORKER_DRAIN_TIMEOUT`` (seconds), ``WORKER_STATE_DIR`` (when set, each record also
counts its key in a persistent, changelogged SQLite store ``seen``: every commit then reads
the changelog's end offsets for the checkpoint, as a stateful app's does),
``WORKER_BREAK_FETCHER_AFTER`` (after that many records, aiokafka's fetcher task dies of a
``KeyError`` in a fetch response, as a flipped bit in a topic name kills it; logged as
``breaking aiokafka's fetcher``), ``WORKER_CORRUPT_FETCH_LIMIT``.

Each output is ``<input value>`` under the input key, so a test can check every input has
exactly one (or at least one) output and that per-key order holds.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random

import aiostreams as ais
from aiostreams.serde import LongSerde, StrSerde
from aiostreams.state.sqlite import SQLiteKeyValueStore
from aiostreams.state.store_spec import StoreSpec
from aiostreams.transport.kafka import KafkaTransport

APP: ais.App | None = None
PROCESSED = 0


def break_fetcher() -> None:
    """Make aiokafka's fetcher task die at its next fetch response, of the ``KeyError`` a
    topic name it did not ask for raises (its own fetch code, reached from outside)."""
    assert APP is not None and APP.inspect().worker is not None
    fetcher = APP.inspect().worker._consumer._consumer._fetcher  # type: ignore[union-attr]

    async def corrupt_response(assignment: object, node_id: int, request: object) -> bool:
        raise KeyError("TopicPartition(topic='broken-on-purpose', partition=0)")

    fetcher._proc_fetch_request = corrupt_response
    logging.getLogger("worker").warning("breaking aiokafka's fetcher")


class RandomDelay(ais.Processor[str, str]):
    def __init__(self, max_delay: float) -> None:
        self.max_delay = max_delay
        self.rng = random.Random()
        self.stateful = bool(os.environ.get("WORKER_STATE_DIR"))
        self.break_after = int(os.environ.get("WORKER_BREAK_FETCHER_AFTER", "0"))

    async def process(self, record: ais.Record[str, str]) -> None:
        global PROCESSED
        PROCESSED += 1
        if self.break_after == PROCESSED:
            break_fetcher()
        if self.max_delay > 0:
            await asyncio.sleep(self.rng.random() * self.max_delay)
        if self.stateful:
            seen = self.context.store("seen")
            seen.put(record.key, (await seen.get(record.key) or 0) + 1)
        self.context.forward(record)


def build() -> ais.App:
    env = os.environ
    instance = env.get("WORKER_INSTANCE")
    transport: dict[str, object] = {}
    if "WORKER_SESSION_TIMEOUT" in env:
        session = float(env["WORKER_SESSION_TIMEOUT"])
        transport["transport"] = KafkaTransport.from_url(
            env["WORKER_BROKER"], session_timeout=session, heartbeat_interval=session / 6)
    else:
        transport["broker"] = env["WORKER_BROKER"]
    app = ais.App(
        env["WORKER_APP"],
        **transport,  # type: ignore[arg-type]
        drain_timeout=float(env.get("WORKER_DRAIN_TIMEOUT", "30")),
        processing_guarantee=env.get("WORKER_GUARANTEE", "at_least_once"),
        commit_interval_ms=float(env.get("WORKER_COMMIT_MS", "200")),
        group_instance_id=instance,
        max_in_flight=int(env.get("WORKER_MAX_IN_FLIGHT", "1000")),
        state_dir=env.get("WORKER_STATE_DIR") or None,
        corrupt_fetch_limit=int(env.get("WORKER_CORRUPT_FETCH_LIMIT", "5")),
    )
    app.topic(env["WORKER_SRC"], key=str, value=str)
    app.topic(env["WORKER_DST"], key=str, value=str)
    delay = float(env.get("WORKER_MAX_DELAY_MS", "0")) / 1000.0
    app.topology.add_source("src", env["WORKER_SRC"]).add_processor(
        "delay", lambda: RandomDelay(delay), "src").add_sink("sink", env["WORKER_DST"], "delay")
    if env.get("WORKER_STATE_DIR"):
        app.topology.add_store(StoreSpec("seen", lambda: SQLiteKeyValueStore(
            "seen", StrSerde(), LongSerde())), "delay")
    return app


def __getattr__(name: str) -> ais.App:
    """``kafka_worker:app`` for ``aiostreams run`` (built on first use: it reads the
    environment)."""
    if name == "app":
        return build()
    raise AttributeError(name)


if __name__ == "__main__":
    logging.basicConfig(level=os.environ.get("WORKER_LOG", "WARNING"),
                        format="%(asctime)s worker %(levelname)s %(name)s: %(message)s")
    APP = build()
    APP.run()
