"""The scenarios of issue 8 (P1, P2, P5, P6): which contenders run on which input.

Every scenario preloads its input once (a fixed seed; several contenders read the same
input topic, each with its own group and output topic), runs the contenders one after the
other, and checks each one's output (:mod:`benchmarks.peers.verify`). P1's serial
contenders (Faust without concurrency, Quix Streams: about 200 records/s at 5 ms each) run
on a shorter input of their own, ``Sizes.serial`` records, so a run takes minutes, not an
hour; their rate is what is compared.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiostreams.transport.partitioner import default_partition
from benchmarks._broker import listening_pid
from benchmarks.peers import contenders as c
from benchmarks.peers.contenders import Contender
from benchmarks.peers.options import TAIL_SECONDS, TAIL_SHARE, ContenderOptions
from benchmarks.peers.runner import RunResult, Watch, io_server, run_contender
from benchmarks.peers.topics import (
    OffsetReader,
    create_topics,
    preload,
    read_all,
    warm_transactions,
)
from benchmarks.peers.verify import Verdict, verify
from benchmarks.peers.workload import hottest_key_share, records

IO_SECONDS = 0.005
IN_FLIGHT = 1000
EOS_ROUNDS = 3
"""Exactly-once against at-least-once: the fewest alternating rounds its target is judged on
(issue 40)."""
P5_ASYNC = "P5 async"
"""P5's pipeline through the async processor, no record stuck: the stuck run's baseline."""


@dataclass(frozen=True)
class Sizes:
    """Record counts and durations; :meth:`quick` is a smoke-test size."""

    p1: int = 200_000
    p1_http: int = 50_000
    p1_tail: int = 100_000
    p1_zipf: int = 20_000
    """Zipf keys: the hottest key holds ~15% of the records, which key order serialises
    (20,000 records: ~3,000 x 5 ms = 15 s at the bound)."""
    serial: int = 2_000
    p2: int = 1_000_000
    p5: int = 10_000_000
    stuck_seconds: float = 30.0
    keys: int = 10_000
    starts: int = 5
    """Start-up: starts of each contender (the median is compared)."""
    live_rate: int = 5_000
    """Scale-out: input records per second, produced live for the whole scenario."""
    settle: float = 5.0
    """Scale-out: seconds one worker runs alone before the second starts."""
    window: float = 10.0
    """Scale-out: seconds from the join to the leave, and from the leave to the end."""
    engine_records: int = 200_000
    engine_async_records: int = 100_000
    engine_rounds: int = 5
    """The engine benchmark's ``--records``, ``--async-records``, ``--rounds`` (its
    defaults)."""
    eos_rounds: int = EOS_ROUNDS
    """Exactly-once: alternating rounds of both guarantees (fewer are run, not judged)."""
    restore_updates: int = 1_000_000
    restore_keys: int = 100_000
    """The restore benchmark's changelog (its defaults: issue 23's 1M updates, 100k keys)."""

    @classmethod
    def quick(cls) -> Sizes:
        return cls(p1=20_000, p1_http=5_000, p1_tail=10_000, p1_zipf=2_000, serial=300,
                   p2=50_000, p5=200_000, stuck_seconds=10.0, starts=3, live_rate=2_000,
                   settle=3.0, window=6.0, engine_records=20_000,
                   engine_async_records=10_000, engine_rounds=1, restore_updates=20_000,
                   restore_keys=2_000)


@dataclass
class Row:
    """One contender's run in one scenario, with its verdict (None: count only)."""

    scenario: str
    contender: Contender
    result: RunResult
    verdict: Verdict | None
    notes: list[str] = field(default_factory=list)
    limit: float | None = None
    """The rate no key-ordered contender can pass on this input (records/s), if known."""
    figures: dict[str, float] = field(default_factory=dict)
    """Figures other than the rate that the scenario measured (seconds of start-up, of a
    pause in output), by name."""
    standalone: bool = False
    """Measured by a module of its own (:mod:`benchmarks.peers.standalone`): no output
    topic, no process the harness watched; its rate and figures are that module's."""

    @property
    def ok(self) -> bool:
        """Ran to the end, complete, and in key order if it claims to be."""
        if self.result.error is not None:
            return False
        if self.verdict is None:
            return True
        order_ok = self.verdict.in_key_order or not self.contender.claims_key_order
        # a read_committed reader of an exactly-once contender sees each output once
        once_ok = (self.result.options.guarantee != "exactly_once"
                   or self.verdict.duplicates == 0)
        return self.verdict.complete and order_ok and once_ok

    def to_json(self) -> dict[str, Any]:
        r, v = self.result, self.verdict
        out: dict[str, Any] = {
            "scenario": self.scenario, "contender": self.contender.label,
            "records": r.records, "records_per_s": round(r.rate, 1),
            "seconds": round(r.seconds, 3), "startup_s": round(r.startup, 2),
            "cpu_cores": round(r.cpu_share, 2),
            "cpu_us_per_record": (round(r.cpu / r.timed * 1e6, 2) if r.timed > 0 and r.cpu > 0
                                  else None),
            "broker_cpu_us_per_record": (
                round(r.broker_cpu / r.timed * 1e6, 2) if r.timed > 0 and r.broker_cpu
                else None),
            "io": r.options.io, "concurrency": r.options.concurrency,
            "claims_key_order": self.contender.claims_key_order, "ok": self.ok,
            "max_rss_mb": round(max((b for _, b in r.rss), default=0) / 2**20, 1),
            "error": r.error, "notes": self.notes, "limit_per_s": self.limit,
            **{name: round(value, 3) for name, value in self.figures.items()},
        }
        if v is not None:
            out.update(expected=v.expected, received=v.received, missing=v.missing,
                       duplicates=v.duplicates, key_order_violations=v.key_order_violations,
                       split_keys=v.split_keys, commits_ahead_of_output=v.commits_ahead)
        return out


