"""A fleet of three hosts (issue 34): host failover, a rolling restart, a host cut for 30 s.

    python -m benchmarks.fleet [--keys 1000000] [--standbys 0,1] [--rate 300]

Needs root: each host is a network namespace of its own (``tests/support/fleet.py``, the
suite's fleet test bed), its processes linked to the broker through a proxy inside it.
Against a real broker on 127.0.0.1 (``AIOSTREAMS_KAFKA`` or one started here). Each host runs
``benchmarks/fleet_worker.py`` (a persistent count per key under exactly-once, six
partitions) with a state directory of its own; ``--keys`` records of distinct keys are
counted first, then records keep arriving at ``--rate`` a second over random keys while,
one after the other on the same fleet:

1. **failover**: host 1 loses power (every process SIGKILLed). Figure: for each partition
   it held, the time from the kill until the partition's output moves again (the first
   record the broker appended to it after the kill: the output topic stamps append time),
   the worst of them; host 1 then starts again on its disk.
2. **rolling restart**: each host in turn is stopped (SIGTERM) and started again on its
   disk, as an orchestrator's rollout does. Figures: rebalances (new group generations the
   workers logged during the rollout) and the longest pause of any partition's output.
3. **cut**: host 1 is cut from the broker for 30 s (past its 10 s session) and healed.
   Figures: how long its partitions stood still, and from the heal until every record sent
   is committed and host 1 is a member again.

After each scenario the input stops until everything is committed, and the last count of
every key a ``read_committed`` reader sees must equal what was sent: "state exact".
With ``--standbys 0,1`` the whole run is made once without and once with one standby
replica (``AIOSTREAMS_NUM_STANDBY_REPLICAS``), side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks._broker import kafka_broker
from benchmarks.peers.topics import (
    APPEND_TIME,
    OffsetReader,
    create_topics,
    offset_reader,
    produce_pairs,
    read_all,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "support"))  # the fleet bed
import itertools

from fleet import Fleet, Host, fleet_unavailable
from kafkakit import stop_worker

WORKER = Path(__file__).with_name("fleet_worker.py")
PARTITIONS = 6
CUT_SECONDS = 30.0
SETTLE = 3.0  # seconds of steady flow before and after each scenario's event
GENERATION = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) .*assignment generation "
                        r"(\d+)$", re.M)


def key(i: int) -> bytes:
    return f"k{i:07d}".encode()


class Feed:
    """Records at ``rate`` a second over random keys, counted per key, until stopped."""

    def __init__(self, bootstrap: str, topic: str, keys: int, rate: float) -> None:
        self.bootstrap, self.topic, self.keys, self.rate = bootstrap, topic, keys, rate
        self.sent: Counter[bytes] = Counter()
        self._task: asyncio.Task[None] | None = None
        self._rng = random.Random(7)
        self._stopping = asyncio.Event()

    def start(self) -> None:
        assert self._task is None
        self._stopping.clear()
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Stop after the batch being sent (a cancelled send could reach the broker
        uncounted, and the check would find its keys one too many)."""
        assert self._task is not None
        self._stopping.set()
        await self._task
        self._task = None

    async def _run(self) -> None:
        from aiostreams.transport.kafka import KafkaTransport
        from aiostreams.types import OutgoingRecord

        producer = KafkaTransport(self.bootstrap).producer()
        await producer.start()
        loop = asyncio.get_running_loop()
        tick = 0.1
        next_at = loop.time()
        try:
            while not self._stopping.is_set():
                size = round(self.rate * tick)
                batch = [key(self._rng.randrange(self.keys)) for _ in range(size)]
                await producer.send_batch([OutgoingRecord(self.topic, k, b"1") for k in batch])
                await producer.flush()
                self.sent.update(batch)  # counted once the broker has them
                next_at += tick  # a schedule, not "now + tick": a slow send does not drift
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), max(next_at - loop.time(), 0.0))
        finally:
            await producer.stop()


