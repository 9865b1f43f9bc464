"""What recording service answers costs (issue 39): P1 and P2 with recording on and off.

    python -m benchmarks.replay_cost [--quick] [--rounds 3] [--p1 N] [--p2 N]

The aiostreams contender of the peer benchmark (:mod:`benchmarks.peers`), on one broker
(``AIOSTREAMS_KAFKA``, else one started here), each case a fresh ``aiostreams run``
process on the same preloaded input, the cases interleaved, ``--rounds`` times:

- **P1 service**: P1 sleep (1 partition, 5 ms of ``asyncio.sleep`` per record, 1,000 in
  flight), the I/O awaited in a DSL step through a declared service
  (``map_values_async(..., service=app.service("io"))``): off, then on
  (``record_services_dir``: every record's answer is recorded, about 170 bytes a line);
- **P2**: P2's pipeline (8 partitions, no I/O, the synchronous processor): off, then on
  (the recorder is registered as an external sink of the commit protocol but records
  nothing: what an app that records pays on records that call no service).

Prints each run's rate (records/s, first to last output), the medians, and on/off ratios,
then one JSON line.

    python -m benchmarks.replay_cost --memory [--records 200000] [--rounds 3]

The same two pipelines on the memory broker, in-process (no broker to share the machine
with, and a shared machine's load moves rates more than recording does): CPU time (user +
system, the recorder's writer thread included) per record, off and on, interleaved, in
fresh processes; the I/O is ``asyncio.sleep(0)``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from aiostreams import App
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import OutgoingRecord
from benchmarks._broker import kafka_broker
from benchmarks.peers.contenders import Contender
from benchmarks.peers.scenarios import Bench, Sizes
from benchmarks.peers.topics import offset_reader


def contender(service_step: bool, record_dir: str) -> Contender:
    label = "aiostreams" + (" service" if service_step else "") + \
        (" recording" if record_dir else "")
    return Contender(label, "aiostreams", claims_key_order=True,
                     overrides={"service_step": service_step, "record_dir": record_dir})


def recorded_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.glob("*.jsonl"))


async def measure(p1: int, p2: int, rounds: int) -> dict[str, list[float]]:
    rates: dict[str, list[float]] = {}
    scratch = Path(tempfile.mkdtemp(prefix="replay-cost-"))
    try:
        async with kafka_broker() as bootstrap, offset_reader(bootstrap) as reader:
            bench = Bench(bootstrap, reader, Sizes(), None)
            for round_ in range(rounds):
                for on in (False, True):
                    where = str(scratch / f"p1-{round_}") if on else ""
                    row = await bench.case(f"P1 service {'on' if on else 'off'} #{round_}",
                                           contender(True, where), p1, 1, io="sleep")
                    rates.setdefault(f"P1 service {'on' if on else 'off'}", []).append(
                        row.result.rate)
                    if on:
                        rates.setdefault("P1 recorded bytes/record", []).append(
                            recorded_bytes(Path(where)) / p1)
                for on in (False, True):
                    where = str(scratch / f"p2-{round_}") if on else ""
                    row = await bench.case(f"P2 {'on' if on else 'off'} #{round_}",
                                           contender(False, where), p2, 8)
                    rates.setdefault(f"P2 {'on' if on else 'off'}", []).append(
                        row.result.rate)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rates


async def cpu_case(case: str, n: int) -> dict[str, float]:
    """CPU microseconds per record of ``case`` ("p1"/"p2" + "-on"/"-off") on a memory
    broker (4 partitions, 10,000 keys)."""
    pipeline, state = case.split("-")
    broker = MemoryBroker()
    broker.create_topic("in", 4)
    producer = MemoryTransport(broker).producer()
    await producer.start()
    await producer.send_batch([OutgoingRecord("in", f"k{i % 10_000}".encode(),
                                              str(i).encode()) for i in range(n)])
    await producer.stop()
    scratch = Path(tempfile.mkdtemp(prefix="replay-cost-"))
    recording: dict[str, Any] = (
        {"record_services_dir": str(scratch)} if state == "on" else {})
    app = App("replay-cost", transport=MemoryTransport(broker), max_in_flight=1000,
              commit_interval_ms=200, **recording)
    src = app.topic("in", key=str, value=str)
    dst = app.topic("out", key=str, value=str, partitions=4)
    if pipeline == "p1":
        async def io(value: str) -> str:
            await asyncio.sleep(0)
            return value + "!"

        app.stream(src).map_values_async(io, service=app.service("io", concurrency=1000)) \
            .to(dst)
    else:
        app.stream(src).map_values(lambda value: value + "!").to(dst)
    before = resource.getrusage(resource.RUSAGE_SELF)
    await app.start()
    await app.wait_until_caught_up(timeout=600)
    after = resource.getrusage(resource.RUSAGE_SELF)
    await app.stop()
    size = recorded_bytes(scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu_us_per_record": cpu / n * 1e6, "recorded_bytes_per_record": size / n}


def memory_mode(n: int, rounds: int) -> None:
    cases = ["p1-off", "p1-on", "p2-off", "p2-on"]
    runs: dict[str, list[dict[str, float]]] = {case: [] for case in cases}
    for _ in range(rounds):
        for case in cases:
            out = subprocess.run([sys.executable, "-m", "benchmarks.replay_cost", "--child",
                                  case, "--records", str(n)],
                                 capture_output=True, text=True, check=False)
            if out.returncode != 0:
                raise SystemExit(f"{case} failed:\n{out.stderr[-3000:]}")
            runs[case].append(json.loads(out.stdout.strip().splitlines()[-1]))
    cpu = {case: statistics.median(r["cpu_us_per_record"] for r in rs)
           for case, rs in runs.items()}
    for case in cases:
        shown = ", ".join(f"{r['cpu_us_per_record']:.1f}" for r in runs[case])
        print(f"{case:8} CPU us/record median {cpu[case]:7.2f}   ({shown}); recorded "
              f"{runs[case][0]['recorded_bytes_per_record']:.0f} bytes/record")
    ratios = {"P1": cpu["p1-on"] / cpu["p1-off"], "P2": cpu["p2-on"] / cpu["p2-off"]}
    for name, ratio in ratios.items():
        print(f"{name} CPU per record, recording on / off: {ratio:.3f}")
    print(json.dumps({"benchmark": "replay_cost", "mode": "memory", "records": n,
                      "rounds": rounds, "cpu_us_per_record": cpu, "ratios": ratios}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small inputs, one round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--p1", type=int, default=Sizes().p1)
    parser.add_argument("--p2", type=int, default=Sizes().p2)
    parser.add_argument("--memory", action="store_true",
                        help="CPU per record on the memory broker instead")
    parser.add_argument("--records", type=int, default=200_000, help="with --memory")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        from aiostreams import run_event_loop

        print(json.dumps(run_event_loop(cpu_case(args.child, args.records))))
        return
    if args.memory:
        memory_mode(args.records, args.rounds)
        return
    if args.quick:
        quick = Sizes.quick()
        args.p1, args.p2, args.rounds = quick.p1, quick.p2, 1
    rates = asyncio.run(measure(args.p1, args.p2, args.rounds))
    medians = {name: statistics.median(values) for name, values in rates.items()}
    for name, values in rates.items():
        shown = ", ".join(f"{v:,.0f}" for v in values)
        print(f"{name:28} median {medians[name]:>12,.1f}   ({shown})")
    ratios = {"P1": medians["P1 service on"] / medians["P1 service off"],
              "P2": medians["P2 on"] / medians["P2 off"]}
    for name, ratio in ratios.items():
        print(f"{name} recording on / off: {ratio:.3f}")
    print(json.dumps({"p1": args.p1, "p2": args.p2, "rounds": args.rounds,
                      "medians": medians, "ratios": ratios}))


if __name__ == "__main__":
    main()
