"""Hypothesis strategies for the oracle: input records and topology specs.

Inputs: keys from a small alphabet plus null, small longs plus null, timestamps (ms) that
mostly increase, sometimes step back (out of order, some of them past a window's grace) and
sometimes jump ahead (closing windows). Specs: one per operator family, from the vocabulary
of :mod:`oracle_spec`.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

KEYS = st.sampled_from(["a", "b", "c", None])
VALUES = st.one_of(st.integers(-3, 30), st.none())


@st.composite
def records(draw: st.DrawFn, topics: tuple[str, ...] = ("in",), *, max_size: int = 14,
            keys: st.SearchStrategy[str | None] = KEYS,
            values: st.SearchStrategy[int | None] = VALUES) -> list[dict[str, Any]]:
    """Input records over ``topics``; timestamps in ms, never negative."""
    clock = draw(st.integers(0, 3)) * 1000
    result = []
    for _ in range(draw(st.integers(1, max_size))):
        step = draw(st.sampled_from([0, 0, 1, 500, 1000, 1000, 2000, 4000, 15000]))
        clock += step
        back = draw(st.sampled_from([0, 0, 0, 0, 500, 1000, 3000, 9000]))
        record: dict[str, Any] = {"topic": draw(st.sampled_from(topics)), "key": draw(keys),
                                  "value": draw(values), "ts": max(0, clock - back)}
        if draw(st.integers(0, 9)) == 0:
            record["headers"] = [["h", draw(st.binary(max_size=3)).hex()]]
        result.append(record)
    return result


def filter_op(draw: st.DrawFn, ident: str, source: str) -> dict[str, Any]:
    m = draw(st.integers(2, 4))
    return {"op": "filter", "id": ident, "from": source, "m": m,
            "r": draw(st.integers(0, m - 1)), "not": draw(st.booleans())}


def map_values_op(draw: st.DrawFn, ident: str, source: str) -> dict[str, Any]:
    return {"op": "map_values", "id": ident, "from": source, "a": draw(st.integers(-2, 3)),
            "b": draw(st.integers(-5, 5))}


@st.composite
def stateless_chain(draw: st.DrawFn, source: str, *, key_changes: bool = True,
                    prefix: str = "s") -> tuple[list[dict[str, Any]], str]:
    """Stateless ops after ``source``; returns them and the last variable."""
    ops: list[dict[str, Any]] = []
    current = source
    kinds = ["filter", "map_values", "flat_map_values", "branch"]
    if key_changes:
        kinds += ["select_key", "map"]
    for i in range(draw(st.integers(0, 3))):
        ident = f"{prefix}{i}"
        kind = draw(st.sampled_from(kinds))
        if kind == "filter":
            ops.append(filter_op(draw, ident, current))
        elif kind == "map_values":
            ops.append(map_values_op(draw, ident, current))
        elif kind == "flat_map_values":
            ops.append({"op": kind, "id": ident, "from": current, "n": draw(st.integers(0, 3))})
        elif kind == "branch":
            m = draw(st.integers(2, 3))
            ops.append({"op": "branch", "id": ident, "from": current, "m": m,
                        "r": draw(st.integers(0, m - 1))})
            ident = f"{ident}_{draw(st.sampled_from('01'))}"
        else:
            ops.append({"op": kind, "id": ident, "from": current, "n": draw(st.integers(1, 3)),
                        "a": draw(st.integers(1, 2)), "b": draw(st.integers(0, 3))})
        current = ident
    return ops, current
