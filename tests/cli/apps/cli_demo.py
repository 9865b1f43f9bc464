"""A small app for the CLI tests, on the process's own ``memory://cli-demo`` broker.

A ``memory://`` broker lives inside one process, so importing this module preloads what the
commands need: ``DEMO_RECORDS`` (default 20) order lines in ``demo-orders`` (keys ``c0..c4``,
JSON values; every value whose ``item`` is ``"poison"`` makes the processor raise), and two
real dead letters in ``demo-dlq``. The app upper-cases each order's item into
``demo-orders-upper``; failures go to ``demo-dlq``.

``DEMO_CRASH_ONCE=PATH`` makes the first process to handle a record (whichever creates PATH)
exit at once with code 1, as a crash would (for the supervisor's restart tests).

``DEMO_STOP_AFTER=N`` makes the app ask itself to stop once it has handled N records (the
honest way to bound ``aiostreams run`` on a broker nobody else can feed). ``DEMO_PREFIX``
(default ``demo``) prefixes the topic names and the app's name, so tests on a shared Kafka
broker do not meet each other's topics.
"""

from __future__ import annotations

import os

from pydantic import BaseModel

from aiostreams import App, Processor, Record
from aiostreams.engine.failure import dead_letter_record
from aiostreams.transport.memory import MemoryBroker
from aiostreams.types import OutgoingRecord, RawRecord


class Order(BaseModel):
    id: str
    item: str
    amount: float


BROKER = "cli-demo"
PREFIX = os.environ.get("DEMO_PREFIX", "demo")
RECORDS = int(os.environ.get("DEMO_RECORDS", "20"))
STOP_AFTER = int(os.environ["DEMO_STOP_AFTER"]) if "DEMO_STOP_AFTER" in os.environ else None
CRASH_ONCE = os.environ.get("DEMO_CRASH_ONCE")

DLQ = f"{PREFIX}-dlq"
app = App(f"cli-{PREFIX}", broker=f"memory://{BROKER}", dead_letter_topic=DLQ,
          commit_interval_ms=20.0, poll_timeout=0.01)
orders = app.topic(f"{PREFIX}-orders", key=str, value=Order, partitions=2)
upper = app.topic(f"{PREFIX}-orders-upper", key=str, value=Order, partitions=2)

handled = 0


class Upper(Processor[str, Order]):
    def process(self, record: Record[str, Order]) -> None:
        global handled
        handled += 1
        if CRASH_ONCE is not None:
            try:
                os.close(os.open(CRASH_ONCE, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:
                os._exit(1)
        if STOP_AFTER is not None and handled >= STOP_AFTER:
            app.request_stop()
        if record.value.item == "poison":
            raise ValueError(f"order {record.value.id} is poison")
        value = record.value.model_copy(update={"item": record.value.item.upper()})
        self.context.forward(record.with_value(value))


app.topology.add_source("orders", orders).add_processor("upper", Upper, "orders").add_sink(
    "to-upper", upper, "upper")


def order(i: int) -> Order:
    return Order(id=f"o{i}", item="poison" if i % 10 == 7 else f"item{i}", amount=float(i))


def _preload() -> None:
    broker = MemoryBroker.named(BROKER)
    broker.create_topic(orders.name, 2)
    broker.create_topic(DLQ, 1)
    batch = []
    for i in range(RECORDS):
        key = orders.key_serde.serialize(orders.name, f"c{i % 5}")
        value = orders.value_serde.serialize(orders.name, order(i))
        batch.append((OutgoingRecord(orders.name, key, value, 1_700_000_000.0 + i), i % 2))
    broker.append(batch)
    letters = []
    for i in (107, 117):
        raw = RawRecord(orders.name, 1, i, 1_700_000_100.0,
                        orders.key_serde.serialize(orders.name, "c2"),
                        orders.value_serde.serialize(orders.name, order(i)),
                        (("trace-id", b"t-%d" % i),))
        try:
            raise ValueError(f"order o{i} is poison")
        except ValueError as e:
            letters.append((dead_letter_record(raw, e, topic=DLQ, attempts=3,
                                               processor="upper", now=1_700_000_200.0), 0))
    broker.append(letters)


_preload()
