"""The app each host of ``benchmarks.fleet`` runs: a persistent count per key under
exactly-once, its updates to the output topic (the same key, so the same partition number).

Environment (``tests/support/kafkakit.worker_command`` and the fleet bed set them):
``WORKER_BROKER``, ``WORKER_APP``, ``WORKER_SRC``, ``WORKER_DST``, ``WORKER_STATE_DIR``,
``WORKER_SESSION_TIMEOUT`` (seconds); the app's own settings come from ``AIOSTREAMS_*``
(the host's ``client_id`` names it in the group's description).
"""

from __future__ import annotations

import logging
import os

import aiostreams as ais
from aiostreams.transport.kafka import KafkaTransport


def build() -> ais.App:
    env = os.environ
    session = float(env.get("WORKER_SESSION_TIMEOUT", "10"))
    app = ais.App(
        env["WORKER_APP"],
        transport=KafkaTransport.from_url(env["WORKER_BROKER"], session_timeout=session,
                                          heartbeat_interval=session / 6),
        processing_guarantee="exactly_once",
        commit_interval_ms=100,
        state_dir=env["WORKER_STATE_DIR"],
    )
    src = app.topic(env["WORKER_SRC"], key=str, value=str)
    dst = app.topic(env["WORKER_DST"], key=str, value=int)
    (app.stream(src).group_by_key().count(materialized="counts", persistent=True)
     .to_stream().to(dst))
    return app


if __name__ == "__main__":
    logging.basicConfig(level="INFO",
                        format="%(asctime)s fleet %(levelname)s %(name)s: %(message)s")
    build().run()
