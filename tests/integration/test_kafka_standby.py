"""Standby replicas on a real broker: two worker processes, ``num_standby_replicas=1``, each
its own "host" and state directory. The first runs every task (it is caught up, so the
state-aware assignor keeps them there); the second follows their changelogs. The first is
SIGKILLed mid-stream: the second takes the tasks over, restores each store from where its
copy had got to - a tail, never the changelog's start - and the outputs are exact
(exactly-once, read_committed)."""

from __future__ import annotations

import asyncio
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from appkit import create_topic, produce
from kafkakit import start_worker, stop_worker, until_logged, wait_committed
from stateful_check import expected, keyed_inputs, until_exact

from aiostreams.transport.kafka import KafkaTransport

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

SCRIPT = Path(__file__).parents[1] / "support" / "stateful_worker.py"
PARTITIONS = 2
KEYS = 20
RECORDS = 4_000
TASKS = ("0_0", "0_1", "1_0", "1_1")
# an active task's restore (a standby's says "standby task ...")
RESTORED = re.compile(r"(?<!standby )task \S+: restored (\d+) record\(s\) into "
                      r"'(agg|rekeyed)' from (\S+) \[(\d+), (\d+)\)")
UP_TO_DATE = re.compile(r"(?<!standby )task \S+: store '(agg|rekeyed)' is up to date at "
                        r"(\S+) offset (\d+)")


async def test_a_standby_takes_over_a_sigkilled_workers_tasks_restoring_only_a_tail(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, app = topic_name("in"), topic_name("out"), topic_name("standby")
    await create_topic(transport, src, PARTITIONS)
    await create_topic(transport, dst, PARTITIONS)
    records = keyed_inputs(RECORDS, KEYS)
    half = RECORDS // 2
    env: dict[str, Any] = dict(script=SCRIPT, WORKER_GUARANTEE="exactly_once",
                               WORKER_SESSION_TIMEOUT="4", WORKER_MAX_DELAY_MS="5",
                               WORKER_COMMIT_MS="100", WORKER_LOG="INFO", WORKER_STANDBYS="1",
                               # a host without the state is not caught up on these short
                               # changelogs: the tasks stay, the other host follows them
                               AIOSTREAMS_ACCEPTABLE_RECOVERY_LAG="10")
    first_log, second_log = tmp_path / "first.log", tmp_path / "second.log"
    with first_log.open("wb") as sink:
        first = start_worker(kafka_bootstrap, app, src, dst, stderr=sink.fileno(),
                             WORKER_HOST_ID="host-a", WORKER_STATE_DIR=str(tmp_path / "a"), **env)
    second = None
    try:
        await produce(transport, src, records[:half])
        await wait_committed(transport, app, src, PARTITIONS, half, timeout=120)
        with second_log.open("wb") as sink:
            second = start_worker(kafka_bootstrap, app, src, dst, stderr=sink.fileno(),
                                  WORKER_HOST_ID="host-b", WORKER_STATE_DIR=str(tmp_path / "b"),
                                  **env)
        for task in TASKS:
            await until_logged(second_log, f"standby task {task}: restored up to", 120)
        feeding = asyncio.ensure_future(produce(transport, src, records[half:]))
        await wait_committed(transport, app, src, PARTITIONS, half + half // 2, timeout=120)
        first.send_signal(signal.SIGKILL)
        await feeding
        await wait_committed(transport, app, src, PARTITIONS, RECORDS, timeout=180)
        await until_exact(transport, dst, PARTITIONS, expected(records), timeout=120)
    finally:
        await stop_worker(first, kill=True)
        if second is not None:
            assert await stop_worker(second, timeout=90) == 0
    text = second_log.read_text(errors="replace")
    assert "standby task" in text
    restores = [(m[2], m[3], int(m[1]), int(m[4]), int(m[5])) for m in RESTORED.finditer(text)]
    current = [(m[1], m[2], int(m[3])) for m in UP_TO_DATE.finditer(text)]
    assert {store for store, *_ in restores} | {store for store, *_ in current} == \
        {"agg", "rekeyed"}
    for store, tp, count, start, end in restores:
        assert start > 0, f"{store} from {tp} restored from the changelog's start"
        assert count <= end - start
    print(f"promotion restores: {restores}; up to date: {current}")
