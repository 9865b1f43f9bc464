"""A task's graph: the sub-topology's nodes instantiated for one task, compiled once.

Each processor, sink and external sink becomes a :class:`NodeExec` holding its processor
instance, its context, its store views and its compiled runners (sync ones from
:mod:`~aiostreams.engine.sync_chain`, async ones from :mod:`~aiostreams.engine.async_chain`
where a node's subtree reaches an ``async`` processor).

Each source becomes a :class:`SourceExec` with **one** compiled decode-and-run: it names
the source in ``slot.node``, decodes the raw record into ``slot.record`` (a
:class:`~aiostreams.errors.DeserializationError` names partition and offset) and runs the
source's children, in topology order. It is synchronous (``run``) when no child's subtree
must be awaited, else a coroutine function (``run_async``); exactly one of the two is set,
as ``chain_is_async`` says. The task's inline path, its synchronous start and its
executors all run records through it; an executor runs ``run_async`` in two halves around
its await, ``begin_async`` and ``end_async`` (see
:class:`~aiostreams.engine.async_chain.FusedSource`).

``unmarked``: the topics whose sources drop origin headers (:mod:`aiostreams.runtime.origin`).

Invariant: every node's ``run_sync`` is compiled before the graph is used (children first:
the graph is acyclic), and ``run_async`` is set exactly for nodes with ``subtree_async``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any

from aiostreams.engine.async_chain import (
    AsyncRunner,
    AttemptBegin,
    Step,
    compile_async_node,
    compile_fused_source,
    step_of,
)
from aiostreams.engine.context import NodeContext, TaskHost
from aiostreams.engine.sync_chain import Decoder, Runner, compile_decoder, compile_node
from aiostreams.policies import Retry
from aiostreams.runtime.slot import Slot
from aiostreams.topology.processor import Processor, is_async_processor
from aiostreams.topology.topology import SinkNode, SourceNode, SubTopology
from aiostreams.types import RawRecord, Record, TopicPartition

log = logging.getLogger("aiostreams.task")

SourceRun = Callable[[RawRecord, Slot], None]
"""Decode a raw record into ``slot.record`` and run the source's (synchronous) children."""

AsyncSourceRun = Callable[[RawRecord, Slot], Awaitable[None]]
"""The same, awaiting the children whose subtree is async."""


class NodeExec:
    """A node of the sub-topology instantiated for one task."""

    __slots__ = ("children", "children_by_name", "context", "external", "is_async", "name",
                 "processor", "retry", "run_async", "run_sync", "sink", "steps", "stores",
                 "subtree_async")

    def __init__(self, name: str) -> None:
        self.name = name
        self.processor: Processor[Any, Any] | None = None
        self.sink: SinkNode | None = None
        self.external: str | None = None  # an external sink's name
        self.is_async = False
        self.children: list[NodeExec] = []
        self.children_by_name: dict[str, NodeExec] = {}
        self.stores: dict[str, Any] = {}
        self.context: NodeContext | None = None
        self.retry: Retry | None = None
        self.subtree_async = False  # this node or one below it must be awaited
        self.run_sync: Runner = _not_compiled  # runs it synchronously (see sync_chain)
        self.run_async: AsyncRunner | None = None  # when subtree_async (see async_chain)
        self.steps: dict[str, Step] = {}  # its children's, by name (a processor's)


def _not_compiled(record: Record[Any, Any], slot: Slot) -> None:
    raise AssertionError("a node ran before the task compiled its runners")


class SourceExec:
    """A source of the task: its serdes and its one compiled decode-and-run."""

    __slots__ = ("begin_async", "chain_is_async", "children", "decode", "end_async",
                 "key_serde", "name", "run", "run_async", "sole", "value_serde")

    def __init__(self, node: SourceNode, children: list[NodeExec], *,
                 lineage: bool = False, origin: bool = False) -> None:
        self.name = node.name
        self.key_serde = node.key_serde
        self.value_serde = node.value_serde
        self.decode: Decoder = compile_decoder(node.key_serde, node.value_serde,
                                               lineage=lineage, origin=origin)
        self.children = children
        self.chain_is_async = any(c.subtree_async for c in children)
        steps: list[Step] = [(c.run_sync, c.run_async) for c in children]
        # an executor runs an async record as begin_async, awaiting what it returns, then
        # end_async: for a fused chain, its two halves (no engine coroutine per record)
        self.end_async: Callable[[Slot], None] = _nothing_left
        # a sync chain with one child: ``run`` is ``slot.node = name``, ``slot.record =
        # decode(raw)``, then ``sole(record, slot)``, which the inline path calls directly
        self.sole: Runner | None = None
        if self.chain_is_async:
            self.run: SourceRun = _sync_run_of_async(self.name)
            fused = compile_fused_source(self.name, self.decode, children)
            if fused is not None:
                self.run_async: AsyncSourceRun = fused.run
                self.begin_async: AttemptBegin = fused.begin
                self.end_async = fused.end
            else:
                self.run_async = self.begin_async = _compile_async_source(
                    self.name, self.decode, steps)
        else:
            self.run = _compile_source(self.name, self.decode, [s[0] for s in steps])
            self.sole = steps[0][0] if len(steps) == 1 else None
            self.run_async = self.begin_async = _async_run_of_sync(self.name)


