"""A versioned-join worker for restore tests: ``python tests/support/versioned_worker.py``.

Reads a table topic into a versioned table (SQLite, changelogged) and joins an order
stream with it as of each order's timestamp, through a grace buffer, writing
``"<order>:<tier>"`` to the output topic (and the table's updates to ``<dst>-changes``).
Environment: ``WORKER_BROKER``, ``WORKER_APP``, ``WORKER_SRC`` (orders), ``WORKER_TABLE``
(tiers), ``WORKER_DST``, ``WORKER_GUARANTEE``, ``WORKER_STATE_DIR`` (unset: in-memory
stores), ``WORKER_COMMIT_MS``.
"""

from __future__ import annotations

import logging
import os

import aiostreams as ais


def declare(app: ais.App, src: str, table: str, dst: str, *, persistent: bool) -> None:
    """The topology (also built in-process by the test, for the expected output). The
    table's updates also go to ``<dst>-changes``, so a test can see it has loaded them."""
    orders = app.topic(src, key=str, value=str, partitions=2)
    tiers = app.topic(table, key=str, value=str, partitions=2)
    out = app.topic(dst, key=str, value=str, partitions=2)
    versioned = app.table(tiers, materialized="tiers", persistent=persistent,
                          versioned=ais.Versioned(history_retention=30.0))
    versioned.to_stream().to(app.topic(f"{dst}-changes", key=str, value=str, partitions=2))
    (app.stream(orders)
     .left_join(versioned, lambda order, tier: f"{order}:{tier}", grace=4.0, name="enrich")
     .to(out))


def build() -> ais.App:
    env = os.environ
    state = env.get("WORKER_STATE_DIR")
    app = ais.App(
        env["WORKER_APP"],
        broker=env["WORKER_BROKER"],
        processing_guarantee=env.get("WORKER_GUARANTEE", "exactly_once"),
        commit_interval_ms=float(env.get("WORKER_COMMIT_MS", "200")),
        state_dir=state,
        max_task_idle_ms=5000.0,
        max_in_flight=64,
    )
    declare(app, env["WORKER_SRC"], env["WORKER_TABLE"], env["WORKER_DST"],
            persistent=state is not None)
    return app


if __name__ == "__main__":
    logging.basicConfig(level=os.environ.get("WORKER_LOG", "WARNING"),
                        format="%(asctime)s versioned %(levelname)s %(name)s: %(message)s")
    build().run()
