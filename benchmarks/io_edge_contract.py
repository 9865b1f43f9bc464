"""The I/O edge against services as they really behave (issue 35): the scenarios
``python -m benchmarks.io_edge --only contract`` runs (and a full run includes).

Each runs a payments fraud-scoring app on the embedded memory broker that calls
:class:`benchmarks.risk_service.RiskService` (a real HTTP server on 127.0.0.1, in a process
of its own) with aiohttp through ``app.service(...)``:

- **rate-bound**: the service allows R requests a second (429 + ``Retry-After`` above it),
  3% 5xx, 1% hangs; a backlog of payments; R halves mid-run. Figures (on the server's clock): when
  the admitted rate reached 0.9 x R and stayed there, after the start and after the
  halving; the 429 share after that; records dead-lettered, by cause;
- **hangs**: a concurrency-bound service (C requests at once, 503 beyond), 1% of calls
  hang (the client's timeout fires), 3% 5xx; the adaptive concurrency limit sampled twice
  a second, against its floor and C;
- **quiet outage**: one payment a second, all on one card, the service down (502) for
  30 s: records dead-lettered, and how long until every payment had finished after it
  came back.

Figures print as lines of ``name  value``, the ratios the issue asks for with their target.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import aiohttp

import aiostreams as ais
from aiostreams.engine.failure import DLQ_HEADER_PREFIX
from aiostreams.transport.memory import MemoryBroker
from aiostreams.types import OutgoingRecord
from benchmarks.risk_service import TICK, Behaviour, SpawnedRiskService, Stats

__all__ = ["FULL", "QUICK", "Sizes", "hangs", "quiet_outage", "rate_bound", "run_all"]

FLOOR = 2
"""The adaptive concurrency limit's floor in every scenario (``Adaptive(min=FLOOR)``)."""


@dataclass(frozen=True)
class Sizes:
    rate: float = 40.0
    rate_phase: float = 20.0  # seconds at R, then as long at R / 2
    hang_seconds: float = 20.0
    capacity: int = 20
    outage_up: float = 5.0  # seconds of traffic before the outage (and after it)
    outage_down: float = 30.0
    attempts: int = 12  # the step's Retry: 12 attempts take ~13 s at most
    max_backoff: float = 2.0
    rate_attempts: int | None = None  # the rate-bound app's attempts (None: ``attempts``)


FULL = Sizes()
QUICK = Sizes(rate=40.0, rate_phase=4.0, hang_seconds=3.0, outage_up=1.0, outage_down=3.0)


class TransientError(Exception):
    """The user's own exception: an answer without a score (worth another attempt)."""


def say(name: str, value: str) -> None:
    print(f"{name:<58} {value}", flush=True)


def new_app() -> ais.App:
    return ais.App(f"payments-{uuid.uuid4().hex[:8]}", broker=f"memory://{uuid.uuid4().hex}",
                   commit_interval_ms=100.0, max_in_flight=200, dead_letter_topic="dlq",
                   drain_timeout=1.0)  # a run ends at its time: records held may stay


def broker_of(app: ais.App) -> MemoryBroker:
    return MemoryBroker.named(app.settings.broker.removeprefix("memory://"))


def pay(app: ais.App, payments: list[tuple[str, str]], partitions: int = 4) -> None:
    """Append (card, payment id) records to topic ``payments``, a card's in one partition."""
    broker = broker_of(app)
    if broker.partition_count("payments") is None:
        broker.create_topic("payments", partitions)
    now = time.time()
    broker.append([(OutgoingRecord("payments", card.encode(), payment.encode(), now),
                    zlib.crc32(card.encode()) % partitions) for card, payment in payments])


def dead_letters(app: ais.App) -> Counter[str]:
    """The dead-lettered records, counted by the exception that dead-lettered them (an
    HTTP error by its status: ``ClientResponseError 429``)."""
    broker = broker_of(app)
    if not broker.partition_count("dlq"):
        return Counter()
    causes: Counter[str] = Counter()
    for record in broker.records("dlq"):
        headers = dict(record.headers)
        cause = (headers.get(DLQ_HEADER_PREFIX + "exception") or b"?").decode()
        cause = cause.rpartition(".")[2]
        if cause == "ClientResponseError":  # aiohttp's message starts with the status
            message = (headers.get(DLQ_HEADER_PREFIX + "message") or b"").decode()
            cause += " " + message.partition(",")[0]
        causes[cause] += 1
    return causes


