"""Foreign-key table-table joins (Kafka Streams' KIP-213): ``left.join_on_foreign_key(right,
foreign_key, joiner)`` joins each row of ``left`` with the row of ``right`` whose key is
``foreign_key(left value)``; the result is keyed like ``left``.

The two tables are partitioned by different keys, so the join talks through two internal
topics, as Kafka Streams 3.9.1 does (``kstream/internals/foreignkeyjoin``; wire formats in
:mod:`aiostreams.processors.fk_join_wire`):

1. **Subscribe** (:class:`SubscriptionSendProcessor`, left side): every left update ``(new,
   old)`` becomes :class:`Subscription` records keyed by the foreign key, on
   ``<app>-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-<n>-topic`` (co-partitioned with
   ``right``). Each carries the hash of the left row's new value, the primary key and its
   partition. A row that moves to another foreign key unsubscribes from the old one.
2. **Answer** (:class:`SubscriptionProcessor`, right side): records the subscription in a
   store keyed by ``(foreign key, primary key)``, looks up the right row, and answers with a
   :class:`Response` (the right value, or none) on
   ``<app>-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-<n>-topic``, routed to the primary key's
   partition. A right update (:class:`ForeignTableJoinProcessor`) answers every subscriber
   of its key (a prefix range of the store).
3. **Resolve** (:class:`ResponseJoinProcessor`, left side): a response whose hash is not the
   hash of the left row's *current* value is stale (the row changed since) and is dropped;
   otherwise it emits ``joiner(left, right)``, or a delete. The results are materialized
   (Kafka's ``KTableSource`` of the output), so the joined table can be read and joined.

**Convergence (a deviation from Kafka Streams 3.9.1, kept on purpose).** The result is the
join of the final tables whatever the interleaving of the four streams (left updates,
right updates, subscriptions, responses). Kafka's inner join can stay stale forever: a
left row whose value's own response never comes keeps a result that an earlier, now stale
response would have retracted. Two cases, both closed here:

* an inner join's ``PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE`` finding no right value: Kafka
  answers nothing; the right side answers a *retraction* (a response with no value,
  marked by the header :data:`RETRACT_ONLY`), which the left side applies only when the
  result holds a value for the key, and drops otherwise (as Kafka's silence would);
* an inner join's update whose foreign keys, old and new, are both ``None`` (a row with
  none, or deleted from none): Kafka sends nothing; the left side retracts a result it
  still holds for the key itself, to the result node, without a round trip.

When updates are processed one at a time (Kafka's ``TopologyTestDriver``, the oracle's step
mode) the result never holds a value in either case, so the output is Kafka's record for
record. Why every interleaving converges: the final left value ``v`` (with foreign key
``f``) is current from its update on, so from then only responses carrying ``hash(v)``
land. With ``f`` set, those all come from ``f``'s subscription partition, in order, and
every subscription of ``v`` is now answered, so the last one carries ``f``'s final right
value. With ``f`` ``None``, every ``hash(v)`` response is a delete, and the update either
sent one (``DELETE_KEY_AND_PROPAGATE``) or retracted locally. A left join already answers
every subscription (``PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE``, a ``None`` key too).

The DSL method that wires these together is in :mod:`aiostreams.dsl.fk_join_wiring`.

Which instruction and which result, for inner and left joins, follow Kafka's processors
line by line (the docstrings below); timestamps too: an answer is stamped with the later of
the subscription's and the right row's timestamps, a right update's answers with its own.

Invariants: the subscription store holds one entry per (foreign key, primary key) that is
currently subscribed, and nothing else; a response is emitted as a result only when its
hash equals the hash of the left row's current value (both ``None`` for a deleted row);
a retraction (:data:`RETRACT_ONLY`, or local) is emitted only while the result holds a
value for the key.
Concurrency: step 2 is keyed by the foreign key (subscriptions and right updates of one
foreign key never overlap, and a prefix range sees earlier buffered writes); steps 1 and 3
by the primary key, so each reads what the serial run would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiostreams.processors.fk_join_wire import (
    CombinedKey,
    Instruction,
    Response,
    Subscription,
    hash128,
)
from aiostreams.processors.store_values import ValueAndTimestamp
from aiostreams.processors.table_changes import old_value
from aiostreams.processors.tables import ValueGetter
from aiostreams.serde import Serde
from aiostreams.topology.processor import Processor, ProcessorContext
from aiostreams.types import Headers, Record
from aiostreams.windows import to_ms

AnyRecord = Record[Any, Any]

RETRACT_ONLY = ("aiostreams.fk-join.retract-only", b"1")
"""The last header of a response that only retracts: an inner join's
``PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE`` that found no right value (Kafka answers nothing).
The resolver strips it; it never reaches the join's output."""


