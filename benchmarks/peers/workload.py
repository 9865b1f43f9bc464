"""The records every contender processes, and the transform they all apply.

Input record ``i`` has key ``user-<k>`` (``k`` drawn from ``keys`` with a fixed seed:
uniformly, or with ``skew="zipf"`` from Zipf(1.1), key ``k`` with weight ``1 / (k+1)^1.1``:
a few hot keys, as real traffic has, which key order serialises) and a
small JSON value ``{"id": i, "key": k, "seq": s, "amount": ...}``, where ``s`` counts the
records of key ``k`` before it: per-key order of any output can be checked from the values
alone. Standard library and orjson only (imported by contenders in the peers venv).
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import orjson

SEED = 8
"""The fixed seed of the key sequence: every run preloads the same input."""


SKEWS = ("uniform", "zipf")
ZIPF_EXPONENT = 1.1


def key_indices(n: int, keys: int, skew: str = "uniform", seed: int = SEED) -> Iterator[int]:
    """The key index of each of the first ``n`` records."""
    if skew not in SKEWS:
        raise ValueError(f"skew must be one of {', '.join(SKEWS)}; got {skew!r}")
    rng = random.Random(seed)
    if skew == "uniform":
        for _ in range(n):
            yield rng.randrange(keys)
        return
    cumulative = list(itertools.accumulate(1.0 / (k + 1) ** ZIPF_EXPONENT
                                           for k in range(keys)))
    population = range(keys)
    for _ in range(n):
        yield rng.choices(population, cum_weights=cumulative)[0]


def hottest_key_share(n: int, keys: int, skew: str = "uniform") -> int:
    """How many of the first ``n`` records the most frequent key has: under key order they
    run one after the other, so ``n / (count x per-record wait)`` bounds the rate."""
    return max(Counter(key_indices(n, keys, skew)).values(), default=0)


def records(n: int, keys: int, seed: int = SEED,
            skew: str = "uniform") -> Iterator[tuple[bytes, bytes]]:
    """The first ``n`` input records as ``(key, value)`` bytes, in input order."""
    seqs = [0] * keys
    for i, k in enumerate(key_indices(n, keys, skew, seed)):
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
