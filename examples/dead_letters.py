"""Dead letters, walked through: a bad record is set aside with its reason, never lost.

    python examples/dead_letters.py [--broker kafka://127.0.0.1:9092]

The broker comes from ``--broker``, else from the settings (``AIOSTREAMS_BROKER``, else the
embedded ``memory://``).

1. Payments flow through a converter that cannot handle one currency (a bug) and rejects
   malformed records: those go to the dead-letter topic, the rest carry on, and the app
   keeps running and committing.
2. The dead letters are shown by ``aiostreams dlq show``: the error, the origin
   topic/partition/offset, the attempts, the processor.
3. The bug is fixed, ``aiostreams dlq replay`` re-publishes the dead letters to their origin
   topic, and the app runs again: this time the fixable ones go through, and the malformed
   one comes back to the dead-letter topic, with its reason.
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import BaseModel

import aiostreams as ais
from aiostreams.cli import main as aiostreams_cli

RATES = {"EUR": 1.0, "USD": 0.9}  # the bug: no GBP


class Payment(BaseModel):
    id: str
    amount: float
    currency: str


class UnknownCurrency(Exception):
    pass


def to_eur(payment: Payment) -> float:
    rate = RATES.get(payment.currency)
    if rate is None:
        raise UnknownCurrency(f"no exchange rate for {payment.currency}")
    return round(payment.amount * rate, 2)


def build(broker: str | None) -> ais.App:
    app = ais.App("payments", broker=broker, dead_letter_topic="payments-dlq",
                  commit_interval_ms=100)
    payments = app.topic("payments", key=str, value=Payment, partitions=1)
    app.topic("payments-dlq", key=bytes, value=bytes, partitions=1)
    (app.stream(payments).map_values(to_eur)
     .to(app.topic("payments-eur", key=str, value=float, partitions=1)))
    return app


async def count(app: ais.App, topic: str) -> int:
    async with app.consumer(topic) as records:
        return len(await records.read_to_end())


async def first_run(broker: str | None) -> None:
    app = build(broker)
    items: list[Any] = [
        Payment(id="p1", amount=10, currency="EUR"), Payment(id="p2", amount=20, currency="GBP"),
        Payment(id="p3", amount=30, currency="USD"), b'{"id": "p4", "amount": "lots"}',
        Payment(id="p5", amount=50, currency="GBP"),
    ]
    # a raw view of the same topic, to send a malformed record as a buggy producer would
    raw = ais.Topic.of("payments", key=str, value=bytes)
    async with app.producer() as producer:
        for i, item in enumerate(items):
            await producer.send(raw if isinstance(item, bytes) else "payments", f"p{i + 1}",
                                item)
    async with app:
        await app.wait_until_caught_up(timeout=60)
    print(f"converted: {await count(app, 'payments-eur')}, "
          f"dead-lettered: {await count(app, 'payments-dlq')}\n")


async def second_run(broker: str | None) -> None:
    app = build(broker)  # same app, same group: carries on with the replayed records
    async with app:
        await app.wait_until_caught_up(timeout=60)
    print(f"converted: {await count(app, 'payments-eur')}, "
          f"dead-letter topic now holds: {await count(app, 'payments-dlq')} "
          "(the malformed record came back with its reason; nothing was lost)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", help="default: AIOSTREAMS_BROKER, else memory://")
    args = parser.parse_args()
    broker = ["--broker", args.broker] if args.broker else []

    print("== 1. run with the bug")
    ais.run_event_loop(first_run(args.broker))

    print("== 2. the dead letters (aiostreams dlq show payments-dlq)")
    if aiostreams_cli(["dlq", "show", "payments-dlq", *broker]) != 0:
        raise SystemExit("dlq show failed")

    print("\n== 3. fix the bug, replay (aiostreams dlq replay payments-dlq), run again")
    RATES["GBP"] = 1.17
    if aiostreams_cli(["dlq", "replay", "payments-dlq", *broker]) != 0:
        raise SystemExit("dlq replay failed")
    ais.run_event_loop(second_run(args.broker))


if __name__ == "__main__":
    main()
