"""Kafka's default partitioner: murmur2 of the key, so a key lands where a Java client puts it.

``murmur2`` is byte-for-byte ``org.apache.kafka.common.utils.Utils.murmur2`` (seed
``0x9747b28c``, signed 32-bit result) and ``default_partition`` is what Kafka's
``BuiltInPartitioner.partitionForKey`` computes for a non-null key:
``toPositive(murmur2(key)) % numPartitions``. Co-partitioning between aiostreams and any
Java/librdkafka (``murmur2_random``) producer therefore holds for keyed records.

Null keys cannot be hashed. Kafka's producer spreads them with a *sticky* partitioner (one
partition per batch); here they go round-robin over a counter the caller owns (one per
producer), which spreads them just as evenly and is deterministic in tests.

The hash is pure Python and on the produce hot path, so it is written for speed rather than
as a literal port: all 4-byte words are unpacked in one ``struct`` call (the ``Struct`` is
cached per word count), and each step masks to 32 bits once.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Iterator

__all__ = ["KeyPartitioner", "default_partition", "murmur2", "to_positive"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_MAX_CACHED_WORDS = 256
"""Keys up to 1 KiB get a cached unpacker; longer ones build one per call (rare, and the
hashing then dominates anyway). Bounds the cache at 256 small objects."""

_unpackers: dict[int, Callable[[bytes], tuple[int, ...]]] = {}


def _unpacker(words: int) -> Callable[[bytes], tuple[int, ...]]:
    unpack = struct.Struct(f"<{words}I").unpack_from
    if words <= _MAX_CACHED_WORDS:
        _unpackers[words] = unpack
    return unpack


def murmur2(data: bytes) -> int:
    """The 32-bit murmur2 hash of ``data`` exactly as Kafka's Java client computes it.

    Returns a *signed* 32-bit int (Java's ``int``), e.g. ``murmur2(b"21") == -973932308``.
    """
    length = len(data)
    h = _SEED ^ length
    words = length >> 2
    if words:
        unpack = _unpackers.get(words) or _unpacker(words)
        for k in unpack(data):
            k = (k * _M) & _MASK
            # h = h*m ^ (k ^ k>>>24)*m; the high bits of the second product vanish in the mask.
            h = ((h * _M) ^ ((k ^ (k >> 24)) * _M)) & _MASK
    tail = length & 3
    if tail:
        h = ((h ^ int.from_bytes(data[length - tail :], "little")) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit of a 32-bit int (not ``abs``)."""
    return n & 0x7FFFFFFF


def default_partition(
    key: bytes | None, num_partitions: int, *, counter: Iterator[int]
) -> int:
    """The partition Kafka's default partitioner picks for ``key`` among ``num_partitions``.

    A non-null key maps to ``to_positive(murmur2(key)) % num_partitions`` (the same for every
    client and every call). A null key takes the next value of ``counter`` modulo the
    partition count: round-robin when each producer passes its own ``itertools.count()``.
    """
    if num_partitions < 1:
        raise ValueError(
            f"num_partitions must be at least 1, got {num_partitions}; "
            "a topic always has one partition or more"
        )
    if key is None:
        return next(counter) % num_partitions
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class KeyPartitioner:
    """A producer's :func:`default_partition`, with its own null-key counter and keyed
    results memoised.

    Streams repeat their keys, and murmur2 in Python costs about 1 µs a key, so the
    partition of each (key, partition count) is kept; the memo is dropped whole when it
    reaches ``max_keys`` entries (bounded memory, no per-entry bookkeeping)."""

    def __init__(self, max_keys: int = 100_000) -> None:
        self._null_key_counter = itertools.count()
        self._memo: dict[tuple[bytes, int], int] = {}
        self._max_keys = max_keys

    def partition_for(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        """The partition of ``key`` among ``num_partitions``. ``topic`` does not change it
        (Kafka's default partitioner ignores it); it is there so that this method is a
        producer's ``partition_for`` and a memory broker's partition chooser as it is."""
        if key is None:
            return default_partition(key, num_partitions, counter=self._null_key_counter)
        memo = self._memo
        hit = memo.get((key, num_partitions))
        if hit is None:
            if len(memo) >= self._max_keys:
                memo.clear()
            hit = memo[(key, num_partitions)] = default_partition(
                key, num_partitions, counter=self._null_key_counter)
        return hit
