"""The records every contender processes, and the transform they all apply.

Input record ``i`` has key ``user-<k>`` (``k`` drawn from ``keys`` with a fixed seed) and a
small JSON value ``{"id": i, "key": k, "seq": s, "amount": ...}``, where ``s`` counts the
records of key ``k`` before it: per-key order of any output can be checked from the values
alone. Standard library and orjson only (imported by contenders in the peers venv).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import orjson

SEED = 8
"""The fixed seed of the key sequence: every run preloads the same input."""


def records(n: int, keys: int, seed: int = SEED) -> Iterator[tuple[bytes, bytes]]:
    """The first ``n`` input records as ``(key, value)`` bytes, in input order."""
    rng = random.Random(seed)
    seqs = [0] * keys
    for i in range(n):
        k = rng.randrange(keys)
        seq = seqs[k]
        seqs[k] = seq + 1
        yield (f"user-{k}".encode(),
               orjson.dumps({"id": i, "key": k, "seq": seq, "amount": i * 0.5}))


def enrich(value: dict[str, Any]) -> dict[str, Any]:
    """P2's processing step (between parse and serialize): add a field."""
    value["enriched"] = True
    return value


def enrich_bytes(value: bytes) -> bytes:
    """Parse → :func:`enrich` → serialize, as every contender does it."""
    return orjson.dumps(enrich(orjson.loads(value)))
