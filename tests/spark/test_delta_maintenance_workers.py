"""``aiostreams run --workers 3`` writing ONE Delta table with maintenance on every worker
(a compaction after about every batch: each claims the table, then OPTIMIZEs), while two
SIGKILLs move partitions between workers and a reader checks the newest version over and
over: no version, read during the run or afterwards, holds a duplicate, a gap, or a row past
the app transactions recorded in it; delta-rs, pandas and DuckDB count each input once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from chaoskit import end_offsets, worker_env
from delta_workers_app import DONE_LINE
from deltakit import assert_rust_pandas_duckdb_see_each_input_once, expected_pairs
from deltalake import DeltaTable
from sparkkit import topic_of_orders
from test_delta_workers_sigkill import run_until

from aiostreams.sinks.delta_identity import transaction_app_id
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.types import TopicPartition

pytestmark = [pytest.mark.kafka, pytest.mark.chaos, pytest.mark.timeout(600)]

N = 6_000
KILLS = 2


def check_version(path: Path, version: int, app: str, topic: str, partitions: int) -> None:
    """Read ``version``: its rows must be exactly the offsets 0 to the app transaction it
    records per source partition."""
    table = DeltaTable(str(path), version=version)
    recorded = {p: table.transaction_version(transaction_app_id(app, TopicPartition(topic, p)))
                for p in range(partitions)}
    data = table.to_pyarrow_table(columns=["partition", "offset"])
    seen = Counter(zip(data.column("partition").to_pylist(), data.column("offset").to_pylist(),
                       strict=True))
    dups = sum(n > 1 for n in seen.values())
    want = {(p, o) for p, last in recorded.items() if last is not None
            for o in range(last + 1)}
    assert dups == 0 and set(seen) == want, (version, dups, len(seen), len(want))


async def read_newest_versions(path: Path, app: str, topic: str, stop: asyncio.Event) -> int:
    """Until ``stop``, check the newest version as a reader would (in a thread)."""
    checked: set[int] = set()
    while not stop.is_set():
        if DeltaTable.is_deltatable(str(path)):
            version = (await asyncio.to_thread(DeltaTable, str(path))).version()
            if version not in checked:
                await asyncio.to_thread(check_version, path, version, app, topic, 3)
                checked.add(version)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.2)  # polling the table: nothing announces
    return len(checked)


def check_every_version(path: Path, app: str, topic: str) -> Counter[str]:
    """Check every version of the table; its commits by operation."""
    table = DeltaTable(str(path))
    for version in range(table.version() + 1):
        check_version(path, version, app, topic, 3)
    return Counter(str(c.get("operation")) for c in table.history())


async def test_three_workers_compacting_one_table_through_kills_never_duplicate_a_row(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    topic = topic_name("orders")
    await topic_of_orders(transport, topic, N, partitions=3)
    ends = await end_offsets(transport, topic, partitions=3)
    tokens = tmp_path / "kill-tokens"
    tokens.mkdir()
    for i in range(KILLS):
        (tokens / f"kill-{i}").touch()
    path = tmp_path / "orders"
    env = {k: v for k, v in worker_env().items() if not k.startswith("AIOSTREAMS_")}
    env.update(DW_BOOTSTRAP=kafka_bootstrap, DW_TOPIC=topic, DW_PATH=str(path),
               DW_KILL_POINT="after_write", DW_NTH="3", DW_TOKENS=str(tokens),
               DW_ENDS=json.dumps([ends[tp] for tp in sorted(ends)]), DW_MAINTENANCE="1")
    command = [sys.executable, "-m", "aiostreams", "run", "delta_workers_app:app",
               "--workers", "3", "--broker", f"kafka://{kafka_bootstrap}"]
    app = f"dw-{topic}"
    stop = asyncio.Event()
    reads = asyncio.create_task(read_newest_versions(path, app, topic, stop))
    try:
        code, stderr = await run_until(command, env, DONE_LINE, timeout=400)
    finally:
        stop.set()
        read_during = await reads

    assert code == 130, stderr[-4000:]  # every worker stopped gracefully after Ctrl-C
    assert list(tokens.iterdir()) == [], stderr[-4000:]  # both kills happened
    assert len(re.findall(r"restarted worker \d", stderr)) == KILLS, stderr[-4000:]
    assert read_during >= 5, read_during
    operations = await asyncio.to_thread(check_every_version, path, app, topic)
    assert operations["OPTIMIZE"] >= 2 and operations["WRITE"] >= 10, operations
    history = DeltaTable(str(path)).history()
    compactors = {c.get("aiostreams.writer") for c in history if c.get("operation") == "OPTIMIZE"}
    assert len(compactors) >= 2, compactors  # several workers compacted the one table
    expected = expected_pairs(ends)
    assert len(expected) == N
    assert_rust_pandas_duckdb_see_each_input_once(path, expected)
