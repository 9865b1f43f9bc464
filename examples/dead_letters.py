"""Dead letters, walked through: a bad record is set aside with its reason, never lost.

    python examples/dead_letters.py [--broker kafka://127.0.0.1:9092]

1. Payments flow through a converter that cannot handle one currency (a bug) and rejects
   malformed records: those go to the dead-letter topic, the rest carry on, and the app
   keeps running and committing.
2. The dead letters are shown as ``aiostreams dlq show`` shows them: the error, the
   origin topic/partition/offset, the attempts, the processor.
3. The bug is fixed and the dead letters are replayed to their origin topic, as
   ``aiostreams dlq replay`` does; this time the fixable ones go through, and the malformed
   one comes back to the dead-letter topic — with its reason.
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import BaseModel

import aiostreams as ais
from aiostreams.app import run_event_loop
from aiostreams.commands.dlq import replay_dead_letters, show_dead_letters
from aiostreams.commands.render import decoder
from aiostreams.transport.base import TopicSpec, Transport
from aiostreams.types import OutgoingRecord

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


def build(broker: str, run: int) -> ais.App:
    app = ais.App(f"payments-{run}", broker=broker, dead_letter_topic="payments-dlq",
                  commit_interval_ms=100)
    payments = app.topic("payments", key=str, value=Payment)
    (app.stream(payments).map_values(to_eur)
     .to(app.topic("payments-eur", key=str, value=float, partitions=1)))
    return app


async def count(transport: Transport, topic: str) -> int:
    consumer = transport.consumer(None)
    await consumer.start()
    from aiostreams.types import TopicPartition

    ends = await consumer.end_offsets([TopicPartition(topic, 0)])
    await consumer.stop()
    return sum(ends.values())


async def main_async(broker: str) -> None:
    first = build(broker, 1)
    transport = first.transport
    admin = transport.admin()
    await admin.start()
    await admin.create_topics([TopicSpec("payments", 1), TopicSpec("payments-dlq", 1)])
    await admin.stop()
    items: list[Any] = [
        Payment(id="p1", amount=10, currency="EUR"), Payment(id="p2", amount=20, currency="GBP"),
        Payment(id="p3", amount=30, currency="USD"), b'{"id": "p4", "amount": "lots"}',
        Payment(id="p5", amount=50, currency="GBP"),
    ]
    producer = transport.producer()
    await producer.start()
    await producer.send_batch([
        OutgoingRecord("payments", f"p{i + 1}".encode(),
                       item if isinstance(item, bytes) else item.model_dump_json().encode())
        for i, item in enumerate(items)])
    await producer.flush()
    await producer.stop()

    print("== 1. run with the bug")
    async with first:
        await first.wait_until_caught_up(timeout=60)
    print(f"converted: {await count(transport, 'payments-eur')}, "
          f"dead-lettered: {await count(transport, 'payments-dlq')}\n")

    print("== 2. the dead letters (aiostreams dlq show payments-dlq)")
    auto = (decoder("auto", None, "key"), decoder("auto", None, "value"))
    await show_dead_letters(transport, "payments-dlq", limit=None, decoders={"": auto},
                            with_traceback=False)

    print("\n== 3. fix the bug, replay (aiostreams dlq replay payments-dlq)")
    RATES["GBP"] = 1.17
    second = build(broker, 1)  # same app, same group: carries on after the replayed records
    async with second:
        await replay_dead_letters(transport, "payments-dlq", limit=None, dry_run=False,
                                  group=None, from_beginning=False)
        await second.wait_until_caught_up(timeout=60)
    print(f"converted: {await count(transport, 'payments-eur')}, "
          f"dead-letter topic now holds: {await count(transport, 'payments-dlq')} "
          "(the malformed record came back with its reason; nothing was lost)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--broker", default="memory://dead-letters")
    args = parser.parse_args()
    run_event_loop(main_async(args.broker))


if __name__ == "__main__":
    main()
