"""Validating a topology's graph and splitting it into sub-topologies (what
:meth:`Topology.build` does).

Checks, each a :class:`~aiostreams.errors.TopologyError` naming the node: there is a
source; every parent named exists and is not a sink; every store used is declared; the
graph has no cycle (the error shows it); every node is reached from a source. Then the
graph splits into *sub-topologies*: connected components, joining nodes linked by an edge
or by a shared store, each run as one task per input partition.

Invariant: each sub-topology's nodes come in a topological order (parents before
children), and the sub-topologies are numbered in the order their first node comes.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiostreams.errors import TopologyError
from aiostreams.state.store_spec import StoreSpec
from aiostreams.topology.nodes import (
    ExternalSinkNode,
    Node,
    ProcessorNode,
    SinkNode,
    SourceNode,
    SubTopology,
)

__all__ = ["build_subtopologies"]


def build_subtopologies(nodes: Mapping[str, Node],
                        stores: Mapping[str, StoreSpec]) -> list[SubTopology]:
    """Validate the graph of ``nodes`` (setting their ``children``) and return its
    sub-topologies (raises :class:`TopologyError`)."""
    if not any(isinstance(n, SourceNode) for n in nodes.values()):
        raise TopologyError("the topology has no source: add_source() first")
    children: dict[str, list[str]] = {name: [] for name in nodes}
    for node in nodes.values():
        if isinstance(node, SourceNode):
            continue
        for parent in node.parents:
            p = nodes.get(parent)
            if p is None:
                raise TopologyError(
                    f"node {node.name!r} names parent {parent!r}, which does not exist"
                )
            if isinstance(p, SinkNode | ExternalSinkNode):
                raise TopologyError(
                    f"node {node.name!r} names sink {parent!r} as its parent; a sink "
                    "cannot have children"
                )
            children[parent].append(node.name)
        if isinstance(node, ProcessorNode):
            for store in node.stores:
                if store not in stores:
                    raise TopologyError(
                        f"processor {node.name!r} uses store {store!r}, which is not "
                        "declared: add_store() it"
                    )
    _check_acyclic(nodes, children)
    for name, node in nodes.items():
        if isinstance(node, SourceNode | ProcessorNode):
            node.children = children[name]
        if isinstance(node, ProcessorNode) and not node.children:
            pass  # a terminal processor (foreach, a state writer) is fine
    reached = _reachable_from_sources(nodes, children)
    for name in nodes:
        if name not in reached:
            raise TopologyError(
                f"node {name!r} is not connected to any source: give it a parent that "
                "a source reaches"
            )
    return _split(nodes, stores, children)


def _check_acyclic(nodes: Mapping[str, Node], children: dict[str, list[str]]) -> None:
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(nodes, white)
    for start in nodes:
        if color[start] != white:
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        path: list[str] = [start]
        color[start] = grey
        while stack:
            name, i = stack[-1]
            if i < len(children[name]):
                stack[-1] = (name, i + 1)
                child = children[name][i]
                if color[child] == grey:
                    cycle = [*path[path.index(child):], child]
                    raise TopologyError(
                        "the topology has a cycle: " + " -> ".join(cycle)
                    )
                if color[child] == white:
                    color[child] = grey
                    stack.append((child, 0))
                    path.append(child)
            else:
                color[name] = black
                stack.pop()
                path.pop()


def _reachable_from_sources(nodes: Mapping[str, Node],
                            children: dict[str, list[str]]) -> set[str]:
    seen: set[str] = set()
    todo = [n for n, node in nodes.items() if isinstance(node, SourceNode)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(children[name])
    return seen


def _split(nodes: Mapping[str, Node], stores: Mapping[str, StoreSpec],
           children: dict[str, list[str]]) -> list[SubTopology]:
    # union-find over parent/child edges and shared stores
    parent_of: dict[str, str] = {n: n for n in nodes}

    def find(x: str) -> str:
        while parent_of[x] != x:
            parent_of[x] = parent_of[parent_of[x]]
            x = parent_of[x]
        return x

    def union(a: str, b: str) -> None:
        parent_of[find(a)] = find(b)

    for name, kids in children.items():
        for kid in kids:
            union(name, kid)
    store_users: dict[str, list[str]] = {}
    for node in nodes.values():
        if isinstance(node, ProcessorNode):
            for s in node.stores:
                store_users.setdefault(s, []).append(node.name)
    for users in store_users.values():
        for other in users[1:]:
            union(users[0], other)

    order = _topological_order(nodes, children)
    groups: dict[str, list[str]] = {}
    for name in order:
        groups.setdefault(find(name), []).append(name)
    subs: list[SubTopology] = []
    for i, names in enumerate(groups.values()):
        members = [nodes[n] for n in names]
        procs = tuple(n for n in members if isinstance(n, ProcessorNode))
        used = dict.fromkeys(s for p in procs for s in p.stores)
        subs.append(SubTopology(
            id=i,
            sources=tuple(n for n in members if isinstance(n, SourceNode)),
            processors=procs,
            sinks=tuple(n for n in members if isinstance(n, SinkNode)),
            stores=tuple(stores[s] for s in used),
            external_sinks=tuple(n for n in members if isinstance(n, ExternalSinkNode)),
        ))
    return subs


def _topological_order(nodes: Mapping[str, Node],
                       children: dict[str, list[str]]) -> list[str]:
    indegree = dict.fromkeys(nodes, 0)
    for kids in children.values():
        for kid in kids:
            indegree[kid] += 1
    ready = [n for n in nodes if indegree[n] == 0]
    order: list[str] = []
    while ready:
        name = ready.pop(0)
        order.append(name)
        for kid in children[name]:
            indegree[kid] -= 1
            if indegree[kid] == 0:
                ready.append(kid)
    return order
