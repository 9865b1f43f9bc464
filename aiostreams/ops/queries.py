"""Interactive queries: read a running app's state stores from outside the topology.

``app.store("totals")`` returns a read-only view of store ``totals`` across the tasks this
worker runs (Kafka Streams' ``KafkaStreams.store``, Faust's table views)::

    totals = app.store("totals")
    await totals.get("alice")                    # one key
    async for key, value in totals.range("a", "m"):  # keys in serialized-key order
        ...
    await app.store("per-minute").fetch("alice", 0.0, 3600.0)  # a window store

What a read sees, and why:

- Only *retired* state. A record's writes are buffered in its reorder-buffer slot until it
  retires (see the engine); a view reads the tasks' applied stores, never the overlays, so a
  query never sees a write that a failure could still take back, nor one that an earlier
  record has not yet been ordered before. (Retired writes may not be committed yet: like
  Kafka Streams' default, a query can see state that a crash would replay.)
- Retired updates a record cache holds (``cache_max_bytes``) included: every read answers
  what the store will hold once the cache is flushed (``get`` reads the cache first,
  ``range``/``all``/``fetch`` merge it in), as Kafka Streams' caching stores do.
- Values, not the table's bookkeeping: a table store's ``ValueAndTimestamp`` is unwrapped.
- Only the tasks of this worker. A key maps to one partition (the store's key serde, then
  Kafka's murmur2 partitioner over the source topics' partition count, as the records that
  built the state were placed); when no local task runs that partition,
  :class:`KeyNotLocalError` names the partition (and the owner when the caller knows it:
  the HTTP layer asks its peers), so the caller can go there.
- Only running tasks: a task that is restoring its stores from the changelog would answer
  with partial state, so :class:`StoreNotReadyError` is raised instead.
- Stale reads only when asked for: ``app.store(name, stale_ok=True)`` also reads the
  *standby* tasks' copies (``num_standby_replicas``), which lag their active task by their
  changelog lag (``app.status().standbys``); a standby still at its first catch-up is not
  read. Without ``stale_ok`` a standby is never read.

The engine's tasks are reached through :func:`local_stores` only, the one place that knows
where a worker keeps its tasks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from aiostreams.errors import AiostreamsError
from aiostreams.processors.store_values import ValueAndTimestamp
from aiostreams.serde import Serde
from aiostreams.state.base import StateStore, StoreKind, WindowStore
from aiostreams.state.window_keys import bound_ms
from aiostreams.transport.partitioner import default_partition

if TYPE_CHECKING:
    from aiostreams.engine.task import StreamTask
    from aiostreams.lifecycle.state import AppState
    from aiostreams.topology.topology import SubTopology
    from aiostreams.transport.base import Transport


class LiveTasks(Protocol):
    """What queries read of an :class:`~aiostreams.ops.inspection.Inspection`."""

    @property
    def tasks(self) -> Mapping[str, StreamTask]: ...

    @property
    def standby_tasks(self) -> Mapping[str, tuple[StreamTask, bool]]: ...


class QueryHost(Protocol):
    """What queries need of the app (:class:`aiostreams.App` is one): a protocol, so this
    module does not import the app module, which imports it for ``App.store``."""

    name: str

    @property
    def transport(self) -> Transport: ...

    @property
    def state(self) -> AppState: ...

    def inspect(self) -> LiveTasks: ...

    def build(self) -> list[SubTopology]: ...


class QueryError(AiostreamsError):
    """An interactive query cannot be answered here; the message says why and what to do."""


class UnknownStoreError(QueryError, KeyError):
    """The topology has no store of that name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class StoreNotReadyError(QueryError):
    """The app is not running, or the task owning the key is not running yet (restoring)."""


class KeyNotLocalError(QueryError):
    """The key's partition is run by no task of this worker.

    ``owner`` is the base URL of the worker that runs it, when the caller knew it."""

    def __init__(self, store: str, key: Any, partition: int, local: Sequence[int],
                 owner: str | None = None) -> None:
        self.store, self.key, self.partition = store, key, partition
        self.local = tuple(local)
        self.owner = owner
        where = (f"owned by the worker at {owner}" if owner is not None else
                 "owned by another worker of the group, or by none while it rebalances")
        super().__init__(
            f"store {store!r}: key {key!r} is in partition {partition}, which no task of "
            f"this worker runs (it runs partitions {list(self.local)}); it is {where}. "
            f"Query that worker: GET /stores/{store}/<key> on its metrics server")


@dataclass(frozen=True)
class LocalStore:
    """One task's applied store: ``partition`` is the task's input partition."""

    task_id: str
    partition: int
    running: bool
    store: StateStore
    standby: bool = False
    """A standby's copy (read with ``stale_ok`` only): ``running`` means caught up once."""
    cache: Any = None
    """The store's record cache in the task (``cache_max_bytes``), read before the store."""