def slowed_down(dead: Counter[str]) -> int:
    """Dead letters for a 429 (or a 503): raised as ``Overloaded`` or as the HTTP error."""
    return sum(n for cause, n in dead.items()
               if cause == "Overloaded" or cause.endswith((" 429", " 503")))


def scoring_app(url: str, sizes: Sizes, *, timeout: float = 1.0,
                attempts: int | None = None) -> tuple[ais.App, ais.DeclaredService]:
    """The issue's fraud-scoring app, written as the services guide says: payments keyed
    by card, scored by the risk model through ``app.service("risk", ...)`` whose contract
    (the default: 429/503 slow down, 5xx and timeouts are transient) is declared once;
    results to ``scored``, failures to ``dlq``. The step's ``retry_on`` lists only the
    user's own exception, as the flagship example does."""
    app = new_app()
    payments = app.topic("payments", key=str, value=str, partitions=4)
    scored = app.topic("scored", key=str, value=str, partitions=4)
    app.topic("dlq", key=bytes, value=bytes)
    http = app.resource("http", lambda: aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0)))
    risk = app.service("risk", concurrency=ais.Adaptive(initial=4, min=FLOOR, max=200),
                       timeout=timeout, breaker=ais.CircuitBreaker(), max_hold=600.0,
                       contract=ais.ServiceContract())
    retry = ais.Retry(attempts=attempts or sizes.attempts, backoff=0.05,
                      max_backoff=sizes.max_backoff, retry_on=(TransientError,))
    (app.stream(payments)
        .map_values_async(score_fn(http, url), service=risk, retry=retry)
        .to(scored))
    return app, risk


def score_fn(http: ais.Resource[aiohttp.ClientSession], url: str
             ) -> Callable[[str], Awaitable[str]]:
    async def score(payment: str) -> str:
        async with http.value.get(f"{url}/score/{payment}") as response:
            response.raise_for_status()  # the service's contract reads the status
            body = await response.json()
            if "score" not in body:
                raise TransientError(f"the risk model answered no score: {body}")
            return str(body["score"])
    return score


# -- rate-bound -----------------------------------------------------------------------


@dataclass(frozen=True)
class Phase:
    converged_in: float | None  # seconds from the phase's start, or None
    throughput: float  # admitted / s over [min(converged, 10 s), end) / R
    refused_after: float  # 429 share of calls from convergence (or 10 s) on
    refused_from_start: float  # 429 share of all the phase's calls
    lowest_window: tuple[float, int]  # (seconds into the phase, calls) of the fewest
    # admitted in a 2-s window from convergence (or 10 s) on


def phase(stats: Stats, start: float, end: float, rate: float) -> Phase:
    """Figures of ``[start, end)`` (server seconds) at allowed ``rate``. *Converged*: the
    first whole second of the phase from which every 2-s window (sliding by half a
    second, each inside the phase) admitted >= 0.9 x ``rate`` x 2 calls. *After
    convergence*: from that second (or from 10 s when it never converged) to the phase's
    end; *from start*: the whole phase, its opening included."""
    first, last = int(start / TICK + 0.999), int(end / TICK)
    ticks = (stats.timeline + [[0, 0, 0, 0, 0]] * last)[first:last]
    window = int(2 / TICK)
    converged = next((i for i in range(0, len(ticks) - window + 1, int(1 / TICK))
                      if all(sum(t[0] for t in ticks[j:j + window]) >= 0.9 * rate * 2
                             for j in range(i, len(ticks) - window + 1))), None)
    settled = ticks[min(converged if converged is not None else len(ticks),
                        int(10 / TICK)):] or ticks[-window:]
    admitted = sum(t[0] for t in settled)
    refused = sum(t[1] for t in settled)
    since = min(converged if converged is not None else len(ticks), int(10 / TICK))
    windows = [(j * TICK, sum(t[0] for t in ticks[j:j + window]))
               for j in range(since, len(ticks) - window + 1)] or [(0.0, 0)]
    total_admitted = sum(t[0] for t in ticks)
    total_refused = sum(t[1] for t in ticks)
    return Phase(None if converged is None else converged * TICK,
                 admitted / (len(settled) * TICK) / rate,
                 refused / max(1, admitted + refused),
                 total_refused / max(1, total_admitted + total_refused),
                 min(windows, key=lambda w: w[1]))