def _compile_source(name: str, decode: Decoder, runners: list[Runner]) -> SourceRun:
    only = runners[0] if len(runners) == 1 else None
    if only is not None:  # the common shape, without a loop
        def run_one(raw: RawRecord, slot: Slot) -> None:
            slot.node = name
            record = slot.record = decode(raw)
            only(record, slot)

        return run_one

    def run(raw: RawRecord, slot: Slot) -> None:
        slot.node = name
        record = slot.record = decode(raw)
        for each in runners:
            each(record, slot)

    return run


def _compile_async_source(name: str, decode: Decoder, steps: list[Step]) -> AsyncSourceRun:
    async def run(raw: RawRecord, slot: Slot) -> None:
        slot.node = name
        record = slot.record = decode(raw)
        for run_sync, run_async in steps:
            if run_async is None:
                run_sync(record, slot)
            else:
                await run_async(record, slot)

    return run


def _nothing_left(slot: Slot) -> None:
    """The end of an attempt whose begin's awaitable did everything."""


def _sync_run_of_async(name: str) -> SourceRun:
    def run(raw: RawRecord, slot: Slot) -> None:
        raise AssertionError(f"source {name!r} reaches an async processor: await run_async")

    return run


def _async_run_of_sync(name: str) -> AsyncSourceRun:
    async def run(raw: RawRecord, slot: Slot) -> None:
        raise AssertionError(f"source {name!r} is synchronous: call run")

    return run


class TaskGraph:
    """The compiled nodes (by name, parents before children) and sources (by topic)."""

    def __init__(self, sub: SubTopology, host: TaskHost, *,
                 store_views: Callable[[list[str]], dict[str, Any]],
                 node_retry: Mapping[str, Retry], max_record_bytes: int,
                 tp_of: Mapping[str, TopicPartition], lineage: bool = False,
                 unmarked: Collection[str] = ()) -> None:
        execs: dict[str, NodeExec] = {}
        for proc in sub.processors:
            ne = NodeExec(proc.name)
            ne.processor = proc.supplier()
            if not isinstance(ne.processor, Processor):
                raise TypeError(
                    f"processor {proc.name!r}: its supplier returned "
                    f"{type(ne.processor).__name__}, not a Processor"
                )
            ne.is_async = is_async_processor(ne.processor)
            ne.stores = store_views(list(proc.stores))
            ne.retry = node_retry.get(proc.name)
            execs[proc.name] = ne
        for sink in sub.sinks:
            ne = NodeExec(sink.name)
            ne.sink = sink
            execs[sink.name] = ne
        for ext in sub.external_sinks:
            ne = NodeExec(ext.name)
            ne.external = ext.name
            execs[ext.name] = ne
        for proc in sub.processors:
            ne = execs[proc.name]
            ne.children = [execs[c] for c in proc.children]
            ne.children_by_name = {c.name: c for c in ne.children}
            ne.context = NodeContext(host, ne, lineage=lineage)
        self.nodes = execs
        for ne in execs.values():
            ne.subtree_async = _reaches_async(ne)
        _compile(execs, max_record_bytes, tp_of, lineage)
        self.sources: dict[str, SourceExec] = {}
        for src in sub.sources:
            sx = SourceExec(src, [execs[c] for c in src.children], lineage=lineage,
                            origin=any(t in unmarked for t in src.topics))
            for topic in src.topics:
                self.sources[topic] = sx

    def retry_of(self, node: str) -> Retry | None:
        """The retry policy set on ``node`` itself, if any (else the task's applies)."""
        ne = self.nodes.get(node)
        return ne.retry if ne is not None else None

    async def init_processors(self) -> None:
        """``init`` every processor, parents first."""
        for ne in self.nodes.values():
            if ne.processor is not None:
                assert ne.context is not None
                await ne.processor.init(ne.context)

    async def close_processors(self, task_id: str) -> None:
        """``close`` every processor, children first; a failing ``close`` is logged and the
        others still close."""
        for ne in reversed(list(self.nodes.values())):
            if ne.processor is not None:
                try:
                    await ne.processor.close()
                except Exception:
                    log.exception("task %s: closing processor %r failed", task_id, ne.name)


def _compile(execs: dict[str, NodeExec], max_record_bytes: int,
             tp_of: Mapping[str, TopicPartition], lineage: bool) -> None:
    def runner_of(ne: NodeExec) -> Runner:
        if ne.run_sync is _not_compiled:
            ne.run_sync = compile_node(ne, runner_of, max_record_bytes=max_record_bytes,
                                       tp_of=tp_of, lineage=lineage)
        return ne.run_sync

    def async_runner_of(ne: NodeExec) -> AsyncRunner:
        if ne.run_async is None:
            ne.steps = {c.name: step_of(c, async_runner_of) for c in ne.children}
            ne.run_async = compile_async_node(ne, ne.steps)
        return ne.run_async

    for ne in execs.values():
        runner_of(ne)
    for ne in execs.values():
        if ne.subtree_async:
            async_runner_of(ne)  # sets its steps too
        elif ne.processor is not None:  # a sync subtree: steps for punctuations' forwards
            ne.steps = {c.name: (c.run_sync, None) for c in ne.children}


def _reaches_async(node: NodeExec) -> bool:
    if node.is_async:
        return True
    return any(_reaches_async(c) for c in node.children)