def is_retraction(headers: Headers) -> bool:
    """Whether a response's headers end with :data:`RETRACT_ONLY`."""
    return bool(headers) and headers[-1] == RETRACT_ONLY


async def holds_result(context: ProcessorContext, store: str, key: Any) -> bool:
    """Whether the join's result store holds a value for ``key``."""
    return await context.store(store).get(key) is not None


def value_hash(serde: Serde[Any], topic: str, value: Any) -> tuple[int, int] | None:
    """Kafka's hash of a left row's value (``None`` for no value)."""
    if value is None:
        return None
    return hash128(serde.serialize(topic, value) or b"")


class SubscriptionSendProcessor(Processor[Any, Any]):
    """Step 1 (Kafka 3.9.1's ``SubscriptionSendProcessorSupplier``). With ``fk(v)`` the
    foreign key of a value (``None`` for no value), on an update ``(new, old)``:

    * left join: with ``old`` present, a changed foreign key first unsubscribes
      ``fk(old)`` (``DELETE_KEY_NO_PROPAGATE``, when not ``None``), then ``fk(new)`` gets
      ``PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE`` (even ``None``: the row joins nothing);
      with only ``new``, ``fk(new)`` gets ``PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE``;
    * inner join: with ``old`` present: both foreign keys ``None``: skipped (counted);
      only ``fk(old)`` ``None``: ``PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE`` to ``fk(new)``;
      only ``fk(new)`` ``None``: ``DELETE_KEY_AND_PROPAGATE`` to ``fk(old)``; a changed
      key: ``DELETE_KEY_NO_PROPAGATE`` to the old, ``PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE``
      to the new; the same key: ``PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE``. With only ``new``:
      ``PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE``, or skipped for a ``None`` foreign key.

    Subscriptions go to the child ``subscriptions`` (the subscription topic's sink). Where
    an inner join skips (both foreign keys ``None``), a result the join still holds for
    the key is deleted through the child ``result`` (the module's convergence rule).

    Foreign keys are compared by their serialized bytes, as Kafka does."""

    def __init__(self, foreign_key: Callable[[Any], Any], foreign_key_serde: Serde[Any],
                 value_serde: Serde[Any], left: bool, topic: str, *, subscriptions: str,
                 result: str, result_store: str) -> None:
        self.foreign_key = foreign_key
        self.foreign_key_serde = foreign_key_serde
        self.value_serde = value_serde
        self.left = left
        self.topic = topic
        self.subscriptions = subscriptions
        self.result = result
        self.result_store = result_store
        self.null_foreign_keys = 0
        self.local_retractions = 0

    def _differ(self, a: Any, b: Any) -> bool:
        serialize = self.foreign_key_serde.serialize
        return (None if a is None else serialize(self.topic, a)) != \
            (None if b is None else serialize(self.topic, b))

    async def process(self, record: AnyRecord) -> None:
        new, old = record.value, old_value(record)
        fk_new = None if new is None else self.foreign_key(new)
        fk_old = None if old is None else self.foreign_key(old)
        sends: list[tuple[Any, Instruction]] = []
        if self.left:
            if old is not None and fk_old is not None and self._differ(fk_new, fk_old):
                sends.append((fk_old, Instruction.DELETE_KEY_NO_PROPAGATE))
            if old is not None or new is not None:
                sends.append((fk_new, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE))
        elif fk_old is None and fk_new is None:
            if old is not None or new is not None:
                self.null_foreign_keys += 1
            if await holds_result(self.context, self.result_store, record.key):
                self.local_retractions += 1
                self.context.forward(record.with_value(None), self.result)
        elif fk_old is None:
            sends.append((fk_new, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE))
        elif fk_new is None:
            sends.append((fk_old, Instruction.DELETE_KEY_AND_PROPAGATE))
        elif self._differ(fk_new, fk_old):
            sends.append((fk_old, Instruction.DELETE_KEY_NO_PROPAGATE))
            sends.append((fk_new, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE))
        else:
            sends.append((fk_new, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE))
        if not sends:
            return
        hashed = value_hash(self.value_serde, self.topic, new)
        for fk, instruction in sends:
            self.context.forward(record.with_key_value(
                fk, Subscription(hashed, instruction, record.key, record.partition)),
                self.subscriptions)