def local_stores(app: QueryHost, name: str, *, stale_ok: bool = False) -> list[LocalStore]:
    """The applied stores named ``name`` of the tasks this worker runs now, by partition;
    with ``stale_ok``, the copies of its standby tasks too.

    The only function that reaches into the engine for queries: ``App.status()`` gives
    read-only views of the tasks but not their stores, so this reads ``App._tasks``."""
    inspection = app.inspect()
    tasks = inspection.tasks  # the live tasks: App.status() gives no access to their stores
    found: list[LocalStore] = []
    for task in tasks.values():
        store = task.stores.get(name)
        if store is not None:
            found.append(LocalStore(task.task_id, task.partitions[0].partition,
                                    task.state.value == "running", store,
                                    cache=task.record_cache_store(name)))
    if stale_ok:
        for task_id, (task, ready) in inspection.standby_tasks.items():
            store = task.stores.get(name)
            if store is not None and task_id not in tasks:
                found.append(LocalStore(task_id, task.partitions[0].partition, ready, store,
                                        standby=True))
    return sorted(found, key=lambda s: s.partition)


def _source_topics(app: QueryHost, name: str) -> tuple[str, ...]:
    for sub in app.build():
        if any(spec.name == name for spec in sub.stores):
            return sub.source_topics
    known = sorted({spec.name for sub in app.build() for spec in sub.stores})
    raise UnknownStoreError(f"app {app.name!r} has no store {name!r}; its stores: {known}")


def unwrap(value: Any) -> Any:
    """A stored value as a query returns it: a table's ``ValueAndTimestamp`` unwrapped."""
    return value.value if isinstance(value, ValueAndTimestamp) else value


