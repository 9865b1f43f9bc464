"""A counting worker for restore tests: ``python tests/support/count_worker.py``.

Counts records per key in a SQLite-backed, changelog-logged store and writes every updated
count to the output topic. Environment: ``WORKER_BROKER``, ``WORKER_APP``, ``WORKER_SRC``,
``WORKER_DST``, ``WORKER_GUARANTEE``, ``WORKER_STATE_DIR``, ``WORKER_COMMIT_MS``.
"""

from __future__ import annotations

import logging
import os

import aiostreams as ais


def build() -> ais.App:
    env = os.environ
    app = ais.App(
        env["WORKER_APP"],
        broker=env["WORKER_BROKER"],
        processing_guarantee=env.get("WORKER_GUARANTEE", "at_least_once"),
        commit_interval_ms=float(env.get("WORKER_COMMIT_MS", "200")),
        state_dir=env["WORKER_STATE_DIR"],
    )
    src = app.topic(env["WORKER_SRC"], key=str, value=str)
    dst = app.topic(env["WORKER_DST"], key=str, value=int)
    (app.stream(src).group_by_key()
     .count(materialized="counts", persistent=True).to_stream().to(dst))
    return app


if __name__ == "__main__":
    logging.basicConfig(level=os.environ.get("WORKER_LOG", "WARNING"),
                        format="%(asctime)s counter %(levelname)s %(name)s: %(message)s")
    build().run()
