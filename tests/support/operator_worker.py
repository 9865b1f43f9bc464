"""A worker running one stateful DSL operator, for the restore tests of each operator:
``python tests/support/operator_worker.py``.

Environment: ``WORKER_OPERATOR`` (a key of :data:`OPERATORS`), ``WORKER_BROKER``,
``WORKER_APP``, ``WORKER_SRC`` (and ``WORKER_SRC2``, the right side of a join),
``WORKER_DST``, ``WORKER_STATE_DIR``, ``WORKER_COMMIT_MS``; always exactly-once. Keys are
strings, values ints; :func:`build` is also what the tests run uninterrupted on the memory
broker to know the expected outputs.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import aiostreams as ais
from aiostreams.windows import (
    JoinWindows,
    SessionWindowedSerde,
    SessionWindows,
    SlidingWindows,
    TimeWindowedSerde,
    TumblingWindows,
    until_time_limit,
    until_window_closes,
)


def _time_emit_final(app: ais.App, src: ais.Topic, _: ais.Topic | None, dst: str) -> None:
    (app.stream(src).group_by_key().windowed_by(TumblingWindows(5.0, grace=1.0))
     .emit_on_window_close().count(materialized="counts", persistent=True, retention=60.0)
     .to_stream().to(app.topic(dst, key=TimeWindowedSerde(str, size=5.0), value=int)))


def _sliding_emit_final(app: ais.App, src: ais.Topic, _: ais.Topic | None,
                        dst: str) -> None:
    (app.stream(src).group_by_key()
     .windowed_by(SlidingWindows.of_time_difference_and_grace(3.0, 1.0))
     .emit_on_window_close().count(materialized="counts", persistent=True).to_stream()
     .to(app.topic(dst, key=TimeWindowedSerde(str, size=3.0), value=int)))


def _stream_stream_join(app: ais.App, src: ais.Topic, src2: ais.Topic | None,
                        dst: str) -> None:
    assert src2 is not None
    (app.stream(src).join(app.stream(src2), lambda a, b: a * 1000 + b,
                          JoinWindows(2.0, grace=1000.0))
     .to(app.topic(dst, key=str, value=int)))


def _suppress_window_closes(app: ais.App, src: ais.Topic, _: ais.Topic | None,
                            dst: str) -> None:
    (app.stream(src).group_by_key().windowed_by(TumblingWindows(5.0, grace=1.0))
     .count(materialized="counts", persistent=True).suppress(until_window_closes())
     .to_stream().to(app.topic(dst, key=TimeWindowedSerde(str, size=5.0), value=int)))


def _suppress_time_limit(app: ais.App, src: ais.Topic, _: ais.Topic | None,
                         dst: str) -> None:
    (app.stream(src).group_by_key().count(materialized="counts", persistent=True)
     .suppress(until_time_limit(2.0)).to_stream().to(app.topic(dst, key=str, value=int)))


def _session_emit_final(app: ais.App, src: ais.Topic, _: ais.Topic | None,
                        dst: str) -> None:
    (app.stream(src).group_by_key().windowed_by(SessionWindows(2.0, grace=1.0))
     .emit_on_window_close().count(materialized="counts", persistent=True).to_stream()
     .to(app.topic(dst, key=SessionWindowedSerde(str), value=int)))


def _table_table_join(app: ais.App, src: ais.Topic, src2: ais.Topic | None,
                      dst: str) -> None:
    assert src2 is not None
    (app.table(src, materialized="left", persistent=True)
     .join(app.table(src2, materialized="right", persistent=True),
           lambda a, b: a * 1000 + b)
     .to_stream().to(app.topic(dst, key=str, value=int)))


OPERATORS: dict[str, Callable[[ais.App, ais.Topic, ais.Topic | None, str], None]] = {
    "time_emit_final": _time_emit_final,
    "sliding_emit_final": _sliding_emit_final,
    "stream_stream_join": _stream_stream_join,
    "suppress_window_closes": _suppress_window_closes,
    "suppress_time_limit": _suppress_time_limit,
    "session_emit_final": _session_emit_final,
    "table_table_join": _table_table_join,
}


def build(app: ais.App, operator: str, src: str, src2: str | None, dst: str,
          partitions: int = 2) -> None:
    """Declare ``operator`` on ``app``, reading ``src`` (and ``src2``) into ``dst``."""
    left = app.topic(src, key=str, value=int, partitions=partitions)
    right = (None if src2 is None
             else app.topic(src2, key=str, value=int, partitions=partitions))
    OPERATORS[operator](app, left, right, dst)


def main() -> Any:
    env = os.environ
    app = ais.App(env["WORKER_APP"], broker=env["WORKER_BROKER"],
                  processing_guarantee="exactly_once",
                  commit_interval_ms=float(env.get("WORKER_COMMIT_MS", "100")),
                  state_dir=env["WORKER_STATE_DIR"])
    build(app, env["WORKER_OPERATOR"], env["WORKER_SRC"], env.get("WORKER_SRC2") or None,
          env["WORKER_DST"])
    return app.run()


if __name__ == "__main__":
    logging.basicConfig(level=os.environ.get("WORKER_LOG", "WARNING"),
                        format="%(asctime)s operator %(levelname)s %(name)s: %(message)s")
    main()
