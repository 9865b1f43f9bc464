"""``aiostreams run app --workers 2`` with the Delta sink's Spark engine: each worker process
writes its batches' files with a SparkSession of its own and commits them with delta-rs into
ONE table; two SIGKILLs (after a batch's commit, in whichever workers get there first) move
partitions to the survivor and back to the restarted worker. delta-rs, pandas and DuckDB then
each count every input exactly once, and every commit was made by the Spark engine."""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from delta_workers_app import DONE_LINE
from deltakit import (
    REPO,
    end_offsets,
    pairs,
    read_with_deltars,
    read_with_duckdb,
    read_with_pandas,
)
from deltalake import DeltaTable
from sparkkit import create_topic, order_records, produce
from test_delta_workers_sigkill import run_until

from aiostreams.transport.kafka import KafkaTransport

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.chaos,
              pytest.mark.timeout(900)]

HERE = Path(__file__).parent
N = 12_000
KILLS = 2


async def test_two_spark_engine_workers_killed_during_rebalances_leave_each_input_once(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    topic = topic_name("orders")
    await create_topic(transport, topic, 2)
    await produce(transport, topic, order_records(range(N)))
    ends = await end_offsets(transport, topic)
    tokens = tmp_path / "kill-tokens"
    tokens.mkdir()
    for i in range(KILLS):
        (tokens / f"kill-{i}").touch()
    path = tmp_path / "orders"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOSTREAMS_")}
    env.update(PYTHONPATH=os.pathsep.join([str(HERE), str(REPO)]), DW_BOOTSTRAP=kafka_bootstrap,
               DW_TOPIC=topic, DW_PATH=str(path), DW_KILL_POINT="after_write", DW_NTH="3",
               DW_TOKENS=str(tokens), DW_ENDS=json.dumps([ends[tp] for tp in sorted(ends)]),
               DW_ENGINE="spark")
    command = [sys.executable, "-m", "aiostreams", "run", "delta_workers_app:app",
               "--workers", "2", "--broker", f"kafka://{kafka_bootstrap}"]
    code, stderr = await run_until(command, env, DONE_LINE, timeout=700)

    assert code == 130, stderr[-4000:]  # every worker stopped gracefully after Ctrl-C
    assert list(tokens.iterdir()) == [], stderr[-4000:]  # both kills happened
    assert len(re.findall(r"restarted worker \d", stderr)) == KILLS, stderr[-4000:]
    expected = {(tp.partition, offset) for tp, last in ends.items() for offset in range(last + 1)}
    assert len(expected) == N
    readers = {"delta-rs": pairs(read_with_deltars(path, None)),
               "pandas": read_with_pandas(path, None),
               "duckdb": read_with_duckdb(path, None)}
    for reader, seen in readers.items():
        counts = Counter(seen)
        lost = expected - counts.keys()
        duplicated = {pair for pair, n in counts.items() if n > 1}
        assert (len(lost), len(duplicated), len(seen)) == (0, 0, N), reader
    writes = [c for c in DeltaTable(str(path)).history() if c.get("operation") == "WRITE"]
    engines = Counter(c.get("aiostreams.engine") for c in writes if c.get("aiostreams.app"))
    assert set(engines) == {"spark"}, engines  # the batches' commits (not schema merges)
    writers = Counter(c.get("aiostreams.writer") for c in writes)
    assert None not in writers and len(writers) >= 3, writers  # two workers and a restart
