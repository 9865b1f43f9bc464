"""A test driver for topologies (Kafka Streams' ``TopologyTestDriver``), without sleeps.

::

    async with TopologyTestDriver(app) as driver:
        driver.pipe_input("orders", "c1", Order(id="o1", amount=5.0), timestamp=10.0)
        await driver.process_all()
        assert [r.value for r in driver.read_output("totals")] == [5.0]
        assert driver.store("totals-store") == {"c1": 5.0}
        await driver.advance_wall_clock(60.0)      # wall-clock punctuations, retries

The driver runs the app's real tasks (:class:`~aiostreams.engine.task.StreamTask`: reorder
buffer, ordering, retries, dead letters, punctuations, stores) through the worker's own
step-wise core (:mod:`~aiostreams.engine.worker_core`), on a private
:class:`~aiostreams.transport.memory.MemoryBroker` and a :class:`ManualClock`. Topics get the
partition counts the app would create them with (declared, else ``default_partitions``;
repartition topics as wide as the widest input), keys are placed by Kafka's partitioner, and
there is one task per sub-topology and partition, as a worker owning everything would run.

What it does not do: no consumer group, no fetch loop, no background sender, no
transactions. The driver is the fetcher and the sender (its broker side:
:mod:`~aiostreams.testing.driver_broker`): :meth:`process_all` sends the outputs retired so far,
hands every record appended to a source topic (piped, or produced by a task, as for
repartition topics) to its task as the worker hands it a fetched batch, lets the tasks run,
and repeats until nothing is left to do. A commit is the worker's commit (as at-least-once):
outputs sent and flushed, external sinks flushed, changelog marks taken and stores flushed,
offsets committed for the app's group, checkpoints written. So processing is deterministic
and awaited, and time moves only when the test moves it:

* **stream time** follows the timestamps of the records piped (default: the clock's wall
  time), so stream-time punctuations fire as those records are processed;
* **wall-clock time** moves with :meth:`advance_wall_clock`, which fires every timer that
  falls due (wall-clock punctuations, retry backoffs, task idling, the commit interval) in
  due order, processing what each one causes before the next.

Invariants, asserted: :meth:`process_all` returns only when every record appended to a
source topic has been handed to its task and no task has work it can do now (what is left
in flight waits for the clock: a retry backoff, an idle deadline); outputs are appended to
the broker in retire order, each before any record is handed to a task after it retired;
offsets are committed only by :meth:`commit` (or a ``ctx.commit()`` request, or the commit
interval), never past an unretired record (the committer checks each task's commit point).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from aiostreams.app import App
from aiostreams.dsl.global_table import global_tables_of
from aiostreams.engine.worker_core import CommitTimer, StreamTask, WorkerCore, changelog_topic
from aiostreams.errors import TaskFailedError
from aiostreams.settings.config import Settings
from aiostreams.testing.driver_broker import DriverBroker
from aiostreams.testing.driver_clock import DriverClock
from aiostreams.testing.driver_state import DriverState, require_running
from aiostreams.testing.global_feeder import GlobalFeeder
from aiostreams.testing.store_snapshot import StoreSnapshots
from aiostreams.topic import Topic
from aiostreams.topology.topology import Topology
from aiostreams.transport.base import Consumer
from aiostreams.transport.memory import MemoryBroker, MemoryTransport
from aiostreams.types import Headers, OutgoingRecord, RawRecord, Record, TopicPartition

DEFAULT_START = 1_700_000_000.0
"""Where the driver's clock starts (seconds since the epoch), unless told otherwise."""
PROCESS_TIMEOUT = 10.0
"""Real seconds :meth:`TopologyTestDriver.process_all` waits for processors that await
something outside the driver (a Sequencer gate, real I/O) before it gives up."""
_SPIN_ROUNDS = 1000


