"""The stateful app of the stalled-worker tests: ``python tests/support/stateful_worker.py``.

An async step (each record awaits a random 0..``WORKER_MAX_DELAY_MS`` ms, so thousands are in
flight), a per-key count and sum (store ``agg``, SQLite, logged) and a count re-keyed through a
repartition topic (store ``rekeyed``: key ``g<value % 7>``). Environment: ``WORKER_BROKER``,
``WORKER_APP``, ``WORKER_SRC``, ``WORKER_DST`` (the aggregates' updates), ``WORKER_STATE_DIR``,
``WORKER_GUARANTEE``, ``WORKER_SESSION_TIMEOUT`` (seconds), ``WORKER_MAX_DELAY_MS``,
``WORKER_STANDBYS`` (``num_standby_replicas``), ``WORKER_HOST_ID`` (``host_id``) and
``WORKER_CACHE_BYTES`` (``cache_max_bytes``: the aggregates' record cache).
Input values are decimal integers.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from typing import Any

import aiostreams as ais
from aiostreams.transport.kafka import KafkaTransport


def add(_key: str, value: int, acc: dict[str, int]) -> dict[str, int]:
    return {"n": acc["n"] + 1, "s": acc["s"] + value}


def build() -> ais.App:
    env = os.environ
    session = float(env.get("WORKER_SESSION_TIMEOUT", "6"))
    placement: dict[str, Any] = {}
    if "WORKER_STANDBYS" in env:
        placement["num_standby_replicas"] = int(env["WORKER_STANDBYS"])
    if "WORKER_HOST_ID" in env:
        placement["host_id"] = env["WORKER_HOST_ID"]
    if "WORKER_CACHE_BYTES" in env:  # the record cache on the aggregates
        placement["cache_max_bytes"] = int(env["WORKER_CACHE_BYTES"])
    app = ais.App(
        env["WORKER_APP"],
        transport=KafkaTransport.from_url(env["WORKER_BROKER"], session_timeout=session,
                                          heartbeat_interval=session / 6),
        processing_guarantee=env.get("WORKER_GUARANTEE", "at_least_once"),
        commit_interval_ms=float(env.get("WORKER_COMMIT_MS", "200")),
        state_dir=env["WORKER_STATE_DIR"],
        **placement,
    )
    delay = float(env.get("WORKER_MAX_DELAY_MS", "50")) / 1000.0
    rng = random.Random()

    async def slow(value: str) -> int:
        await asyncio.sleep(rng.random() * delay)  # a REST call, say
        return int(value)

    src = app.topic(env["WORKER_SRC"], key=str, value=str)
    dst = app.topic(env["WORKER_DST"], key=str, value=dict)
    numbers = app.stream(src).map_values_async(slow)
    initial: dict[str, Any] = {"n": 0, "s": 0}
    (numbers.group_by_key().aggregate(initial, add, materialized="agg", persistent=True)
     .to_stream().to(dst))
    (numbers.group_by(lambda _k, v: f"g{v % 7}").count(materialized="rekeyed", persistent=True)
     .to_stream().map_values(lambda n: {"n": n}).to(dst))
    return app


if __name__ == "__main__":
    logging.basicConfig(level=os.environ.get("WORKER_LOG", "WARNING"),
                        format="%(asctime)s stateful %(levelname)s %(name)s: %(message)s")
    build().run()