class ReadOnlyStore:
    """A read-only view of key-value store ``name`` across this worker's tasks (see the
    module docstring). Cheap to create; each read looks up the tasks anew, so a view
    follows rebalances.

    Cancellation: every read only reads; cancelling one leaves nothing behind."""

    def __init__(self, app: QueryHost, name: str, *, stale_ok: bool = False) -> None:
        self.app = app
        self.name = name
        self.stale_ok = stale_ok
        self.source_topics = _source_topics(app, name)
        self._partitions: int | None = None

    async def partition_count(self) -> int:
        """The partition count of the store's source topics (asked of the broker once)."""
        if self._partitions is None:
            admin = self.app.transport.admin()
            await admin.start()
            try:
                counts = {t: await admin.partitions_for(t) for t in self.source_topics}
            finally:
                await admin.stop()
            known = [c for c in counts.values() if c is not None]
            if not known:
                raise StoreNotReadyError(
                    f"store {self.name!r}: its source topics {list(self.source_topics)} do "
                    f"not exist on {self.app.transport.url} yet; start the app first")
            self._partitions = max(known)
        return self._partitions

    def key_serde(self) -> Serde[Any]:
        """The store's key serde (known from a store of a local task)."""
        store = self._any_store()
        serde = getattr(store.store, "key_serde", None) if store is not None else None
        if serde is None:
            raise StoreNotReadyError(f"store {self.name!r}: no task of this worker has it "
                                     "open now, so its key serde is unknown here")
        return cast("Serde[Any]", serde)

    def key_bytes(self, key: Any) -> bytes:
        """``key`` serialized by the store's key serde (what the partitioner hashes)."""
        data = self.key_serde().serialize(self.name, key)
        if data is None:
            raise ValueError(f"store {self.name!r}: a key cannot be None")
        assert isinstance(data, bytes)
        return bytes(data)

    def _any_store(self) -> LocalStore | None:
        stores = local_stores(self.app, self.name, stale_ok=self.stale_ok)
        return stores[0] if stores else None

    async def partition_of(self, key: Any, key_bytes: bytes | None = None) -> int:
        """The partition holding ``key``: Kafka's default partitioner over its bytes."""
        data = key_bytes if key_bytes is not None else self.key_bytes(key)
        return default_partition(data, await self.partition_count(), counter=iter(()))

    async def owner_store(self, key: Any) -> StateStore:
        """The local applied store holding ``key``; raises :class:`KeyNotLocalError` or
        :class:`StoreNotReadyError` when this worker cannot answer for it."""
        return (await self.owner(key)).store

    async def owner(self, key: Any) -> LocalStore:
        """:meth:`owner_store`'s store with its task's record cache."""
        self._require_running()
        partition = await self.partition_of(key)
        stores = local_stores(self.app, self.name, stale_ok=self.stale_ok)
        for local in stores:
            if local.partition == partition:
                if not local.running:
                    what = "standby task" if local.standby else "task"
                    raise StoreNotReadyError(
                        f"store {self.name!r}: {what} {local.task_id} (partition "
                        f"{partition}) is not running yet (restoring its stores); retry "
                        "shortly")
                return local
        raise KeyNotLocalError(self.name, key, partition, [s.partition for s in stores])

    def _require_running(self) -> None:
        state = self.app.state.value
        if state != "running":
            raise StoreNotReadyError(
                f"store {self.name!r}: app {self.app.name!r} is {state}; interactive queries "
                "read a running app (inside `async with app:` or `aiostreams run`)")

    async def get(self, key: Any) -> Any | None:
        """The retired value of ``key``, or None when it has none. For a window store the
        key is ``(key, window_start)`` (see :meth:`fetch` for a key's windows)."""
        if self._kind() is StoreKind.WINDOW:
            if not (isinstance(key, tuple) and len(key) == 2):
                raise ValueError(f"window store {self.name!r}: get() takes (key, "
                                 "window_start); fetch(key, time_from, time_to) gives a "
                                 "key's windows")
            return await self._read(await self.owner(key[0]), key)
        return await self._read(await self.owner(key), key)

    @staticmethod
    async def _read(local: LocalStore, key: Any) -> Any | None:
        """``key``'s value: its newest retired update in the task's record cache, else the
        store's (Kafka Streams' caching store reads)."""
        if local.cache is not None:
            entry = local.cache.get_now(key)
            if entry is not None:
                return unwrap(entry.stored)
        return unwrap(await local.store.get(key))

    def kind(self) -> StoreKind | None:
        """The store's kind (None while no local task has it open)."""
        return self._kind()

    def _kind(self) -> StoreKind | None:
        local = self._any_store()
        return local.store.kind if local is not None else None

    async def range(self, start: Any | None = None,
                    end: Any | None = None) -> AsyncIterator[tuple[Any, Any]]:
        """``(key, value)`` with ``start <= key <= end`` (None: unbounded), in serialized-key
        order, from every local running task (merged in memory: for a large store, bound
        the range)."""
        self._require_running()
        stores = [s for s in local_stores(self.app, self.name, stale_ok=self.stale_ok)
                  if s.running]
        entries: list[tuple[bytes, Any, Any]] = []
        for local in stores:
            entries.extend(await _merged_range(local, start, end))
        entries.sort(key=lambda e: e[0])
        for _, key, value in entries:
            yield key, value

    def all(self) -> AsyncIterator[tuple[Any, Any]]:
        """Every ``(key, value)`` of the local running tasks, in serialized-key order."""
        return self.range(None, None)

    async def fetch(self, key: Any, time_from: float = float("-inf"),
                    time_to: float = float("inf")) -> list[tuple[float, Any]]:
        """For a window store: ``[(window_start, value)]`` of ``key`` with
        ``time_from <= start <= time_to`` (float seconds), in start order."""
        local = await self.owner(key)
        store = local.store
        if store.kind is not StoreKind.WINDOW:
            raise QueryError(f"store {self.name!r} is a {store.kind.value} store; fetch() "
                             "reads window stores, use get(key) or range()")
        assert isinstance(store, WindowStore)
        found = {start: unwrap(value)
                 async for start, value in store.fetch(key, time_from, time_to)}
        if local.cache is not None:  # the held updates are newer than the store's
            lo, hi = bound_ms(time_from), bound_ms(time_to)
            wanted = self.key_bytes(key)
            for (held_key, start), entry in local.cache.dirty():
                if lo <= bound_ms(start) <= hi and self.key_bytes(held_key) == wanted:
                    if entry.stored is None:
                        found.pop(start, None)
                    else:
                        found[start] = unwrap(entry.stored)
        return sorted(found.items(), key=lambda e: e[0])


async def _merged_range(local: LocalStore, start: Any | None, end: Any | None
                       ) -> list[tuple[bytes, Any, Any]]:
    """``(sort key, key, value)`` of ``local``'s store in ``[start, end]``, with the updates
    its task's record cache holds in place of the store's (a held delete removes the key):
    what the store will say once the cache is flushed, as Kafka Streams' caching store's
    range merges its cache and store."""
    store = local.store
    held: dict[bytes, tuple[Any, Any]] = {}
    if local.cache is not None:
        lo = None if start is None else store.sort_key(start)
        hi = None if end is None else store.sort_key(end)
        for key, entry in local.cache.dirty():
            sort_key = store.sort_key(key)
            if (lo is None or lo <= sort_key) and (hi is None or sort_key <= hi):
                held[sort_key] = (key, entry.stored)
    entries = []
    async for key, value in store.range(start, end):
        sort_key = store.sort_key(key)
        if sort_key not in held:
            entries.append((sort_key, key, unwrap(value)))
    entries.extend((sort_key, key, unwrap(stored))
                   for sort_key, (key, stored) in held.items() if stored is not None)
    return entries


def store_view(app: QueryHost, name: str, *, stale_ok: bool = False) -> ReadOnlyStore:
    """The view ``app.store(name)`` returns (raises :class:`UnknownStoreError`)."""
    return ReadOnlyStore(app, name, stale_ok=stale_ok)


__all__ = ["KeyNotLocalError", "QueryError", "QueryHost", "ReadOnlyStore", "StoreNotReadyError",
           "UnknownStoreError"]
