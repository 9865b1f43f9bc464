"""A failed send starts its tasks again from their last commit (the worker's rewind), on
the memory broker with a producer that fails one send, as a connection reset would."""

from __future__ import annotations

from collections.abc import Sequence

from appkit import produce

from aiostreams import App, Processor, Record
from aiostreams.errors import TransportError
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.transport.memory_producer import MemoryProducer
from aiostreams.types import OutgoingRecord, TopicPartition

IN = TopicPartition("in", 0)


class Upper(Processor[str, str]):
    def process(self, record: Record[str, str]) -> None:
        self.context.forward(record.with_value(record.value.upper()))


class FailsItsSecondSend(MemoryProducer):
    """A real memory producer whose second ``send_batch`` fails before appending anything
    (the connection dropped); it notes what the group had committed at that moment."""

    def __init__(self, broker: MemoryBroker, **kwargs: object) -> None:
        super().__init__(broker, **kwargs)  # type: ignore[arg-type]
        self.broker = broker
        self.sends = 0
        self.committed_at_failure: int | None = None
        self.landed_before_failure: int | None = None

    async def send_batch(self, records: Sequence[OutgoingRecord]) -> None:
        self.sends += 1
        if self.sends == 2:
            self.committed_at_failure = self.broker.committed("upper", IN) or 0
            self.landed_before_failure = self.broker.end_offset(TopicPartition("out", 0))
            raise TransportError("injected: connection reset mid-request") from \
                ConnectionResetError()
        await super().send_batch(records)


class OneFlakyProducer(MemoryTransport):
    """The memory transport, but its first plain producer (the worker's shared one) is
    :class:`FailsItsSecondSend`."""

    def __init__(self, broker: MemoryBroker) -> None:
        super().__init__(broker)
        self._broker_ref = broker
        self.flaky: FailsItsSecondSend | None = None

    def producer(self, *, client_id: str = "aiostreams",
                 transactional_id: str | None = None) -> MemoryProducer:
        if self.flaky is None and transactional_id is None:
            self.flaky = FailsItsSecondSend(self._broker_ref, client_id=client_id)
            return self.flaky
        return super().producer(client_id=client_id, transactional_id=transactional_id)


async def test_a_failed_send_processes_again_everything_after_the_last_commit() -> None:
    broker = MemoryBroker()
    broker.create_topic("in", 1)
    broker.create_topic("out", 1)
    transport = OneFlakyProducer(broker)
    app = App("upper", transport=transport, commit_interval_ms=50)
    app.topic("in", key=str, value=str)
    app.topic("out", key=str, value=str)
    app.topology.add_source("src", "in").add_processor("upper", Upper, "src").add_sink(
        "sink", "out", "upper")
    values = [f"v{i}" for i in range(150)]
    async with app:
        await produce(transport, "in", [(b"k", v.encode()) for v in values[:100]])
        await app.wait_until_caught_up(timeout=30)
        await produce(transport, "in", [(b"k", v.encode()) for v in values[100:]])
        await app.wait_until_caught_up(timeout=30)
    flaky = transport.flaky
    assert flaky is not None and flaky.committed_at_failure is not None
    assert flaky.landed_before_failure is not None
    c, n = flaky.committed_at_failure, flaky.landed_before_failure
    out = [r.value.decode() for r in broker.records("out", 0) if r.value is not None]
    # what landed before the failure, then every record from the last commit on, once
    # more, in order: nothing lost, and the rewind went back exactly to the commit
    assert out == out[:n] + [v.upper() for v in values[c:]]
    assert n <= len(values) and c <= n
    assert broker.committed("upper", IN) == 150
