"""Shadow replay of a fraud-scoring pipeline: record a run, change a threshold, replay, diff.

    python examples/fraud_replay.py [--payments 2000] [--keep]

The pipeline (``build_app``): ``payments`` (keyed by card) → ask a **risk service**
(``app.service("risk")``: a remote model whose answers drift from call to call, so a second
live run would not give the first run's scores) → per card, a running profile (payments,
total spent; a changelogged store) → a score from the risk, the amount and the card's
velocity → an **alert** to ``alerts`` when the score reaches the threshold.

What it does:

1. runs version 1 (threshold 0.60) on the embedded broker with the answers recorded
   (``record_services_dir``), then saves its inputs beside them
   (:func:`aiostreams.replay.inputs.save_inputs`): the recording;
2. replays version 1 over the recording at ``max_in_flight`` 1 and 1,000 and diffs each
   with the recorded run's alerts: **empty** (the run is a function of its inputs and of
   the recorded answers, whatever the concurrency);
3. replays version 2 (threshold 0.55) and diffs it with version 1's replay: the diff lists
   **exactly** the payments whose score is in [0.55, 0.60), as added alerts.

The same, from a shell (what CI runs to gate a rollout: ``diff`` exits 1 when they differ)::

    aiostreams replay examples.fraud_replay:app --from REC --out v1 --max-in-flight 1
    aiostreams replay examples.fraud_replay:app_v2 --from REC --out v2
    aiostreams diff v1 v2 --json diff.json
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import zlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import aiostreams as ais
from aiostreams.replay import (
    InputRange,
    Recording,
    RunDiff,
    diff_runs,
    load_inputs,
    read_outputs,
    read_ranges,
    replay,
    save_inputs,
)

THRESHOLD = 0.60
NEW_THRESHOLD = 0.55
PARTITIONS = 3
T0 = 1_764_000_000.0


class Payment(BaseModel):
    id: str
    card: str
    merchant: str
    amount: float


class Risk(BaseModel):
    """What the risk service answers for a payment."""

    merchant_risk: float


class Scored(BaseModel):
    payment: Payment
    risk: float


class CardProfile(BaseModel):
    """A card's running profile, and the score of its latest payment."""

    payments: int = 0
    total: float = 0.0
    last_payment: str = ""
    last_amount: float = 0.0
    score: float = 0.0


class Alert(BaseModel):
    payment: str
    card: str
    amount: float
    score: float


async def ask_risk_service(payment: Payment) -> Scored:
    """The remote model: slow, and its answers drift (a fresh draw around the merchant's
    base risk on every call)."""
    await asyncio.sleep(random.uniform(0.0, 0.002))
    base = (zlib.crc32(payment.merchant.encode()) % 100) / 100
    risk = min(1.0, max(0.0, base + random.uniform(-0.15, 0.15)))
    return Scored(payment=payment, risk=round(risk, 4))


def profile(card: str, scored: Scored, p: CardProfile) -> CardProfile:
    payments, total = p.payments + 1, p.total + scored.payment.amount
    velocity = min(1.0, payments / 20)
    size = min(1.0, scored.payment.amount / 2000)
    score = round(0.7 * scored.risk + 0.2 * size + 0.1 * velocity, 4)
    return CardProfile(payments=payments, total=total, last_payment=scored.payment.id,
                       last_amount=scored.payment.amount, score=score)


def to_alert(card: str, p: CardProfile | None) -> tuple[str, Alert]:
    assert p is not None  # filtered before
    return card, Alert(payment=p.last_payment, card=card, amount=p.last_amount, score=p.score)


def build_app(threshold: float, broker: str = "memory://", **settings: Any) -> ais.App:
    """The fraud pipeline, alerting at ``threshold``."""
    app = ais.App("fraud", broker=broker, commit_interval_ms=100, **settings)
    payments = app.topic("payments", key=str, value=Payment, partitions=PARTITIONS)
    alerts = app.topic("alerts", key=str, value=Alert)
    risk = app.service("risk", concurrency=64)
    (app.stream(payments)
        .map_values_async(ask_risk_service, service=risk,
                          retry=ais.Retry(attempts=3, backoff=0.01))
        .group_by_key()
        .aggregate(CardProfile, profile, materialized="card-profiles",
                   value_serde=CardProfile)
        .to_stream()
        .filter(lambda card, p: p is not None and p.score >= threshold)
        .map(to_alert)
        .to(alerts))
    return app