class TopologyTestDriver:
    """Runs an app's topology on a private broker with a manual clock; see the module
    docstring. Use it as ``async with TopologyTestDriver(app) as driver`` (or ``await
    driver.start()`` … ``await driver.close()``).

    ``source`` is an :class:`App` (its settings, topics, retries) or a :class:`Topology`
    with ``settings`` (a mapping of setting names, or :class:`Settings`) and ``app_id``
    (the group id, used in changelog topic names). The app itself is not started, and its
    own clock and broker are not used.
    """

    def __init__(
        self,
        source: App | Topology,
        settings: Mapping[str, Any] | Settings | None = None,
        *,
        app_id: str = "test-driver",
        start_time: float = DEFAULT_START,
        state_dir: str | Path | None = None,
    ) -> None:
        if isinstance(source, App):
            if settings is not None:
                raise ValueError(
                    "settings go to App(...) when the driver is built from an App; pass "
                    "settings only with a Topology")
            self.app = source
        elif isinstance(source, Topology):
            if isinstance(settings, Settings):
                settings = {k: getattr(settings, k) for k in settings.model_fields_set}
            self.app = App(app_id, transport=MemoryTransport(MemoryBroker()),
                           **dict(settings or {}))
            self.app.topology = source
        else:
            raise TypeError(f"TopologyTestDriver takes an App or a Topology, not "
                            f"{type(source).__name__}")
        self.clock = DriverClock(start_time)
        self.state = DriverState.CREATED
        self.failure: TaskFailedError | None = None
        self.tasks: dict[str, StreamTask] = {}
        self._state_dir = Path(state_dir) if state_dir is not None else None
        self._temp_dir: Path | None = None
        self._task_of: dict[TopicPartition, StreamTask] = {}
        self._fed: dict[TopicPartition, int] = {}
        self._commit_timer = CommitTimer(
            self.clock, self.app.settings.commit_interval_ms / 1000.0)
        self._out = DriverBroker(self.app)
        self.broker = self._out.broker
        self._core: WorkerCore | None = None  # built by start(), with the state directory
        self._consumer: Consumer | None = None  # the group's offsets: commits go through it
        self._snapshots = StoreSnapshots()
        self._globals: GlobalFeeder | None = None

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Validate the topology, create its topics on the private broker, open the stores
        and ``init`` the processors of every task."""
        if self.state is not DriverState.CREATED:
            raise RuntimeError(f"a driver starts once; this one is {self.state.value}")
        app = self.app
        subs = app.build()
        task_settings = app.inspect().task_settings()
        widths = self._out.create_topics(subs)
        state_dir = self._state_dir or app.settings.state_dir
        if state_dir is None and any(sub.stores for sub in subs):
            self._temp_dir = Path(tempfile.mkdtemp(prefix="aiostreams-driver-"))
            state_dir = self._temp_dir
        self._globals = GlobalFeeder(global_tables_of(app.topology), self.broker)
        for topic, serdes in self._globals.serdes().items():
            self._out.source_serdes.setdefault(topic, serdes)
        for sink in self._out.sinks.values():
            await sink.start()
        self.state = DriverState.RUNNING
        transport = self._out.transport
        self._core = core = WorkerCore(
            transport, app_id=app.name, client_id=f"{app.name}-test-driver",
            exactly_once=False, state_dir=state_dir, sinks=self._out.sinks, clock=self.clock,
            request_commit=self._commit_timer.request, on_commit=app.commit_log.append)
        await core.router.start()
        make_task = core.task_factory(task_settings, app.topology.topics,
                                      node_retry=app.node_retries, on_failed=self._on_failed)
        for sub in subs:
            for partition in range(widths[sub.id]):
                task = make_task(sub, partition,
                                 [TopicPartition(t, partition) for t in sub.source_topics])
                await task.initialize()
                self.tasks[task.task_id] = task
                for tp in task.partitions:
                    self._task_of[tp] = task
                    self._fed[tp] = 0
        self._consumer = transport.consumer(app.name)
        await self._consumer.start()
        self._consumer.assign(list(self._task_of))
        self._commit_timer.start()
        await self.process_all()

    async def close(self) -> None:
        """Close every task (processors, then stores) and external sink. Records still in
        flight are abandoned (nothing is committed). Idempotent."""
        if self.state is DriverState.CLOSED:
            return
        self.state = DriverState.CLOSED
        self._commit_timer.cancel()
        try:
            for task in self.tasks.values():
                await task.close()
            for sink in self._out.sinks.values():
                await sink.stop()
            if self._core is not None:
                await self._core.router.stop(lambda: PROCESS_TIMEOUT)
            if self._consumer is not None:
                await self._consumer.stop()
        finally:
            if self._temp_dir is not None:
                shutil.rmtree(self._temp_dir, ignore_errors=True)

    async def __aenter__(self) -> TopologyTestDriver:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    def changelog_topic(self, store: str) -> str:
        """The changelog topic of ``store`` (as the worker names it)."""
        return changelog_topic(self.app.name, store)

    # -- input --------------------------------------------------------------------------

    def pipe_input(self, topic: Topic | str, key: Any, value: Any,
                   timestamp: float | None = None, *, headers: Headers = (),
                   partition: int | None = None) -> None:
        """Append one record to the source topic ``topic``, serialized with the serdes its
        source reads it with, or, given a :class:`~aiostreams.topic.Topic` (a view such as
        ``Topic.of("orders", key=str, value=bytes)``, as for ``app.send``), with that
        view's serdes. ``timestamp`` (seconds) defaults to the clock's wall time;
        ``partition`` to Kafka's partitioner on the key bytes. Processed by the next
        :meth:`process_all`."""
        name = _topic_name(topic)
        if isinstance(topic, Topic):
            key_serde, value_serde = topic.key_serde, topic.value_serde
        else:
            key_serde, value_serde = self._out.serdes_of(name)
        self.pipe_raw_input(name, key_serde.serialize(name, key),
                            value_serde.serialize(name, value), timestamp,
                            headers=headers, partition=partition)

    def pipe_inputs(self, topic: Topic | str, records: Iterable[Sequence[Any]]) -> None:
        """Append ``(key, value)`` or ``(key, value, timestamp)`` tuples to ``topic``."""
        for item in records:
            if len(item) not in (2, 3):
                raise ValueError(
                    f"pipe_inputs takes (key, value) or (key, value, timestamp) tuples; got "
                    f"{item!r}")
            self.pipe_input(topic, *item)

    def pipe_raw_input(self, topic: Topic | str, key: bytes | None, value: bytes | None,
                       timestamp: float | None = None, *, headers: Headers = (),
                       partition: int | None = None) -> None:
        """Append a record of raw bytes (e.g. bytes its serde cannot decode)."""
        require_running(self.state, "pipe input", self.failure)
        name = _topic_name(topic)
        self._out.serdes_of(name)  # a topic no source reads is a mistake: say so now
        when = self.clock.wall_time() if timestamp is None else timestamp
        self._out.append([OutgoingRecord(name, key, value, when, headers, partition)])

    # -- processing ---------------------------------------------------------------------

    async def process_all(self, timeout: float = PROCESS_TIMEOUT) -> None:
        """Process until nothing is left to do now (see the module docstring). Raises the
        :class:`TaskFailedError` of a task that failed, and ``TimeoutError`` when a
        processor is still awaiting something outside the driver after ``timeout`` real
        seconds. Cancellation: stops waiting; the tasks keep what they have."""
        await self._process(timeout)
        await self._snapshots.take(self.tasks.values())

    async def _process(self, timeout: float = PROCESS_TIMEOUT) -> None:
        require_running(self.state, "process", self.failure, allow_failed=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        rounds = 0
        while True:
            await self._feed()
            if self.failure is not None or (self._quiescent() and not self._unfed()):
                break
            rounds += 1
            if loop.time() > deadline:
                raise TimeoutError(
                    f"after {timeout:g}s, {self._executing()} record(s) are still executing: "
                    "a processor awaits something the driver does not control (release "
                    "your Sequencer gates, or complete the I/O it waits for)")
            # Not a wait for time to pass: one loop turn lets executing processors and
            # scheduled pumps run. After many turns the work is real I/O, so stop spinning.
            await asyncio.sleep(0 if rounds < _SPIN_ROUNDS else 0.001)
        if self.failure is not None:
            self.state = DriverState.FAILED
            raise self.failure
        assert self._quiescent() and not self._unfed(), "process_all returns only when idle"
        if self._commit_timer.requested:
            await self.commit()

    async def advance_wall_clock(self, seconds: float) -> None:
        """Move wall-clock time forward by ``seconds``, firing each timer that falls due on
        the way at its due time, and processing what it causes before the next fires."""
        if seconds < 0:
            raise ValueError(f"the wall clock only moves forward; got {seconds}")
        require_running(self.state, "advance the clock", self.failure)
        target = self.clock.monotonic() + seconds
        while True:
            due = self.clock.next_due()
            if due is None or due > target:
                break
            self.clock.advance(max(0.0, due - self.clock.monotonic()))
            await self._process()
        self.clock.advance(max(0.0, target - self.clock.monotonic()))
        await self.process_all()

    async def commit(self) -> dict[TopicPartition, int]:
        """Flush the stores and external sinks and commit what every task has retired
        (offsets for the app's group on the private broker), as the worker commits: see
        :mod:`~aiostreams.engine.committer` for the steps (a persistent store's checkpoint
        is written too). Returns what was committed.

        Cancellation: do not cancel it; a cancelled commit commits nothing more."""
        require_running(self.state, "commit", self.failure)
        core, consumer = self._core, self._consumer
        assert core is not None and consumer is not None, "set by start()"
        self._commit_timer.take()
        core.request_sink_flush()  # every sink, backlogged or not, as the driver always did
        committed, lost = await core.commit(list(self.tasks.values()), consumer)
        # the driver's consumer is assigned every source partition, outside any group
        assert not lost, f"the driver's commit was refused: {lost}"
        core.announce_commit()
        return committed

    def committed(self, topic: str, partition: int = 0) -> int | None:
        """The app's committed offset of a partition (the next offset to read), or None."""
        return self.broker.committed(self.app.name, TopicPartition(topic, partition))

    # -- output and state ---------------------------------------------------------------

    def read_output(self, topic: Topic | str) -> list[Record[Any, Any]]:
        """The records tasks produced to ``topic`` since the last ``read_output`` of it, in
        the order they were produced, deserialized with the app's serdes for the topic
        (those of the sink writing it when the topic is not declared; else bytes), or with
        the serdes of ``topic`` when it is a :class:`~aiostreams.topic.Topic`. Raises
        when piped input is still unprocessed: await :meth:`process_all` first."""
        name = _topic_name(topic)
        if self.state is DriverState.RUNNING and self._unfed():
            raise RuntimeError(
                f"read_output({name!r}): {self._unfed()} piped record(s) are not processed "
                "yet; `await driver.process_all()` first")
        raws = self._out.take(name)
        if isinstance(topic, Topic):
            return [Record(topic.key_serde.deserialize(name, raw.key),
                           topic.value_serde.deserialize(name, raw.value), raw.topic,
                           raw.partition, raw.offset, raw.timestamp, raw.headers)
                    for raw in raws]
        return [self._out.decode(raw) for raw in raws]

    def read_raw_output(self, topic: Topic | str) -> list[RawRecord]:
        """Like :meth:`read_output`, as bytes with offsets and headers (dead letters)."""
        return self._out.take(_topic_name(topic))

    def store(self, name: str) -> dict[Any, Any]:
        """A snapshot of store ``name``'s applied (retired) state over every task, as of the
        last :meth:`process_all` (window stores: keys are ``(key, window_start)``), read
        through its record cache when it has one (``cache_max_bytes``): see
        :mod:`~aiostreams.testing.store_snapshot`."""
        return self._snapshots.store(name, self.tasks.values())

    # -- internals ----------------------------------------------------------------------

    async def _feed(self) -> None:
        """Send what the tasks retired, then hand every record appended to a source
        partition since the last feed to its task (which may process it at once and
        produce more), and again until nothing new arrives. As the worker does with a
        fetch (:meth:`~aiostreams.engine.worker_core.WorkerCore.deliver`): every new record
        goes in first, then each task that got some is pumped. Raises the error of an
        output that could not be produced (e.g. to an undeclared topic)."""
        core = self._core
        assert core is not None, "set by start()"
        await self._send(core)
        if self._globals is not None:
            self._globals.feed()
        while self.failure is None:
            batch: dict[TopicPartition, list[RawRecord]] = {}
            for tp, fed in self._fed.items():
                end = self._deliverable(tp)
                if fed < end:
                    self._fed[tp] = end
                    batch[tp] = self.broker.records(tp.topic, tp.partition)[fed:end]
            if not batch:
                return
            unowned = core.deliver(batch, self._task_of)
            assert not unowned, f"every source partition has its task: {unowned}"
            await self._send(core)

    async def _send(self, core: WorkerCore) -> None:
        await core.send()
        # in retire order, and each before any later record is handed to a task
        assert not any(channel.pending for channel in core.router.channels()), \
            "the driver's producer appends every output it is given at once"

    def _unfed(self) -> int:
        return sum(self._deliverable(tp) - fed for tp, fed in self._fed.items())

    def _deliverable(self, tp: TopicPartition) -> int:
        """How far into ``tp`` records may be handed to its task (a test that schedules
        deliveries itself holds some back by overriding this)."""
        return self.broker.end_offset(tp)

    def _executing(self) -> int:
        return sum(task.executing for task in self.tasks.values())

    def _quiescent(self) -> bool:
        """No task can make progress without the clock: nothing executes (what is in
        flight waits for a backoff, an idle deadline, or an earlier record that does) and
        no pump is scheduled."""
        return not any(task.pump_pending for task in self.tasks.values()) and \
            self._executing() == 0

    def _on_failed(self, task: StreamTask, error: TaskFailedError) -> None:
        if self.failure is None:
            self.failure = error


def _topic_name(topic: Topic | str) -> str:
    """The name of a topic given by name or as a :class:`Topic` (which, holding a config
    dict, cannot be a dictionary key itself)."""
    return topic.name if isinstance(topic, Topic) else topic


__all__ = ["DriverClock", "DriverState", "TopologyTestDriver"]