def mean_wait(io: str) -> float:
    """Seconds one record awaits on average with ``io`` (the local HTTP server sleeps
    ``IO_SECONDS`` too; a request's own overhead is left out here, see :func:`zipf_wait`)."""
    if io == "tail":
        return (1 - TAIL_SHARE) * IO_SECONDS + TAIL_SHARE * TAIL_SECONDS
    return IO_SECONDS if io != "none" else 0.0


def zipf_wait(io: str, http_seconds: float | None) -> tuple[float, str]:
    """Seconds the hottest key's records take each, one after another, with ``io``, and
    how that was found. For ``http``, a GET made one at a time against the same server
    (``http_seconds``, measured by the bare client in the same run): the server's sleep
    plus the round trip, which no chain of waiting requests can beat; :func:`mean_wait`
    (the sleep alone) when it was not measured."""
    if io == "http" and http_seconds is not None:
        assert http_seconds > 0, http_seconds
        return http_seconds, f"{http_seconds * 1e3:.2f} ms each (a GET one at a time)"
    mean = mean_wait(io)
    return mean, f"{mean * 1e3:.2f} ms each (the mean wait)"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


class Bench:
    """Runs scenarios against one broker; ``peers_python`` is the peers venv's interpreter
    (None: Faust and Quix are skipped); ``say`` prints progress."""

    def __init__(self, bootstrap: str, reader: OffsetReader, sizes: Sizes,
                 peers_python: Path | None, say: Callable[[str], None] = print) -> None:
        self.bootstrap = bootstrap
        self.reader = reader
        self.sizes = sizes
        self.peers_python = peers_python
        self.say = say
        self.stamp = time.strftime("%H%M%S")
        self.rows: list[Row] = []
        self._inputs: dict[tuple[int, int, str], str] = {}
        self.broker_pid = listening_pid(bootstrap)
        """The broker's process, whose CPU each run samples beside its own (None: not a
        local process: no broker figures)."""

    def peers(self, *contenders: Contender) -> list[Contender]:
        return [x for x in contenders if not x.in_peers_venv or self.peers_python is not None]

    async def input_topic(self, n: int, partitions: int, skew: str = "uniform") -> str:
        """A topic holding the first ``n`` records (keys drawn by ``skew``) on
        ``partitions`` (made once per run)."""
        topic = self._inputs.get((n, partitions, skew))
        if topic is None:
            topic = f"peers-in-{n}x{partitions}-{skew}-{self.stamp}"
            self.say(f"preloading {n:,} records into {topic}")
            await create_topics(self.bootstrap, [topic], partitions)
            await preload(self.bootstrap, topic, n, self.sizes.keys, skew)
            self._inputs[(n, partitions, skew)] = topic
        return topic

    async def case(self, scenario: str, contender: Contender, n: int, partitions: int, *,
                   io: str = "none", io_url: str = "", concurrency: int = IN_FLIGHT,
                   check: bool = True, track_commits: bool = False,
                   stuck_id: int | None = None, run_for: float | None = None,
                   skew: str = "uniform", count: str = "output",
                   async_path: bool = False) -> Row:
        src = await self.input_topic(n, partitions, skew)
        name = f"peers-{slug(scenario)}-{slug(contender.label)}-{self.stamp}"
        await create_topics(self.bootstrap, [f"{name}-out"], partitions)
        options = contender.options(ContenderOptions(
            bootstrap=self.bootstrap, src=src, dst=f"{name}-out", group=name,
            partitions=partitions, io=io, io_seconds=IO_SECONDS, io_url=io_url,
            concurrency=concurrency, stuck_id=stuck_id, async_path=async_path))
        self.say(f"{scenario}: {contender.label} on {n:,} records ...")
        watch = Watch(n=None if run_for else n, run_for=run_for, track_commits=track_commits,
                      stop_timeout=5.0 if stuck_id is not None else 20.0, count=count)
        result = await run_contender(contender, options, watch, self.reader,
                                     self.peers_python, name, self.broker_pid)
        verdict = None
        if check and result.error is None:
            outputs = await read_all(self.bootstrap, options.dst, partitions)
            verdict = verify(outputs, n, result.commits if track_commits else None)
        row = Row(scenario, contender, result, verdict)
        if result.startup_included:
            row.notes.append("all output came within one 50 ms poll: timed from process "
                             "start, start-up included")
        self.rows.append(row)
        self.say(f"  {result.rate:,.0f} records/s"
                 + (f", error: {result.error}" if result.error else "")
                 + (f", {verdict}" if verdict else ""))
        return row

    # -- the scenarios ------------------------------------------------------------------

    async def p1(self) -> None:
        """I/O-bound: 1 partition, each record awaits 5 ms (sleep, then HTTP)."""
        s = self.sizes
        # the auto-commit loop is the control of the commits-ahead check (it must find some)
        for contender, n in [(c.aiostreams(), s.p1), (c.raw_aiokafka(), s.p1),
                             (c.raw_aiokafka("autocommit"), s.p1_http),
                             *[(x, s.p1) for x in self.peers(c.faust(IN_FLIGHT))],
                             *[(x, s.serial) for x in self.peers(c.faust(1), c.quix())]]:
            await self.case("P1 sleep", contender, n, 1, io="sleep", track_commits=True)
        # constant 5 ms waits finish almost in start order, which hides reordering: the
        # same mean with jitter (uniform 1..9 ms) shows what concurrency without ordering does
        for contender in [c.aiostreams(), c.raw_aiokafka(), *self.peers(c.faust(IN_FLIGHT))]:
            await self.case("P1 jitter", contender, s.p1_http, 1, io="jitter",
                            track_commits=True)
        # 1% of records take 200 ms: a window that retires in order must not stall on them
        for contender in [c.aiostreams(), c.raw_aiokafka(), *self.peers(c.faust(IN_FLIGHT))]:
            await self.case("P1 tail", contender, s.p1_tail, 1, io="tail", track_commits=True)
        # the physical limit: the same requests from a bare client, no Kafka (before the
        # contenders and after them)
        from benchmarks.peers.standalone import http_client_rate, http_limit  # (a cycle)

        async with io_server(IO_SECONDS) as url:
            before = await http_client_rate(self, url, s.p1_http)
            for contender, n in [(c.aiostreams(), s.p1_http), (c.raw_aiokafka(), s.p1_http),
                                 *[(x, s.p1_http) for x in self.peers(c.faust(IN_FLIGHT))],
                                 *[(x, s.serial) for x in self.peers(c.quix())]]:
                await self.case("P1 http", contender, n, 1, io="http", io_url=url,
                                track_commits=True)
            limit = await http_limit(self, url, s.p1_http, before)
            await self.p1_zipf(url, limit.figures.get("sequential s"))

    async def p1_zipf(self, url: str, http_seconds: float | None = None) -> None:
        """Every P1 scenario again with Zipf(1.1) keys (aiostreams and the raw loop: the
        other peers either break key order or run one record at a time anyway).
        ``http_seconds``: what a GET of the server took one at a time, measured by the bare
        client (None: not measured), for the hottest key's bound (see :func:`zipf_wait`)."""
        n = self.sizes.p1_zipf
        hottest = hottest_key_share(n, self.sizes.keys, "zipf")
        for io in ("sleep", "jitter", "tail", "http"):
            mean, how = zipf_wait(io, http_seconds)
            for contender in [c.aiostreams(), c.raw_aiokafka()]:
                row = await self.case(f"P1 {io} zipf", contender, n, 1, io=io,
                                      io_url=url if io == "http" else "",
                                      track_commits=True, skew="zipf")
                row.limit = n / (hottest * mean)
                row.notes.append(f"hottest key: {hottest:,} of {n:,} records; key order "
                                 f"runs them one by one, {how}: at most {row.limit:,.0f}/s")

    async def p2(self, contenders: Sequence[Contender] | None = None) -> None:
        """CPU-light: 8 partitions, parse → add a field → serialize."""
        chosen = contenders or [c.raw_aiokafka("send"), c.raw_aiokafka("batch"),
                                c.aiostreams(), *self.peers(c.faust(1), c.quix())]
        for contender in chosen:
            await self.case("P2", contender, self.sizes.p2, 8)

    async def p5(self) -> None:
        """Memory: RSS over ``Sizes.p5`` records of P2's pipeline; then, for
        ``Sizes.stuck_seconds`` each, the same pipeline through the async processor (the
        baseline), and with one record stuck forever (at the default window and byte
        budget). What the stuck record holds is the second's peak RSS over the first's:
        both run the async path (executing records hold their asyncio tasks, which the
        synchronous P5 run never has)."""
        n = self.sizes.p5
        row = await self.case("P5", c.aiostreams(), n, 8, check=False)
        row.notes.append("count checked from end offsets (the output is not read back)")
        base = await self.case(P5_ASYNC, c.aiostreams(), n, 8, check=False,
                               run_for=self.sizes.stuck_seconds, async_path=True)
        base.notes.append("P5's pipeline through the async processor (no stuck record): "
                          "the baseline of what the stuck record holds")
        stuck_id = 1000
        stuck_key = next(k for i, (k, _) in enumerate(records(stuck_id + 1, self.sizes.keys))
                         if i == stuck_id)
        stuck = await self.case("P5 stuck", c.aiostreams(), n, 8, check=False,
                                stuck_id=stuck_id, run_for=self.sizes.stuck_seconds)
        stuck.notes.append(f"record id {stuck_id} (key {stuck_key.decode()}) never "
                           "completes; default window and max_task_buffer_bytes")
        src, options = await self.input_topic(n, 8), stuck.result.options
        p = default_partition(stuck_key, 8, counter=iter(()))
        inputs = await self.reader.end_offsets(src, 8)
        outputs = await self.reader.end_offsets(options.dst, 8)
        committed = await self.reader.committed(options.group, src) or {}
        others = sum(v for q, v in outputs.items() if q != p)
        stuck.notes.append(
            f"its partition {p}: {inputs[p]:,} input records, {outputs[p]:,} outputs, "
            f"committed offset {committed.get(p)} when stopped; the other 7 partitions: "
            f"{others:,} outputs")

    async def eos(self) -> None:
        """Exactly-once overhead: P1 sleep and P2 under ``exactly_once`` and
        ``at_least_once``, alternating, ``Sizes.eos_rounds`` times each: each round's pair
        runs back to back, and the targets compare their CPU per record (the median over
        the rounds; the best rate of each is a figure).

        Both guarantees are counted by what the group committed (``Watch.count``): under
        exactly-once an output is there for a ``read_committed`` reader only once its
        transaction commits, and timing both the same way compares like with like. The
        output is read back ``read_committed``: complete, in key order, no duplicates.

        First the broker's one-time transaction costs are paid, untimed
        (:func:`~benchmarks.peers.topics.warm_transactions`): on a fresh broker they fell on
        the first exactly-once run alone, which a broker in service never shows."""
        started = time.monotonic()
        await warm_transactions(self.bootstrap, f"bench-warm-up-{self.stamp}")
        self.say(f"broker's transaction paths warmed up ({time.monotonic() - started:.1f} s)")
        for round_ in range(1, self.sizes.eos_rounds + 1):  # a scenario name per round:
            # each run its own group
            # the order flips every round, so a drift in the machine's load favours neither
            order = ("exactly_once", "at_least_once")
            for guarantee in order if round_ % 2 else order[::-1]:
                await self.case(f"EOS P1 sleep #{round_}", c.aiostreams(guarantee=guarantee),
                                self.sizes.p1, 1, io="sleep", count="committed")
                await self.case(f"EOS P2 #{round_}", c.aiostreams(guarantee=guarantee),
                                self.sizes.p2, 8, count="committed")

    async def p6(self) -> None:
        """Scale: ``--workers 2`` against 1 on P2's input (8 partitions)."""
        for workers in (1, 2):
            await self.case("P6", c.aiostreams(workers), self.sizes.p2, 8)
