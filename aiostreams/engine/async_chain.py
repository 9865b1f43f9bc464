"""Asynchronous steps compiled into coroutine functions, once per task.

The counterpart of :mod:`~aiostreams.engine.sync_chain` for the part of a sub-topology
that must be awaited. A node whose subtree reaches an ``async`` processor gets an *async
runner*: ``await run(record, slot)`` runs the node and, depth first, every node the record
is forwarded to. Children whose subtree is synchronous run through their sync runners,
so a typical ``source → async enrich → sink`` costs one coroutine frame for the engine's
part of the record (the processor's own ``process`` is the other).

Semantics are those of the node graph, exactly as the sync runners keep them:

- forwards made while ``process`` runs (before and after its awaits) go to the slot's
  ``forward_buffer``, and are handed to the children only once ``process`` has returned,
  in forward order;
- ``slot.node`` names the node running, so a failure names the node that raised.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiostreams.engine.sync_chain import Decoder, Runner
from aiostreams.runtime.slot import Slot
from aiostreams.topology.processor import Processor
from aiostreams.types import RawRecord, Record

AsyncRunner = Callable[[Record[Any, Any], Slot], Awaitable[None]]
"""Runs one node (and what it forwards to), awaiting what must be awaited."""

Step = tuple[Runner, AsyncRunner | None]
"""How to run a child: its sync runner, and its async runner when its subtree is async."""


class AsyncCompilableNode(Protocol):
    """What the compiler reads of a task's node (``NodeExec``)."""

    name: str
    processor: Processor[Any, Any] | None
    subtree_async: bool
    run_sync: Runner
    steps: dict[str, Step]  # its children's, once compiled

    @property
    def children(self) -> list[Any]: ...


def step_of(node: AsyncCompilableNode,
            async_runner_of: Callable[[Any], AsyncRunner]) -> Step:
    """``node``'s step; ``async_runner_of`` compiles (or returns) an async node's runner."""
    return node.run_sync, (async_runner_of(node) if node.subtree_async else None)


def compile_async_node(node: AsyncCompilableNode, children: dict[str, Step]) -> AsyncRunner:
    """The async runner of ``node``, a processor whose subtree is async; ``children`` are
    its children's steps by name (see :func:`step_of`)."""
    assert node.subtree_async, f"node {node.name!r} has no async step to await"
    assert node.processor is not None, f"node {node.name!r}: only processors can be async"
    name = node.name
    process = node.processor.process
    every = list(children.values())
    # the common shape: one child, synchronous (a sink, or a sync chain to one); a named
    # forward can only name that child (the context checks), so the name needs no lookup
    only_sync = every[0][0] if len(every) == 1 and every[0][1] is None else None

    async def run(record: Record[Any, Any], slot: Slot) -> None:
        buffer: list[tuple[str | None, Record[Any, Any]]] = []
        slot.forward_buffer = buffer
        slot.node = name
        result = process(record)
        if result is not None:
            await result
        slot.forward_buffer = None
        if only_sync is not None:
            for _, forwarded in buffer:
                only_sync(forwarded, slot)
        else:
            await hand_over(buffer, slot, children, every)

    return run


AttemptBegin = Callable[[RawRecord, Slot], Awaitable[None] | None]
"""Starts a record's attempt and returns what is left to await (None: nothing)."""


class FusedSource:
    """A fused source's attempt, whole (``run``) or in the two halves around its one await
    (``begin``, then awaiting what it returned, then ``end``), which is what the executor
    runs: the record's own ``process`` coroutine is then the only one below it."""

    __slots__ = ("begin", "end", "run")

    def __init__(self, run: Callable[[RawRecord, Slot], Awaitable[None]], begin: AttemptBegin,
                 end: Callable[[Slot], None]) -> None:
        self.run = run
        self.begin = begin
        self.end = end


def compile_fused_source(source: str, decode: Decoder, children: list[Any]
                         ) -> FusedSource | None:
    """For the commonest async shape, ``source → async processor → one sync child`` (a sink,
    or a sync chain to one), the source's decode-and-run and the processor's runner fused:
    no engine coroutine per record, the same semantics as the source's run awaiting
    :func:`compile_async_node`'s runner. None for other shapes. ``children`` are the
    source's children (``NodeExec``), compiled."""
    if len(children) != 1:
        return None
    node: AsyncCompilableNode = children[0]
    if not node.subtree_async or node.processor is None:
        return None
    steps = list(node.steps.values())
    if len(steps) != 1 or steps[0][1] is not None:
        return None
    name = node.name
    process = node.processor.process
    only_sync = steps[0][0]

    def begin(raw: RawRecord, slot: Slot) -> Awaitable[None] | None:
        slot.node = source
        record = slot.record = decode(raw)
        # from here on, compile_async_node's run, inlined
        slot.forward_buffer = []
        slot.node = name
        result: Awaitable[None] | None = process(record)
        return result

    def end(slot: Slot) -> None:
        buffer = slot.forward_buffer
        assert buffer is not None, f"{slot!r}: the attempt ended without beginning"
        slot.forward_buffer = None
        for _, forwarded in buffer:
            only_sync(forwarded, slot)

    async def run(raw: RawRecord, slot: Slot) -> None:
        result = begin(raw, slot)
        if result is not None:
            await result
        end(slot)

    return FusedSource(run, begin, end)


async def hand_over(buffer: list[tuple[str | None, Record[Any, Any]]], slot: Slot,
                    children: dict[str, Step], every: list[Step]) -> None:
    """Run what a node forwarded through its children, in forward order: a forward
    without a child name goes to every child, in topology order."""
    for child, forwarded in buffer:
        for run_sync, run_async in (every if child is None else (children[child],)):
            if run_async is None:
                run_sync(forwarded, slot)
            else:
                await run_async(forwarded, slot)