app = build_app(THRESHOLD)
"""Version 1, for ``aiostreams replay examples.fraud_replay:app``."""
app_v2 = build_app(NEW_THRESHOLD)
"""Version 2: the threshold lowered."""


def make_payments(count: int, seed: int = 39) -> list[Payment]:
    rng = random.Random(seed)
    merchants = [f"m{i}" for i in range(40)]
    cards = [f"card-{i}" for i in range(max(1, count // 8))]
    return [Payment(id=f"p{i}", card=rng.choice(cards), merchant=rng.choice(merchants),
                    amount=round(rng.lognormvariate(4.5, 1.0), 2)) for i in range(count)]


async def record(directory: Path, payments: list[Payment]) -> set[tuple[str, str]]:
    """Run version 1 with its answers recorded, then save its inputs beside them; returns
    the alerts it raised, as (card, alert JSON)."""
    broker = f"memory://fraud-record-{id(directory):x}"
    live = build_app(THRESHOLD, record_services_dir=str(directory / "recording"),
                     broker=broker)
    async with live.producer() as producer:
        for i, p in enumerate(payments):
            await producer.send("payments", p.card, p, timestamp=T0 + i)
    async with live:
        await live.wait_until_caught_up(timeout=120)
    inputs = await read_ranges(broker, [InputRange("payments", p, 0, None)
                                        for p in range(PARTITIONS)])
    save_inputs(directory / "recording", inputs)
    raised = await read_ranges(broker, [InputRange("alerts", 0, 0, None)])
    return {(r.key.decode(), (r.value or b"").decode()) for r in raised if r.key is not None}


async def replay_version(directory: Path, name: str, threshold: float,
                         max_in_flight: int) -> None:
    recording = directory / "recording"
    await replay(build_app(threshold), load_inputs(recording), directory / name,
                     recording=Recording.open(recording), max_in_flight=max_in_flight)


def compare(directory: Path, a: str, b: str) -> RunDiff:
    return diff_runs(read_outputs(directory / a), read_outputs(directory / b))


async def main_async(directory: Path, count: int) -> int:
    payments = make_payments(count)
    recorded = await record(directory, payments)
    print(f"recorded {count} payments, {len(recorded)} alerts and "
          f"{len(Recording.open(directory / 'recording'))} risk answers")
    await replay_version(directory, "v1-serial", THRESHOLD, 1)
    await replay_version(directory, "v1-wide", THRESHOLD, 1000)
    await replay_version(directory, "v2", NEW_THRESHOLD, 1000)
    replayed = {((r.key or b"").decode(), (r.value or b"").decode())
                for r in read_outputs(directory / "v1-serial")["alerts"]}
    print(f"v1 replayed gives the recorded run's alerts: {replayed == recorded}")
    same = compare(directory, "v1-serial", "v1-wide")
    print(f"v1 at max_in_flight 1 vs 1000: {same.summary(0)}")
    changed = compare(directory, "v1-serial", "v2")
    print(f"v1 vs v2 (threshold {THRESHOLD} -> {NEW_THRESHOLD}):")
    print(changed.summary(5))
    added = {Alert.model_validate_json(d.b.value or b"").payment
             for d in changed.differences if d.kind == "added" and d.b is not None}
    v2 = [Alert.model_validate_json(r.value or b"")
          for r in read_outputs(directory / "v2")["alerts"]]
    between = {a.payment for a in v2 if a.score < THRESHOLD}
    exact = added == between and all(d.kind == "added" for d in changed.differences)
    print(f"the diff lists exactly the alerts scored in [{NEW_THRESHOLD}, {THRESHOLD}): "
          f"{exact} ({len(added)} added, {len(between)} scored there)")
    return 0 if same.equal and replayed == recorded and exact else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--payments", type=int, default=2000)
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="fraud-replay-"))
    print(f"working directory {directory}", file=sys.stderr)
    try:
        code = ais.run_event_loop(main_async(directory, args.payments))
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
