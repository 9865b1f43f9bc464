"""Exactly-once, a transactional commit whose outcome is in doubt (issue 33: a connection
reset during ``commit_transaction`` stopped the worker). The worker rides it out alone: it
rewinds the task, lets the transaction coordinator settle the transaction (a producer with
the same transactional id is let in only once it is committed or aborted), reads the
group's committed offsets and resumes there - whichever way the commit went, every input
has exactly one output for read_committed readers."""

from __future__ import annotations

import pytest
from appkit import produce

from aiostreams import App, Processor, Record
from aiostreams.engine.outage import InDoubtCommitError, settle_in_doubt
from aiostreams.errors import TransportError
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.transport.memory_producer import MemoryProducer
from aiostreams.types import TopicPartition

IN = TopicPartition("in", 0)


class Upper(Processor[str, str]):
    def process(self, record: Record[str, str]) -> None:
        self.context.forward(record.with_value(record.value.upper()))


class LosesTheAnswerOfItsSecondCommit(MemoryProducer):
    """A transactional producer whose second ``commit_transaction`` does not hear back:
    the commit lands (``landed``) or not, then the call raises as a reset would."""

    def __init__(self, broker: MemoryBroker, landed: bool, **kwargs: object) -> None:
        super().__init__(broker, **kwargs)  # type: ignore[arg-type]
        self.landed = landed
        self.commits = 0
        self.failed = False

    async def commit_transaction(self) -> None:
        self.commits += 1
        if self.commits == 2:
            self.failed = True
            if self.landed:
                await super().commit_transaction()
            raise TransportError("injected: connection reset while committing") from \
                ConnectionResetError()
        await super().commit_transaction()


class InDoubtTransport(MemoryTransport):
    def __init__(self, broker: MemoryBroker, landed: bool) -> None:
        super().__init__(broker)
        self._broker_ref = broker
        self._landed = landed
        self.flaky: LosesTheAnswerOfItsSecondCommit | None = None

    def producer(self, *, client_id: str = "aiostreams",
                 transactional_id: str | None = None) -> MemoryProducer:
        if self.flaky is None and transactional_id is not None:
            self.flaky = LosesTheAnswerOfItsSecondCommit(
                self._broker_ref, self._landed, client_id=client_id,
                transactional_id=transactional_id)
            return self.flaky
        return super().producer(client_id=client_id, transactional_id=transactional_id)


@pytest.mark.parametrize("landed", [True, False], ids=["it-committed", "it-did-not"])
async def test_an_in_doubt_transactional_commit_is_settled_and_nothing_repeats(
        landed: bool) -> None:
    broker = MemoryBroker()
    broker.create_topic("in", 1)
    broker.create_topic("out", 1)
    transport = InDoubtTransport(broker, landed)
    app = App("upper", transport=transport, commit_interval_ms=20,
              processing_guarantee="exactly_once")
    app.topic("in", key=str, value=str)
    app.topic("out", key=str, value=str)
    app.topology.add_source("src", "in").add_processor("upper", Upper, "src").add_sink(
        "sink", "out", "upper")
    values = [f"v{i}" for i in range(300)]
    async with app:
        for start in range(0, 300, 50):  # several transactions, the second one in doubt
            await produce(transport, "in", [(b"k", v.encode())
                                            for v in values[start:start + 50]])
            await app.wait_until_caught_up(timeout=30)
        assert app.inspect().worker is not None and app.inspect().worker.failure is None
    assert transport.flaky is not None and transport.flaky.failed
    out = [r.value.decode() for r in broker.records("out", 0) if r.value is not None]
    assert out == [v.upper() for v in values]
    assert broker.committed("upper", IN) == 300


class Fences:
    def __init__(self) -> None:
        self.fenced: list[str] = []

    async def fence(self, task_id: str) -> None:
        self.fenced.append(task_id)


class Group:
    def __init__(self, committed: dict[TopicPartition, int], fences: Fences) -> None:
        self._committed = committed
        self._fences = fences

    async def committed(self, tp: TopicPartition) -> int | None:
        assert self._fences.fenced, "read before the transaction was settled"
        return self._committed.get(tp)


async def test_settling_fences_each_task_once_then_resumes_at_the_groups_offsets() -> None:
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    in_doubt = {a0: "0_0", a1: "0_0", b0: "1_0"}
    resume_at: dict[TopicPartition, int | None] = {a0: 5, a1: 7, b0: 3}
    fences = Fences()
    await settle_in_doubt(in_doubt, resume_at, fences, Group({a0: 9, a1: 7}, fences))
    assert sorted(fences.fenced) == ["0_0", "1_0"]
    assert resume_at == {a0: 9, a1: 7, b0: 3}  # b0: the group has none, so as it was
    assert in_doubt == {}


def test_an_in_doubt_commit_is_broker_trouble() -> None:
    assert issubclass(InDoubtCommitError, TransportError)
