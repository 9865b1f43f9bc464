"""Restart after ``kill -9`` under exactly-once with a 1M-key store (issue 34): the restore
of the changelog's tail from the store file's mark, against a full replay of the changelog
(what every exactly-once crash cost before the marks: the checkpoint was deleted at start).

    python -m benchmarks.eos_restart [--keys 1000000] [--tail 20000]

Against a real broker (``AIOSTREAMS_KAFKA`` or one started here):

1. a worker process (``python -m benchmarks.eos_restart --worker``: an App under
   ``exactly_once``, one partition, a persistent count per key) counts ``--keys`` records
   of distinct keys: its store has that many rows and its changelog as many records;
2. ``--tail`` more records arrive, and the worker is SIGKILLed while counting them;
3. **tail**: the worker starts again on its state directory as the kill left it, and its
   restore is timed (the restorer's own log line: from the first fetch to the last flush);
4. **full replay**: it is SIGKILLed again the same way, and started on an empty state
   directory - the whole changelog is replayed, as every exactly-once restart did before.

Prints both restores side by side (target for the tail: <= 1 s), the time from the
restart until the group's committed offset reached everything sent, and a JSON line.
Exactness is the tests' business (``tests/engine/test_exactly_once_crash_points.py``,
``tests/chaos/test_restore.py``), not this benchmark's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._broker import kafka_broker
from benchmarks.peers.topics import create_topics, produce_pairs

RESTORED = re.compile(r"restored (\d+) record\(s\) into 'counts' from \S+ \[(\d+), (\d+)\) "
                      r"in ([0-9.]+)s")
UP_TO_DATE = "store 'counts' is up to date"


def worker_app() -> Any:
    """The measured app: a persistent count per key under exactly-once."""
    import aiostreams as ais
    from aiostreams.transport.kafka import KafkaTransport

    env = os.environ
    # a short session: the restarted worker's group does not wait 45 s for the dead member
    transport = KafkaTransport.from_url(f"kafka://{env['BENCH_BROKER']}", session_timeout=6.0,
                                        heartbeat_interval=1.0)
    app = ais.App(env["BENCH_APP"], transport=transport,
                  processing_guarantee="exactly_once", commit_interval_ms=100,
                  state_dir=env["BENCH_STATE_DIR"])
    src = app.topic(env["BENCH_SRC"], key=str, value=str)
    dst = app.topic(env["BENCH_DST"], key=str, value=int)
    (app.stream(src).group_by_key().count(materialized="counts", persistent=True)
     .to_stream().to(dst))
    return app


def start(bootstrap: str, app: str, src: str, dst: str, state_dir: Path,
          log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, BENCH_BROKER=bootstrap, BENCH_APP=app, BENCH_SRC=src,
               BENCH_DST=dst, BENCH_STATE_DIR=str(state_dir),
               PYTHONPATH=os.pathsep.join(p for p in (str(Path(__file__).parents[1]),
                                                      os.environ.get("PYTHONPATH")) if p))
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "benchmarks.eos_restart", "--worker"],
                                env=env, stdout=out, stderr=subprocess.STDOUT)


async def committed(bootstrap: str, app: str, src: str) -> int:
    from aiostreams.transport.kafka import KafkaTransport
    from aiostreams.types import TopicPartition

    consumer = KafkaTransport(bootstrap).consumer(app)
    await consumer.start()
    try:
        return await consumer.committed(TopicPartition(src, 0)) or 0
    finally:
        await consumer.stop()


async def until_committed(bootstrap: str, app: str, src: str, at_least: int,
                          proc: subprocess.Popen[bytes], timeout: float) -> float:
    """Poll the group's committed offset (nothing announces it) until ``at_least``."""
    began = time.monotonic()
    async with asyncio.timeout(timeout):
        while await committed(bootstrap, app, src) < at_least:
            if proc.poll() is not None:
                raise RuntimeError(f"the worker exited with {proc.returncode}")
            await asyncio.sleep(0.2)
    return time.monotonic() - began


async def restore_line(log: Path, since: int, timeout: float) -> tuple[int, int, float]:
    """The restore the worker logged after byte ``since`` of ``log``: records, changelog
    offset it started from, seconds (0 records when the file was up to date)."""
    async with asyncio.timeout(timeout):
        while True:
            text = (await asyncio.to_thread(log.read_bytes))[since:].decode(errors="replace")
            found = RESTORED.search(text)
            if found:
                return int(found[1]), int(found[2]), float(found[4])
            if UP_TO_DATE in text:
                return 0, -1, 0.0
            await asyncio.sleep(0.2)


async def kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    await asyncio.to_thread(proc.wait)


async def measure(bootstrap: str, keys: int, tail: int) -> dict[str, Any]:
    run = f"eos-restart-{time.strftime('%H%M%S')}-{os.getpid()}"
    src, dst = f"{run}-in", f"{run}-out"
    await create_topics(bootstrap, [src, dst], 1)
    work = Path(tempfile.mkdtemp(prefix="eos-restart-"))
    state, log = work / "state", work / "worker.log"
    result: dict[str, Any] = {"benchmark": "eos_restart", "keys": keys, "tail": tail}
    try:
        await produce_pairs(bootstrap, src, ((f"k{i:07d}".encode(), b"1")
                                             for i in range(keys)))
        proc = start(bootstrap, run, src, dst, state, log)
        result["first_run_s"] = round(await until_committed(
            bootstrap, run, src, keys, proc, 1800), 1)
        sent = keys
        for label, wipe in (("tail", False), ("full_replay", True)):
            # the kill: while the worker counts the next records (its transaction open)
            feeding = asyncio.create_task(produce_pairs(
                bootstrap, src, ((f"k{i % keys:07d}".encode(), b"1")
                                 for i in range(sent, sent + tail))))
            await until_committed(bootstrap, run, src, sent + tail // 2, proc, 600)
            await kill(proc)
            await feeding
            sent += tail
            if wipe:
                shutil.rmtree(state)  # no local state: the whole changelog, as before
            since = log.stat().st_size
            began = time.monotonic()
            proc = start(bootstrap, run, src, dst, state, log)
            records, start_offset, seconds = await restore_line(log, since, 600)
            await until_committed(bootstrap, run, src, sent, proc, 600)
            result[label] = {"restored_records": records, "from_offset": start_offset,
                             "restore_s": seconds,
                             "caught_up_s": round(time.monotonic() - began, 2)}
        await kill(proc)
        result["load"] = round(os.getloadavg()[0], 2)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def main_async(keys: int, tail: int) -> dict[str, Any]:
    async with kafka_broker() as bootstrap:
        return await measure(bootstrap, keys, tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--tail", type=int, default=20_000,
                        help="records arriving while the worker is killed")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        logging.basicConfig(level=logging.WARNING,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        logging.getLogger("aiostreams.restore").setLevel(logging.INFO)
        worker_app().run()
        return
    result = asyncio.run(main_async(args.keys, args.tail))
    tail, full = result["tail"], result["full_replay"]
    print(f"exactly-once restart after kill -9, {result['keys']:,}-key store "
          f"(load {result['load']}):")
    print(f"  tail from the file's mark : {tail['restore_s']:.2f} s restore "
          f"({tail['restored_records']:,} records), caught up in {tail['caught_up_s']:.2f} s")
    print(f"  full replay (before)      : {full['restore_s']:.2f} s restore "
          f"({full['restored_records']:,} records), caught up in {full['caught_up_s']:.2f} s")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