class Run:
    """One fleet, its topics, its feed: the scenarios run one after the other on it."""

    def __init__(self, bootstrap: str, fleet: Fleet, reader: OffsetReader, keys: int,
                 rate: float, standbys: int) -> None:
        stamp = f"{time.strftime('%H%M%S')}-{os.getpid()}-s{standbys}"
        self.app, self.src, self.dst = f"fleet-{stamp}", f"fleet-{stamp}-in", f"fleet-{stamp}-out"
        self.bootstrap, self.fleet, self.reader = bootstrap, fleet, reader
        self.keys, self.standbys = keys, standbys
        self.feed = Feed(bootstrap, self.src, keys, rate)
        self.workers: dict[str, Any] = {}

    def env(self, host: Host) -> dict[str, str]:
        env = {"AIOSTREAMS_CLIENT_ID": host.name, "WORKER_SESSION_TIMEOUT": "10"}
        if self.standbys:
            env["AIOSTREAMS_NUM_STANDBY_REPLICAS"] = str(self.standbys)
        return env

    def start(self, host: Host) -> None:
        self.workers[host.name] = host.start(self.app, self.src, self.dst, script=WORKER,
                                             **self.env(host))

    async def committed_all(self, timeout: float) -> float:
        """Seconds until the group has committed every record sent so far."""
        began = time.monotonic()
        ends = await self.reader.end_offsets(self.src, PARTITIONS)
        while True:
            done = await self.reader.committed(self.app, self.src) or {}
            if all(done.get(p, 0) >= end for p, end in ends.items()):
                return time.monotonic() - began
            for name, worker in self.workers.items():
                if worker.poll() is not None:
                    raise RuntimeError(f"the worker of {name} exited with {worker.returncode}")
            if time.monotonic() - began > timeout:
                raise RuntimeError(f"not all committed in {timeout:g} s: {done} of {ends}")
            await asyncio.sleep(0.2)  # the coordinator tells no outsider: poll

    async def members(self) -> dict[str, list[int]]:
        """client id (the host's name) -> input partitions it holds now."""
        from aiokafka.admin import AIOKafkaAdminClient

        from aiostreams.transport.kafka_groups import describe_group

        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:
            described = await describe_group(admin, self.app, bootstrap=self.bootstrap)
        finally:
            await admin.close()
        return {m.client_id: sorted(p for t, p in m.partitions if t == self.src)
                for m in described.members}

    async def until_members(self, names: set[str], timeout: float) -> float:
        began = time.monotonic()
        while set(held := await self.members()) != names or \
                sum(len(p) for p in held.values()) != PARTITIONS:
            if time.monotonic() - began > timeout:
                raise RuntimeError(f"members {sorted(held)} not {sorted(names)} in {timeout:g} s")
            await asyncio.sleep(0.2)
        return time.monotonic() - began

    async def exact(self) -> bool:
        """Stop the feed, wait until all is committed, compare every key's last count."""
        await self.feed.stop()
        await self.committed_all(600)
        last: dict[bytes, int] = {}
        for record in await read_all(self.bootstrap, self.dst, PARTITIONS):
            assert record.key is not None
            last[record.key] = int.from_bytes(record.value, "big", signed=True)  # value=int
        want = {key(i): 1 + self.feed.sent[key(i)] for i in range(self.keys)}
        over = sum(1 for k, n in want.items() if last.get(k, 0) > n)
        under = sum(1 for k, n in want.items() if last.get(k, 0) < n)
        if over or under:
            print(f"  NOT EXACT: of {len(want)} keys, {over} counted too often, {under} too "
                  f"rarely", flush=True)
        wrong = over + under
        self.feed.start()
        return wrong == 0

    async def until_output_moves(self, partitions: list[int], timeout: float,
                                 before: dict[int, int] | None = None) -> None:
        """Wait until each of ``partitions`` of the output topic has grown past its end
        ``before`` (default: now) - its new owner wrote and committed there - polling its
        end offsets (cheap: reading a million-record topic for each look would not be)."""
        if before is None:
            before = await self.reader.end_offsets(self.dst, PARTITIONS)
        began = time.monotonic()
        while True:
            now = await self.reader.end_offsets(self.dst, PARTITIONS)
            # past a few offsets: an aborted transaction's marker alone takes one
            if all(now[p] > before[p] + 3 for p in partitions):
                return
            if time.monotonic() - began > timeout:
                raise RuntimeError(f"output partitions {partitions} did not move in "
                                   f"{timeout:g} s")
            await asyncio.sleep(0.2)

    async def appended(self, since: float) -> dict[int, list[float]]:
        """Append times (s since the epoch) of the outputs after ``since``, per partition."""
        times: dict[int, list[float]] = {p: [] for p in range(PARTITIONS)}
        for record in await read_all(self.bootstrap, self.dst, PARTITIONS):
            if record.timestamp / 1000.0 > since:
                times[record.partition].append(record.timestamp / 1000.0)
        return times