async def rate_bound(sizes: Sizes) -> None:
    rate = sizes.rate
    service = SpawnedRiskService(Behaviour(rate=rate, error_share=0.03, hang_share=0.01))
    url = await service.start()
    try:
        app, risk = scoring_app(url, sizes, attempts=sizes.rate_attempts)
        pay(app, [(f"card{i % 1000}", f"p{i}") for i in range(int(rate * sizes.rate_phase
                                                                  * 3))])
        learned: list[float | None] = []
        limits: list[int] = []
        lags: list[float] = []  # the event loop's worst lateness each second

        async def lateness() -> None:
            while True:
                worst, started = 0.0, time.perf_counter()
                while time.perf_counter() - started < 1.0:
                    due = time.perf_counter() + 0.01
                    await asyncio.sleep(0.01)
                    worst = max(worst, time.perf_counter() - due)
                lags.append(worst)

        async def watch(seconds: float) -> None:
            for _ in range(int(seconds)):
                await asyncio.sleep(1.0)
                live = risk.current
                learned.append(live.learned.rate if live is not None else None)
                limits.append(live.limit if live is not None else 0)
        await service.configure(rate=rate)  # the start, on the server's clock
        lag = asyncio.ensure_future(lateness())
        try:
            async with app:
                await watch(sizes.rate_phase)
                await service.configure(rate=rate / 2)
                await watch(sizes.rate_phase)
        finally:
            lag.cancel()
        stats = await service.stats()
    finally:
        await service.stop()
    started, halved = stats.events[-2][0], stats.events[-1][0]
    for name, allowed, part in (
            ("R", rate, phase(stats, started, halved, rate)),
            ("R/2", rate / 2, phase(stats, halved, halved + sizes.rate_phase, rate / 2))):
        label = f"rate-bound [{name} = {allowed:g}/s]"
        say(f"{label} >= 0.9 x R in", "never (target <= 10 s)" if part.converged_in is None
            else f"{part.converged_in:g} s (target <= 10 s)")
        say(f"{label} throughput / allowed rate", f"{part.throughput:.2f} (target >= 0.9)")
        say(f"{label} 429 share after convergence", f"{part.refused_after:.2%} "
            "(target <= 2%)")
        say(f"{label} 429 share from start", f"{part.refused_from_start:.2%} "
            "(target <= 2%)")
        at, calls = part.lowest_window
        say(f"{label} fewest in a 2-s window after convergence",
            f"{calls} at {at:g} s (0.9 x R x 2 = {0.9 * allowed * 2:g})")
    per_second = [a[0] + b[0] for a, b in zip(stats.timeline[::2], stats.timeline[1::2],
                                              strict=False)]
    say("rate-bound admitted/s, each second", " ".join(map(str, per_second)))
    say("rate-bound 429s/s, each second", " ".join(
        str(a[1] + b[1]) for a, b in zip(stats.timeline[::2], stats.timeline[1::2],
                                         strict=False)))
    dead = dead_letters(app)
    say("rate-bound dead-lettered for 429s", f"{slowed_down(dead)} (target 0)")
    say("rate-bound dead-lettered, all causes", f"{sum(dead.values())} {dict(dead)!r}")
    say("rate-bound calls admitted / answered 429", f"{stats.admitted:,} / {stats.refused:,}")
    say("rate-bound learned rate, each second", " ".join(
        "-" if r is None else f"{r:.0f}" for r in learned))
    say("rate-bound concurrency limit, each second", " ".join(map(str, limits)))
    say("rate-bound event loop's worst lateness (ms), each second",
        " ".join(f"{lag * 1000:.0f}" for lag in lags))
    if risk.current is not None:
        say("rate-bound calls held (slow-down or outage) / hold expired",
            f"{risk.current.stats.held_total:,} / {risk.current.stats.hold_expired}")


