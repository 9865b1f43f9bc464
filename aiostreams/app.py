"""The App: a named stream application — its topics, topology and settings — and the worker
that runs it on one event loop.

::

    app = App("enricher", broker="memory://")
    orders = app.topic("orders", key=str, value=Order, partitions=4)
    app.topology.add_source("src", orders) ...
    await app.start(); ...; await app.stop()      # or: app.run()  /  async with app: ...

``run``/``run_async`` (until SIGINT/SIGTERM): :class:`~aiostreams.lifecycle.signals.SignalledRun`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from aiostreams.clients import AppConsumer, AppProducer, HeadersLike, LazySender, topic_resolver
from aiostreams.dsl.builder import Stream, StreamsBuilder, Table
from aiostreams.dsl.global_table import GlobalTable, declare_global_table
from aiostreams.engine.task import StreamTask, TaskSettings
from aiostreams.engine.worker import CommitRecord, Worker
from aiostreams.errors import ConfigError
from aiostreams.lifecycle.event_loop import run_event_loop as run_event_loop
from aiostreams.lifecycle.event_loop import tune_gc as tune_gc
from aiostreams.lifecycle.resources import Hook, Lifecycle, Resource
from aiostreams.lifecycle.signals import SignalledRun
from aiostreams.lifecycle.state import AppState
from aiostreams.ops.app_status import TaskRuns, app_status
from aiostreams.ops.commit_history import COMMIT_LOG_LIMIT as COMMIT_LOG_LIMIT
from aiostreams.ops.commit_history import CommitHistory
from aiostreams.ops.inspection import Inspection
from aiostreams.ops.status import AppStatus
from aiostreams.policies import Retry
from aiostreams.replay.recorder import Recorder
from aiostreams.runtime.clock import Clock, LoopClock
from aiostreams.runtime.sink_contract import ExternalSink
from aiostreams.services import Adaptive, CircuitBreaker, RateLimit, ServiceContract
from aiostreams.services.declared import DeclaredService
from aiostreams.settings.client_options import client_options
from aiostreams.settings.config import Settings, load_settings
from aiostreams.settings.engine import load_tracing, task_settings, worker_config
from aiostreams.state.versioned import Versioned
from aiostreams.topic import Topic
from aiostreams.topology.topology import SubTopology, Topology
from aiostreams.transport import transport_for_url
from aiostreams.transport.base import Transport
from aiostreams.windows import DroppedRecords, LateRecords

if TYPE_CHECKING:
    from aiostreams.ops.queries import ReadOnlyStore

log = logging.getLogger("aiostreams.app")


class App(SignalledRun):
    """A named stream application: its topics, topology and settings, and the worker
    that runs it (see the module docstring). ``name`` is the consumer group id and the
    prefix of its internal topics."""

    def __init__(
        self,
        name: str,
        broker: str | None = None,
        *,
        transport: Transport | None = None,
        clock: Clock | None = None,
        config_file: str | Path | None = None,
        retry: Retry | None = None,
        tracer_provider: Any = None,
        **settings: Any,
    ) -> None:
        if not name or any(c.isspace() for c in name):
            raise ConfigError(f"an app needs a name without spaces (it is the consumer group "
                              f"id); got {name!r}")
        if broker is not None:
            settings["broker"] = broker
        self.name = name
        self.settings: Settings = load_settings(settings, config_file)
        self.topology = Topology()
        self._builder = StreamsBuilder(self.topology, name)
        self.state = AppState.CREATED
        self.clock: Clock = clock or LoopClock()
        self._transport = transport
        self._retry = retry
        self._worker: Worker | None = None
        self._task_runs = TaskRuns()
        self.commit_log: list[CommitRecord] = []  # the latest COMMIT_LOG_LIMIT commits
        self._commits = CommitHistory(lambda: self.commit_log)
        self._lifecycle = Lifecycle()
        self._sender = LazySender(self.producer)
        self._services: dict[str, DeclaredService] = {}
        self._recorder: Recorder | None = None
        self._tracing = load_tracing(self.settings.tracing, tracer_provider)

    # -- declaring ------------------------------------------------------------------------

    def topic(
        self,
        name: str,
        key: Any = None,
        value: Any = None,
        *,
        partitions: int | None = None,
        config: Mapping[str, str] | None = None,
    ) -> Topic:
        """Declare a topic and its serdes (``key=str``, ``value=Order``, ...)."""
        return self.topology.add_topic(
            Topic.of(name, key, value, partitions=partitions, config=config)
        )

    def service(self, name: str, *, concurrency: int | Adaptive = 64,
                rate: RateLimit | None = None, breaker: CircuitBreaker | None = None,
                timeout: float | None = None, retry_budget: float | None = None,
                contract: ServiceContract | None = None,
                max_hold: float | None = None) -> DeclaredService:
        """Declare the external service ``name`` that async steps call through
        (``map_values_async(fn, service=...)``): its concurrency (a fixed int, or
        :class:`~aiostreams.services.Adaptive`), rate limit, circuit breaker, call timeout
        (seconds from dispatch), retry budget, and its ``contract``
        (:class:`~aiostreams.services.ServiceContract`: which answers mean slow down -
        held, never an attempt -, transient or permanent; the default reads 429/503 and
        ``Retry-After``). ``max_hold``: seconds a record may be held by slow-downs or an
        open breaker before the step's ``on_error`` applies (None: for ever). One
        declaration per name; every task and step of the app shares its limits. See
        ``docs/guides/services.md``."""
        if name in self._services:
            raise ConfigError(f"service {name!r} is declared twice in app {self.name!r}: "
                              "declare it once and pass the same object to every step")
        declared = DeclaredService(name, concurrency=concurrency, rate=rate, breaker=breaker,
                                   timeout=timeout, retry_budget=retry_budget,
                                   contract=contract, max_hold=max_hold,
                                   clock=None if isinstance(self.clock, LoopClock)
                                   else self.clock)
        self._services[name] = declared
        return declared

    @property
    def services(self) -> Mapping[str, DeclaredService]:
        """The services declared with :meth:`service`, by name (read-only)."""
        return MappingProxyType(self._services)

    def on_commit(self, listener: Callable[[CommitRecord], None]) -> None:
        """Call ``listener`` after every commit with what it committed (metrics, tests).
        It runs on the event loop, inside the commit: keep it quick. A plain function: an
        ``async def`` listener is refused (it would be called, never awaited); to do async
        work, start it from the listener (``asyncio.get_running_loop().create_task``)."""
        self._commits.listen(listener)

    @property
    def node_retries(self) -> dict[str, Retry]:
        """Retry policies set per node (a copy); nodes not listed use the app's default."""
        return self.topology.node_retries

    def stream(self, *topics: Topic | str, name: str | None = None) -> Stream[Any, Any]:
        """A :class:`~aiostreams.dsl.builder.Stream` reading ``topics``."""
        return self._builder.stream(*topics, name=name)

    def table(self, topic: Topic | str, *, name: str | None = None,
              materialized: str | None = None, persistent: bool = False,
              versioned: Versioned | None = None) -> Table[Any, Any]:
        """A :class:`~aiostreams.dsl.builder.Table` of ``topic``: its latest value per
        key, in a changelog-backed store (``materialized`` names it). With
        ``versioned=ais.Versioned(history_retention=...)`` the store keeps each key's
        history, and stream-table joins read the value valid at each record's timestamp."""
        return self._builder.table(topic, name=name, materialized=materialized,
                                   persistent=persistent, versioned=versioned)

    def global_table(self, topic: Topic | str, *,
                     persistent: bool | None = None) -> GlobalTable:
        """``topic`` replicated in full on every worker, bootstrapped before processing
        starts; join streams with it by ``stream.join_global(table, key_selector, joiner)``.
        ``persistent`` (default: when the app has a ``state_dir``): kept in SQLite under
        ``state_dir`` with a checkpoint, so a restart reads only the records after it.
        See :mod:`aiostreams.dsl.global_table`."""
        declared = topic if isinstance(topic, Topic) else (
            self.topology.topic(topic) or self.topic(topic))
        return declare_global_table(
            self.topology, declared, lambda: self.transport, self.resource,
            self.settings.poll_timeout,
            read_committed=self.settings.processing_guarantee == "exactly_once",
            state_dir=self.settings.state_dir, persistent=persistent,
            save_interval=self.settings.commit_interval_ms / 1000)

    def describe(self) -> str:
        return self.topology.describe()

    @property
    def dropped_records(self) -> DroppedRecords:
        """Records the app's processors dropped without output or error, by task, node and
        reason (``.by_task_node_reason``, ``.total``): late records, null keys, expired
        versions; exported as ``aiostreams_task_dropped_records_total``."""
        return self._builder.dropped

    @property
    def late_records(self) -> LateRecords:
        """Records the app's windows dropped as late (``.total``, ``.by_node``,
        ``.on_late(hook)``)."""
        return self._builder.late

    # -- lifecycle (ordering: aiostreams.lifecycle.resources) ----------------------------

    def on_startup(self, hook: Hook) -> Hook:
        """Decorate an ``async def hook()`` to run in ``start()``, before the consumer
        joins the group (in declaration order, with the resources)."""
        return self._lifecycle.add_startup(hook)

    def on_shutdown(self, hook: Hook) -> Hook:
        """Decorate an ``async def hook()`` to run in ``stop()``, after the drain and the
        last commit, before the resources close."""
        return self._lifecycle.add_shutdown(hook)

    def resource(self, name: str, factory: Callable[[], Any]) -> Resource[Any]:
        """Declare a resource made by ``factory()`` at start and closed at stop (an async
        context manager such as ``aiohttp.ClientSession``, or an awaitable); async steps
        read it as ``handle.value`` (or ``app.resource_value(name)``)."""
        return self._lifecycle.add_resource(name, factory)

    def resource_value(self, name: str) -> Any:
        """The value of the resource declared as ``name`` (the app must be running)."""
        return self._lifecycle.resource(name).value

    @contextlib.asynccontextmanager
    async def lifecycle(self) -> AsyncIterator[None]:
        """Startup hooks and resources without the app's worker, for a test driver
        (``async with app.lifecycle(), TopologyTestDriver(app) as driver``); shutdown
        hooks and closing on exit. Not while the app runs."""
        if self.state is AppState.STARTING or self.state is AppState.RUNNING:
            raise RuntimeError(f"app {self.name!r} is {self.state.value}: its lifecycle "
                               "already runs")
        await self._lifecycle.start()
        try:
            yield
        finally:
            await self._lifecycle.stop()

    # -- in and out ----------------------------------------------------------------------

    def producer(self) -> AppProducer:
        """A typed producer on the app's broker (``async with app.producer() as p``);
        see :mod:`aiostreams.clients`."""
        return AppProducer(self.transport, topic_resolver(self.topology.topic),
                           default_partitions=self.settings.default_partitions,
                           client_id=f"{self.settings.client_id or self.name}-producer")

    def consumer(self, topic: Topic | str, *, from_beginning: bool = True) -> AppConsumer:
        """A typed reader of ``topic`` (``async with app.consumer(t) as records``)."""
        return AppConsumer(self.transport, topic_resolver(self.topology.topic)(topic),
                           from_beginning=from_beginning,
                           client_id=f"{self.settings.client_id or self.name}-consumer")

    async def send(self, topic: Topic | str, key: Any, value: Any, *,
                   headers: HeadersLike = None, timestamp: float | None = None,
                   partition: int | None = None) -> None:
        """Produce one record typed by ``topic``'s serdes; returns once it is durable.
        Works before, during and after a run: the producer opens on first use and closes
        with ``stop()`` (which may be called again after a run to close it).
        Cancellation: the record may or may not have been sent."""
        await self._sender.send(topic, key, value, headers=headers, timestamp=timestamp,
                                partition=partition)

    # -- running --------------------------------------------------------------------------

    @property
    def external_sinks(self) -> list[ExternalSink]:
        """The sinks outside Kafka the worker feeds at retire: the topology's, and the
        recorder of service answers when ``record_services_dir`` is set (its taps are put
        on every declared service the first time this is read)."""
        sinks: list[ExternalSink] = list(self.topology.external_sinks)
        directory = self.settings.record_services_dir
        if directory is None:
            return sinks
        if self._recorder is None:
            self._recorder = Recorder(directory, self.settings.record_services_max_bytes)
        for declared in self._services.values():
            declared.tap = self._recorder
        return [*sinks, self._recorder]

    @property
    def transport(self) -> Transport:
        if self._transport is None:
            self._transport = transport_for_url(self.settings.broker,
                                                **self._transport_options())
        return self._transport

    def _transport_options(self) -> dict[str, Any]:
        """Kafka client options from the settings (see
        :mod:`aiostreams.settings.client_options`)."""
        return client_options(self.settings)

    def _task_settings(self) -> TaskSettings:
        return task_settings(self.settings, self._retry, self._tracing, self.topology)

    def build(self) -> list[SubTopology]:
        return self.topology.build()

    def _enter(self, state: AppState) -> None:
        self.state = self.state.advance(state, who=f"app {self.name!r}")

    async def start(self) -> None:
        """Validate the topology, open the resources and run the startup hooks, create
        missing topics, join the group and start. Raises what went wrong (bad topology, a
        startup hook, broker unreachable, missing topics) and leaves the app STOPPED."""
        if self.state is not AppState.CREATED:
            raise RuntimeError(f"app {self.name!r} starts once; it is {self.state.value}")
        self._enter(AppState.STARTING)
        s = self.settings
        try:
            subs = self.build()  # a bad topology fails before any hook runs
            await self._lifecycle.start()
        except BaseException:
            self._enter(AppState.STOPPED)
            raise
        try:
            self._worker = Worker(
                subs, self.topology.topics, self.transport,
                worker_config(self.name, s, self.topology, self._task_settings()),
                self.clock,
                on_commit=self._commits.committed,
                external_sinks=self.external_sinks,
            )
            await self._worker.start()
            if s.gc_tuning:
                tune_gc()
        except BaseException:
            self._enter(AppState.STOPPED)
            try:
                if self._worker is not None:
                    await self._worker.stop()
            finally:
                await self._lifecycle.stop()
            raise
        self._enter(AppState.RUNNING)

    async def stop(self) -> None:
        """Graceful stop: drain, retire, the last commit, leave the group; then the
        shutdown hooks, the resources and ``app.send``'s producer close. Idempotent."""
        if self.state in (AppState.STOPPED, AppState.FAILED, AppState.CREATED):
            await self._sender.close()
            return
        self._enter(AppState.STOPPING)
        assert self._worker is not None
        try:
            await self._worker.stop()
        finally:
            self._enter(AppState.FAILED if self._worker.failure else AppState.STOPPED)
            try:
                await self._lifecycle.stop()
            finally:
                await self._sender.close()

    async def wait(self) -> None:
        """Run until a stop is requested (``request_stop``, a signal) or a task fails; then
        stop gracefully. Raises the failure, if any."""
        assert self._worker is not None
        await self._worker.stop_requested()
        await self.stop()
        self._worker.raise_failure()

    def request_stop(self) -> None:
        if self._worker is not None:
            self._worker.request_stop()

    async def wait_until_caught_up(self, timeout: float | None = None) -> None:
        """Return once every record in the app's input topics *when this is called* (and
        whatever they cause in its internal repartition topics) has been processed and its
        offset committed by the app's group. For examples, tests and batch-like runs: while
        it waits, every commit flushes the external sinks (not just the backlogged ones).

        It also waits for the worker's first assignment and until no task is restoring its
        stores, so the stores (``app.store``) hold everything their changelogs held when it
        returns, even for a task with no new input. Raises ``TimeoutError`` after
        ``timeout`` seconds, the worker's failure if it fails, and ``RuntimeError`` if a
        stop is asked for (a signal, ``request_stop``) before it caught up: it never waits
        for commits a stopping worker will not make. Cancellation: stops waiting, changes
        nothing."""
        worker = self._worker
        if worker is None or self.state is not AppState.RUNNING:
            raise RuntimeError(f"app {self.name!r} is not running ({self.state.value})")
        from aiostreams.engine.caught_up import CaughtUpProbe, until_caught_up

        probe = CaughtUpProbe(self.transport, self.name, self.build(),
                              read_committed=self.settings.processing_guarantee
                              == "exactly_once")
        async with asyncio.timeout(timeout):
            if await until_caught_up(worker, probe):
                return
        worker.raise_failure()
        raise RuntimeError(f"app {self.name!r} was asked to stop before it caught up with "
                           "its input (a signal or request_stop while waiting)")

    def store(self, name: str, *, stale_ok: bool = False) -> ReadOnlyStore:
        """A read-only view of table or window store ``name`` across the tasks of this
        worker, for interactive queries (:mod:`aiostreams.ops.queries`): reads see retired
        state only; with ``stale_ok``, also this worker's standby copies, which may lag.
        Raises ``UnknownStoreError`` for a name the topology lacks."""
        from aiostreams.ops.queries import store_view
        return store_view(self, name, stale_ok=stale_ok)

    @property
    def _tasks(self) -> dict[str, StreamTask]:
        return dict(self._worker.tasks) if self._worker is not None else {}

    def inspect(self) -> Inspection:
        """A look inside at this instant, for operations tools (metrics, health, queries,
        the CLI, the test driver): the live worker and tasks, engine objects that are
        read, never changed (see :mod:`aiostreams.ops.inspection`). Programs read
        :meth:`status` instead."""
        return Inspection(self._worker, self._tasks, self._task_settings)

    def status(self) -> AppStatus:
        """A read-only snapshot of the app, its worker and its tasks (see
        :mod:`aiostreams.ops.status`); cheap enough for every scrape or status-line tick."""
        return app_status(self.name, self.state, self._worker, self._task_runs)