class SubscriptionProcessor(Processor[Any, Any]):
    """Step 2 (Kafka's ``SubscriptionReceiveProcessorSupplier`` and
    ``SubscriptionJoinProcessorSupplier``): store (or, for the two delete instructions,
    remove) the subscription under ``(foreign key, primary key)``, then answer by
    instruction: ``DELETE_KEY_AND_PROPAGATE`` with no value; ``PROPAGATE_NULL_IF_...`` with
    the right value or none; ``PROPAGATE_ONLY_IF_...`` only when there is a right value;
    ``DELETE_KEY_NO_PROPAGATE`` not at all. A null foreign key (left joins only) is not
    stored and answered with no value; with another instruction it is dropped.

    Deviation (the module's convergence rule): ``PROPAGATE_ONLY_IF_...`` with no right
    value is answered with no value and the :data:`RETRACT_ONLY` header, where Kafka
    answers nothing."""

    def __init__(self, store: str, foreign: ValueGetter) -> None:
        self.store_name = store
        self.foreign = foreign
        self.dropped = 0

    async def process(self, record: AnyRecord) -> None:
        sub = record.value
        assert isinstance(sub, Subscription), sub
        fk = record.key
        ts = to_ms(record.timestamp)
        if fk is None:
            if sub.instruction is not Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
                self.dropped += 1
                return
            foreign, foreign_ms = None, -1
        else:
            store = self.context.store(self.store_name)
            combined = CombinedKey(fk, sub.primary_key)
            if sub.instruction in (Instruction.DELETE_KEY_AND_PROPAGATE,
                                   Instruction.DELETE_KEY_NO_PROPAGATE):
                store.delete(combined)
            else:
                store.put(combined, ValueAndTimestamp(sub, ts / 1000))
            foreign, foreign_ms = await self.foreign.get_stamped(self.context, fk)
        stamp = ts if foreign is None else max(ts, foreign_ms)
        if sub.instruction is Instruction.DELETE_KEY_NO_PROPAGATE:
            return
        headers = record.headers
        if sub.instruction is Instruction.DELETE_KEY_AND_PROPAGATE:
            foreign = None
        elif (sub.instruction is Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE
              and foreign is None):
            headers = (*headers, RETRACT_ONLY)
        response = Response(sub.value_hash, foreign, sub.primary_partition)
        self.context.forward(Record(sub.primary_key, response, record.topic,
                                    record.partition, record.offset, stamp / 1000,
                                    headers))


class ForeignTableJoinProcessor(Processor[Any, Any]):
    """Step 2 for right updates (Kafka's ``ForeignTableJoinProcessorSupplier``): answer every
    subscriber of the updated key with its new value (or none), stamped with the update's
    timestamp, in the store's key order. A null key is dropped."""

    def __init__(self, store: str) -> None:
        self.store_name = store

    async def process(self, record: AnyRecord) -> None:
        fk = record.key
        if fk is None:
            return
        store = self.context.store(self.store_name)
        low, high = CombinedKey(fk, None, "low"), CombinedKey(fk, None, "high")
        async for combined, stamped in store.range(low, high):
            if combined.foreign_key != fk:
                continue  # the range's upper end is inclusive
            sub = stamped.value
            self.context.forward(record.with_key_value(
                combined.primary_key,
                Response(sub.value_hash, record.value, sub.primary_partition)))


class ResponseJoinProcessor(Processor[Any, Any]):
    """Step 3 (Kafka's ``ResponseJoinProcessorSupplier``): drop a response whose hash is not
    the current left value's; else forward the join result: a delete when there is no
    right value (inner join) or no left row, else ``joiner(left, right)``. A current
    :data:`RETRACT_ONLY` response is a delete (without its marker) when the result store
    ``result_store`` holds a value for the key, and is dropped otherwise."""

    def __init__(self, primary: ValueGetter, value_serde: Serde[Any],
                 joiner: Callable[[Any, Any], Any], left: bool, topic: str,
                 result_store: str) -> None:
        self.primary = primary
        self.value_serde = value_serde
        self.joiner = joiner
        self.left = left
        self.topic = topic
        self.result_store = result_store
        self.stale = 0
        self.retractions_unneeded = 0

    async def process(self, record: AnyRecord) -> None:
        response = record.value
        assert isinstance(response, Response), response
        current = await self.primary.get(self.context, record.key)
        if value_hash(self.value_serde, self.topic, current) != response.value_hash:
            self.stale += 1
            return
        if is_retraction(record.headers):
            assert response.foreign_value is None, response
            if not await holds_result(self.context, self.result_store, record.key):
                self.retractions_unneeded += 1
                return
            record = Record(record.key, response, record.topic, record.partition,
                            record.offset, record.timestamp, record.headers[:-1])
        foreign = response.foreign_value
        if foreign is None and (not self.left or current is None):
            result = None
        else:
            result = self.joiner(current, foreign)
        self.context.forward(record.with_value(result))


__all__ = [
    "RETRACT_ONLY",
    "ForeignTableJoinProcessor",
    "ResponseJoinProcessor",
    "SubscriptionProcessor",
    "SubscriptionSendProcessor",
    "value_hash",
]