async def failover(run: Run) -> dict[str, Any]:
    host = run.fleet.hosts[1]
    held = (await run.members())[host.name]
    killed_at = time.time()
    host.kill()
    run.workers.pop(host.name)
    await run.until_members({h.name for h in run.fleet.hosts} - {host.name}, 120)
    reassigned_at = time.time()  # the group gave its partitions to others (0.2 s polls)
    await run.until_output_moves(held, 300)  # the new owners restored and wrote
    after = await run.appended(killed_at)
    moved = {p: round(min(after[p]) - killed_at, 2) if after[p] else None for p in held}
    taken = {p: round(min(after[p]) - reassigned_at, 2) if after[p] else None for p in held}
    host.restart()
    run.start(host)
    await run.until_members({h.name for h in run.fleet.hosts}, 180)
    worst = max((s for s in moved.values() if s is not None), default=None)
    worst_taken = max((s for s in taken.values() if s is not None), default=None)
    return {"partitions": moved, "worst_s": worst,
            "reassigned_after_s": round(reassigned_at - killed_at, 2),
            "output_after_reassigned_s": worst_taken, "exact": await run.exact()}


def generation(run: Run, until: float) -> int:
    """The group's newest generation any worker logged up to ``until`` (wall clock)."""
    newest = 0
    for host in run.fleet.hosts:
        for log in host.logs.glob("*.log"):
            for found in GENERATION.finditer(log.read_text(errors="replace")):
                stamp = time.mktime(time.strptime(found[1], "%Y-%m-%d %H:%M:%S"))
                if stamp + int(found[2]) / 1000 <= until:
                    newest = max(newest, int(found[3]))
    return newest


async def rolling(run: Run) -> dict[str, Any]:
    began = time.time()
    for host in run.fleet.hosts:
        await stop_worker(run.workers[host.name], timeout=120)
        run.start(host)
        await run.until_members({h.name for h in run.fleet.hosts}, 180)
        await run.committed_all(180)
    ended = time.time()
    # every rebalance makes a new generation, which each member logs when assigned
    rebalances = generation(run, ended) - generation(run, began)
    await asyncio.sleep(SETTLE)
    times = await run.appended(began)
    pauses = [max((b - a for a, b in itertools.pairwise(ts)), default=0.0)
              for ts in times.values()]
    return {"rebalances": rebalances, "longest_pause_s": round(max(pauses), 2),
            "exact": await run.exact()}


async def cut(run: Run) -> dict[str, Any]:
    host = run.fleet.hosts[1]
    held = (await run.members())[host.name]
    ends_at_cut = await run.reader.end_offsets(run.dst, PARTITIONS)
    cut_at = time.time()
    host.cut()
    await asyncio.sleep(CUT_SECONDS)  # the scenario itself: 30 s without a network
    await run.until_output_moves(held, 300, ends_at_cut)  # the others took them over
    host.heal()
    healed = time.monotonic()
    await run.until_members({h.name for h in run.fleet.hosts}, 180)
    caught_up = await run.committed_all(180)
    recovered = time.monotonic() - healed
    after = await run.appended(cut_at)
    stood = {p: round(min(after[p]) - cut_at, 2) if after[p] else None for p in held}
    return {"partitions_stood_s": stood, "heal_to_member_and_committed_s": round(recovered, 2),
            "committed_after_s": round(caught_up, 2), "exact": await run.exact()}


async def measure(bootstrap: str, keys: int, rate: float, standbys: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    async with offset_reader(bootstrap) as reader, \
            Fleet(bootstrap, hosts=3, root=root) as fleet:
        run = Run(bootstrap, fleet, reader, keys, rate, standbys)
        await create_topics(bootstrap, [run.src], PARTITIONS)
        await create_topics(bootstrap, [run.dst], PARTITIONS, APPEND_TIME)
        await produce_pairs(bootstrap, run.src, ((key(i), b"1") for i in range(keys)))
        began = time.monotonic()
        for host in fleet.hosts:
            run.start(host)
        await run.committed_all(3600)
        result: dict[str, Any] = {"standbys": standbys, "keys": keys, "rate": rate,
                                  "load_s": round(time.monotonic() - began, 1)}
        run.feed.start()
        await asyncio.sleep(SETTLE)
        for name, scenario in (("failover", failover), ("rolling", rolling), ("cut", cut)):
            result[name] = await scenario(run)
            print(f"standbys={standbys} {name}: {result[name]}", flush=True)
        await run.feed.stop()
        for worker in run.workers.values():
            await stop_worker(worker, timeout=120)
        return result


async def main_async(args: argparse.Namespace) -> None:
    why = fleet_unavailable()
    if why is not None:
        raise SystemExit(f"benchmarks.fleet: {why}")
    async with kafka_broker() as bootstrap:
        for standbys in args.standbys:
            print(json.dumps(await measure(bootstrap, args.keys, args.rate, standbys)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=300.0, help="records a second")
    parser.add_argument("--standbys", type=lambda s: [int(x) for x in s.split(",")],
                        default=[0])
    asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
