"""The Spark guide's whole pipeline (docs/guides/spark.md, "The whole pipeline"): an app
writes a Delta table and two Iceberg tables (the SQL catalog's and a REST catalog's) from
one stream while a Spark job reads each incrementally (Delta's streaming source with its
checkpoint; Iceberg's incremental read between snapshot ids; Iceberg's streaming source
through the REST catalog) in rounds, two of them while the app writes; across the rounds
Spark reads every input once from each table, and each round reads something new. The
job's code is the guide's, word for word."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import textwrap
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any

import pytest
from sparkkit import Order, create_topic, order_records, produce

from aiostreams import App
from aiostreams.localcatalog import LocalRestCatalog
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import TopicPartition

HERE = Path(__file__).parent
REPO = HERE.parent.parent
GUIDE = REPO / "docs" / "guides" / "spark.md"
READER = HERE / "lake_spark_reader.py"
ROUNDS = 2  # rounds while the app writes, then the last one
PER_ROUND = 200  # records per half-round


def marked_regions() -> dict[str, str]:
    """The reader's ``--8<--`` regions, dedented."""
    found = re.findall(r"# --8<-- \[start:(\w+)\]\n(.*?)\n\s*# --8<-- \[end:\1\]",
                       READER.read_text(), re.S)
    return {name: textwrap.dedent(body) for name, body in found}


def test_the_guides_spark_job_is_the_code_the_pipeline_test_runs() -> None:
    regions = marked_regions()
    assert set(regions) == {"session", "delta", "iceberg", "rest_session", "rest_stream"}
    section = GUIDE.read_text().split("## The whole pipeline", 1)[1].split("\n## ", 1)[0]
    blocks = "\n".join(re.findall(r"```python\n(.*?)```", section, re.S))
    for name, body in regions.items():
        assert body in blocks, f"the guide's {name!r} block differs from {READER.name}"


class SparkJob:
    """The reader process: one round per :meth:`round`, the outputs' pairs at :meth:`last`."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def ask(self, command: str, prefix: str) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{command}\n".encode())
        await self.process.stdin.drain()
        while True:
            line = (await self.process.stdout.readline()).decode()
            if not line:
                raise AssertionError(f"the Spark job ended (exit {await self.process.wait()})")
            if line.startswith(prefix + " "):
                return json.loads(line.split(" ", 1)[1])

    async def round(self) -> dict[str, int]:
        result: dict[str, int] = await self.ask("round", "ROUND")
        return result

    async def last(self) -> tuple[dict[str, int], dict[str, list[list[int]]]]:
        counts = await self.ask("last", "ROUND")
        assert self.process.stdout is not None
        line = (await self.process.stdout.readline()).decode()
        while not line.startswith("FINAL "):
            assert line, "the Spark job ended before printing FINAL"
            line = (await self.process.stdout.readline()).decode()
        return counts, json.loads(line.split(" ", 1)[1])


@pytest.mark.spark
@pytest.mark.timeout(600)
async def test_spark_reads_each_row_once_from_delta_and_iceberg_while_the_app_writes(
        tmp_path: Path) -> None:
    with LocalRestCatalog(tmp_path / "rest-lake") as rest:
        await run_pipeline(tmp_path, rest)


async def run_pipeline(tmp_path: Path, rest: LocalRestCatalog) -> None:
    broker = MemoryBroker()
    transport = MemoryTransport(broker)
    await create_topic(transport, "orders", 2)
    app = App("lake-pipeline", transport=transport, commit_interval_ms=100)
    stream = app.stream(app.topic("orders", key=str, value=Order))
    metadata = ("partition", "offset")
    stream.to_delta(tmp_path / "orders-delta", Order, include=metadata, batch_interval=0.2)
    iceberg = stream.to_iceberg("lake.orders", Order, warehouse=tmp_path / "lake",
                                include=metadata, batch_interval=0.2)
    stream.to_iceberg("lake.orders", Order, catalog=rest.client(), include=metadata,
                      batch_interval=0.2)
    config = {"delta": str(tmp_path / "orders-delta"),
              "iceberg_db": str(tmp_path / "lake" / "catalog.db"),
              "iceberg_warehouse": (tmp_path / "lake").resolve().as_uri(),
              "iceberg_table": "lake.orders", "work": str(tmp_path / "job"),
              "rest_uri": rest.uri}
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(READER), json.dumps(config), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    job = SparkJob(process)
    log_tail: deque[str] = deque(maxlen=60)

    async def keep_log() -> None:
        assert process.stderr is not None
        async for line in process.stderr:
            log_tail.append(line.decode(errors="replace"))

    logging = asyncio.create_task(keep_log())
    next_id = 0

    async def write(n: int) -> None:
        nonlocal next_id
        await produce(transport, "orders", order_records(range(next_id, next_id + n)))
        next_id += n

    rounds: list[dict[str, int]] = []
    try:
        async with app:
            began = time.monotonic()
            for _ in range(ROUNDS):
                await write(PER_ROUND)
                await app.wait_until_caught_up(timeout=60)  # durable in both tables
                await write(PER_ROUND)  # being written while Spark reads
                rounds.append(await job.round())
                print(f"round {len(rounds)}: {rounds[-1]} at {time.monotonic() - began:.1f} s")
            await app.wait_until_caught_up(timeout=60)
            last, outputs = await job.last()
            rounds.append(last)
            print(f"last round: {last} at {time.monotonic() - began:.1f} s")
        assert await process.wait() == 0, "".join(log_tail)
    except BaseException:
        print("the Spark job's log ends:\n" + "".join(log_tail))
        raise
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await logging

    ends = {TopicPartition("orders", p): broker.end_offset(TopicPartition("orders", p)) - 1
            for p in range(2)}
    expected = {(tp.partition, o) for tp, last_offset in ends.items()
                for o in range(last_offset + 1)}
    assert len(expected) == 2 * ROUNDS * PER_ROUND
    assert iceberg.metrics.rows_written == len(expected)
    for table in ("delta", "iceberg", "rest"):
        seen = Counter((row[0], row[1]) for row in outputs[table])
        assert set(seen) == expected, table  # nothing lost
        assert max(seen.values()) == 1, table  # nothing read twice
    # every round while the app wrote read something new: incremental, not one last read
    delta_rounds = [r["delta"] for r in rounds]
    assert sum(delta_rounds) == len(expected) and all(delta_rounds[:ROUNDS]), delta_rounds
    assert all(r["iceberg"] for r in rounds[:ROUNDS]), rounds
    rest_rounds = [r["rest"] for r in rounds]
    assert sum(rest_rounds) == len(expected) and all(rest_rounds[:ROUNDS]), rest_rounds
    iceberg_rounds = Counter(after for _, _, after in outputs["iceberg"])
    assert len(iceberg_rounds) >= ROUNDS, iceberg_rounds  # rows from as many starting points
