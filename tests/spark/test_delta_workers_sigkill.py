"""``aiostreams run app --workers 2`` writing ONE Delta table, exactly once while partitions
move between workers: two worker processes share a real broker's partitions; two SIGKILLs
(at a chosen point of a batch, in whichever workers reach it first) make the group move
partitions to the survivor and back to the restarted worker, while both keep committing to
the table; delta-rs, pandas, DuckDB and Spark (its Delta source on a standalone cluster)
then each count every input exactly once - on a local table, and on an S3 table (moto's
server on 127.0.0.1; Spark reads it through ``hadoop-aws``)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from chaoskit import REPO, end_offsets, worker_env
from delta_chaos_worker import KILL_POINTS
from delta_workers_app import DONE_LINE
from deltakit import assert_every_reader_sees_each_input_once, expected_pairs
from deltalake import DeltaTable
from s3kit import HADOOP_AWS, S3Server
from sparkkit import topic_of_orders

from aiostreams.transport.kafka import KafkaTransport

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.chaos,
              pytest.mark.timeout(600)]

N = 20_000
KILLS = 2


async def run_until(command: list[str], env: dict[str, str], line: str,
                    timeout: float) -> tuple[int, str]:
    """Run ``command`` until its stderr has ``line``, then SIGINT it; its exit code and
    stderr."""
    proc = await asyncio.create_subprocess_exec(
        *command, cwd=REPO, env=env, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, start_new_session=True)
    assert proc.stderr is not None
    seen: list[str] = []

    async def read_until_done() -> None:
        assert proc.stderr is not None
        async for raw in proc.stderr:
            seen.append(raw.decode(errors="replace"))
            if line in seen[-1]:
                return
        raise AssertionError("the supervisor ended first:\n" + "".join(seen[-80:]))

    try:
        try:
            await asyncio.wait_for(read_until_done(), timeout)
        except TimeoutError:
            raise AssertionError(f"no {line!r} within {timeout} s:\n"
                                 + "".join(seen[-60:])) from None
        proc.send_signal(signal.SIGINT)
        rest = await asyncio.wait_for(proc.stderr.read(), 120)
        seen.append(rest.decode(errors="replace"))
        return await proc.wait(), "".join(seen)
    except BaseException:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        raise


@pytest.mark.parametrize(("kill_point", "store"), [
    *((point, "local") for point in KILL_POINTS), ("after_write", "s3")])
async def test_two_workers_killed_during_rebalances_leave_each_input_once_for_every_reader(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path, kill_point: str, store: str,
        delta_spark: Any, request: pytest.FixtureRequest) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    topic = topic_name("orders")
    await topic_of_orders(transport, topic, N)
    ends = await end_offsets(transport, topic)
    tokens = tmp_path / "kill-tokens"
    tokens.mkdir()
    for i in range(KILLS):
        (tokens / f"kill-{i}").touch()
    path: Path | str = tmp_path / "orders"
    options: dict[str, str] | None = None
    if store == "s3":
        server: S3Server = request.getfixturevalue("s3_server")
        path, options = f"s3a://{server.create_bucket()}/orders", server.storage_options
        delta_spark = delta_spark.model_copy(update={
            "packages": (*delta_spark.packages, HADOOP_AWS),
            "conf": {**delta_spark.conf, **server.spark_conf}})
    env = {k: v for k, v in worker_env().items() if not k.startswith("AIOSTREAMS_")}
    env.update(DW_BOOTSTRAP=kafka_bootstrap, DW_TOPIC=topic, DW_PATH=str(path),
               DW_KILL_POINT=kill_point, DW_NTH="3",
               DW_TOKENS=str(tokens), DW_ENDS=json.dumps([ends[tp] for tp in sorted(ends)]),
               DW_STORAGE_OPTIONS=json.dumps(options or {}))
    command = [sys.executable, "-m", "aiostreams", "run", "delta_workers_app:app",
               "--workers", "2", "--broker", f"kafka://{kafka_bootstrap}"]
    code, stderr = await run_until(command, env, DONE_LINE, timeout=400)

    assert code == 130, stderr[-4000:]  # every worker stopped gracefully after Ctrl-C
    assert list(tokens.iterdir()) == [], stderr[-4000:]  # both kills happened
    assert len(re.findall(r"restarted worker \d", stderr)) == KILLS, stderr[-4000:]
    assert len(set(re.findall(r"pid (\d+) dies", stderr))) == KILLS
    expected = expected_pairs(ends)
    assert len(expected) == N
    assert_every_reader_sees_each_input_once(path, expected, delta_spark, options)
    history = DeltaTable(str(path), storage_options=options).history()
    writers = Counter(c.get("aiostreams.writer") for c in history
                      if c.get("operation") == "WRITE")
    assert None not in writers and len(writers) >= 3, writers  # two workers and a restart