# -- hangs ----------------------------------------------------------------------------


async def hangs(sizes: Sizes) -> None:
    capacity = sizes.capacity
    service = SpawnedRiskService(Behaviour(hang_share=0.01, error_share=0.03,
                                           capacity=capacity))
    url = await service.start()
    limits: list[int] = []
    learned: list[float | None] = []
    try:
        app, risk = scoring_app(url, sizes, timeout=1.0)
        backlog = int(sizes.hang_seconds * 2 * capacity / 0.01)  # twice what C can answer
        pay(app, [(f"card{i % 1000}", f"p{i}") for i in range(backlog)])
        async with app:
            for _ in range(int(sizes.hang_seconds / TICK)):
                await asyncio.sleep(TICK)
                limits.append(risk.current.limit if risk.current is not None else 0)
                learned.append(risk.current.learned.rate if risk.current else None)
        stats = await service.stats()
    finally:
        await service.stop()
    settled = limits[len(limits) // 2:]
    say("hangs 1%: concurrency limit (median of the 2nd half) / floor",
        f"{statistics.median(settled):g} / {FLOOR} (target: above the floor; C = {capacity})")
    say("hangs 1%: lowest limit in the 2nd half", f"{min(settled)}")
    say("hangs 1%: limit each second", " ".join(map(str, limits[1::2])))
    say("hangs 1%: learned rate each second", " ".join(
        "-" if r is None else f"{r:.0f}" for r in learned[1::2]))
    ideal = capacity / 0.045  # C at once, 45 ms on average
    say("hangs 1%: calls/s admitted / C's ideal, hung, 503s",
        f"{stats.admitted / sizes.hang_seconds / ideal:.2f}, {stats.hung}, {stats.busy}")
    dead = dead_letters(app)
    say("hangs 1%: dead-lettered, all causes", f"{sum(dead.values())} {dict(dead)!r}")


# -- quiet outage ---------------------------------------------------------------------


async def quiet_outage(sizes: Sizes) -> None:
    """One payment a second, all on one card; the service down for ``outage_down`` s."""
    service = SpawnedRiskService(Behaviour(error_share=0.0))
    url = await service.start()
    try:
        app, risk = scoring_app(url, sizes)
        sent = 0
        async with app:
            async def one_a_second(seconds: float) -> None:
                nonlocal sent
                for _ in range(int(seconds)):
                    pay(app, [("card-1", f"p{sent}")])
                    sent += 1
                    await asyncio.sleep(1.0)
            await one_a_second(sizes.outage_up)
            await service.configure(down_for=sizes.outage_down)
            await one_a_second(sizes.outage_down)
            back = time.perf_counter()
            await one_a_second(sizes.outage_up)
            finished_in: float | None = None
            try:
                await app.wait_until_caught_up(timeout=60.0)
                finished_in = time.perf_counter() - back
            except TimeoutError:
                pass
        stats = await service.stats()
    finally:
        await service.stop()
    scored = len(broker_of(app).records("scored"))
    dead = dead_letters(app)
    say("quiet outage dead-lettered", f"{sum(dead.values())} of {sent} (target 0) "
        f"{dict(dead)!r}")
    say("quiet outage payments scored", f"{scored} of {sent} (target all)")
    say("quiet outage every payment finished, after recovery, in",
        "not within 60 s" if finished_in is None else f"{finished_in:.1f} s")
    live = risk.current
    opened = live.breaker.opened if live is not None and live.breaker is not None else 0
    say("quiet outage 502s answered, breaker opened", f"{stats.down}, {opened} times")
    if live is not None:
        say("quiet outage calls held / hold expired",
            f"{live.stats.held_total} / {live.stats.hold_expired}")


async def run_all(sizes: Sizes, only: str | None = None) -> None:
    for scenario in (rate_bound, hangs, quiet_outage):
        if only in (None, "contract", scenario.__name__):
            await scenario(sizes)
