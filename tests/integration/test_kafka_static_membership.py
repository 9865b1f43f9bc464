"""Static membership by default (aiostreams/engine/static_membership.py), on the real broker.

Two workers of one stateful app, each with its own state directory and no
``group_instance_id``: each derives an instance id from its state directory.

* A worker stopped and started again within the session timeout rejoins with no rebalance:
  it gets back the partitions it had, in the same generation, and the other worker is never
  reassigned (its one assignment, its generation, unchanged). Nothing is lost.
* A second process that claims a live worker's id (its state directory copied, token and
  all) takes its place; the first stops with an error that says so (exit code 2) instead of
  rejoining, which would fence the other one in turn: no fencing loop.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from appkit import create_topic, produce, read_until_all_seen
from kafkakit import check_outputs, keyed_inputs, start_worker, stop_worker, wait_exit

from aiostreams.engine.static_membership import TOKEN_FILE
from aiostreams.transport.kafka import KafkaTransport

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

SESSION_TIMEOUT = 20.0  # s: a restart of a worker process fits in it with room to spare
ASSIGNED = re.compile(r"aiostreams\.worker: assigned (.*)\n.*aiostreams\.worker: assignment "
                      r"generation (-?\d+)")


def assignments(log: Path) -> list[tuple[str, int]]:
    """Each assignment the worker writing ``log`` logged: (partitions, generation)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return [(m[1], int(m[2])) for m in ASSIGNED.finditer(text)]


async def until_assigned(logs: list[Path], *, after: list[int], timeout: float = 90.0
                         ) -> list[tuple[str, int]]:
    """Return each log's latest assignment once every log has more than ``after`` of them,
    holding partitions, all in one generation (another process: only its log says so)."""
    async with asyncio.timeout(timeout):
        while True:
            seen = [assignments(log) for log in logs]
            if all(len(s) > n for s, n in zip(seen, after, strict=True)):
                latest = [s[-1] for s in seen]
                if all(p != "nothing" for p, _ in latest) and len({g for _, g in latest}) == 1:
                    return latest
            await asyncio.sleep(0.1)


def worker(kafka_bootstrap: str, group: str, src: str, dst: str, state: Path, log: Path,
           *, cli: bool = False) -> subprocess.Popen[bytes]:
    """A worker of the stateful app; ``cli``: through ``aiostreams run`` (its exit codes)."""
    with log.open("ab") as sink:
        return start_worker(kafka_bootstrap, group, src, dst, stderr=sink.fileno(), cli=cli,
                            WORKER_STATE_DIR=str(state), WORKER_LOG="INFO",
                            WORKER_SESSION_TIMEOUT=str(SESSION_TIMEOUT))


async def test_a_worker_restarted_within_the_session_timeout_rejoins_with_no_rebalance(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
    await create_topic(transport, src, 4)
    await create_topic(transport, dst, 4)
    inputs = keyed_inputs(4_000, keys=40)
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    a = worker(kafka_bootstrap, group, src, dst, tmp_path / "a", logs[0])
    b = worker(kafka_bootstrap, group, src, dst, tmp_path / "b", logs[1])
    try:
        (held_a, generation), (held_b, _) = await until_assigned(logs, after=[0, 0])
        await produce(transport, src, inputs[:2_000])
        await read_until_all_seen(transport, dst, {v for _, v in inputs[:2_000]}, timeout=90)
        before_b = assignments(logs[1])

        assert await stop_worker(a) == 0
        restarted_log = tmp_path / "a-again.log"
        a = worker(kafka_bootstrap, group, src, dst, tmp_path / "a", restarted_log)
        [(again, again_generation)] = await until_assigned([restarted_log], after=[0])
        await produce(transport, src, inputs[2_000:])
        outputs = await read_until_all_seen(transport, dst, {v for _, v in inputs},
                                            timeout=90)
        assert b.poll() is None and a.poll() is None

        # the restarted worker got its own partitions back, in the same generation ...
        assert (again, again_generation) == (held_a, generation)
        # ... and the other worker was never reassigned (whichever of them joined first)
        assert before_b[-1] == (held_b, generation)
        assert assignments(logs[1]) == before_b
        check_outputs(outputs, inputs, exactly_once=False)
        ids = [re.search(r"static group membership as '([^']+)'", log.read_text())
               for log in (logs[0], restarted_log, logs[1])]
        assert all(ids), "a worker did not derive an instance id"
        assert ids[0][1] == ids[1][1] != ids[2][1]  # type: ignore[index]
    finally:
        codes = [await stop_worker(w) for w in (a, b)]
    assert codes == [0, 0]


async def test_a_second_process_with_a_live_workers_id_stops_it_with_a_clear_error(
        kafka_bootstrap: str, topic_name: Any, tmp_path: Path) -> None:
    transport = KafkaTransport(kafka_bootstrap)
    src, dst, group = topic_name("in"), topic_name("out"), topic_name("app")
    await create_topic(transport, src, 2)
    await create_topic(transport, dst, 2)
    first_log, copy_log = tmp_path / "first.log", tmp_path / "copy.log"
    first = worker(kafka_bootstrap, group, src, dst, tmp_path / "first", first_log, cli=True)
    copy: subprocess.Popen[bytes] | None = None
    try:
        await until_assigned([first_log], after=[0])
        (tmp_path / "copy").mkdir()
        shutil.copy(tmp_path / "first" / TOKEN_FILE, tmp_path / "copy" / TOKEN_FILE)
        copy = worker(kafka_bootstrap, group, src, dst, tmp_path / "copy", copy_log)

        code = await wait_exit(first, timeout=60)
        text = first_log.read_text(errors="replace")
        assert code == 2, text[-3000:]
        assert re.search(r"aiostreams: error: another process joined group '[^']+' with this "
                         r"worker's group_instance_id '[^']+-0' .*FENCED_INSTANCE_ID", text), \
            text[-3000:]
        # the process that took the id keeps it: nobody takes it back
        inputs = keyed_inputs(200, keys=10)
        await produce(transport, src, inputs)
        outputs = await read_until_all_seen(transport, dst, {v for _, v in inputs},
                                            timeout=90)
        check_outputs(outputs, inputs, exactly_once=False)
        assert copy.poll() is None
        assert "another process joined group" not in copy_log.read_text(errors="replace")
    finally:
        if first.poll() is None:
            await stop_worker(first)
        if copy is not None:
            assert await stop_worker(copy) == 0
