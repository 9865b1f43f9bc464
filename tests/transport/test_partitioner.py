"""Kafka's default partitioner, checked against Kafka's own test vectors and a literal port."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.transport.partitioner import (
    KeyPartitioner,
    default_partition,
    murmur2,
    to_positive,
)

# Kafka's clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java (testMurmur2),
# plus vectors other Kafka clients (akka, librdkafka) check against the Java client.
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"1": -1993445489,
    b"12": 126087238,
    b"123": -267702483,
    b"1234": -1614185708,
    b"12345": -1188365604,
    b"kafka": -798503068,
}


def java_murmur2(data: bytes) -> int:
    """A line-by-line port of ``Utils.murmur2`` with Java's 32-bit int arithmetic."""

    def to_int(n: int) -> int:
        n &= 0xFFFFFFFF
        return n - (1 << 32) if n >= 1 << 31 else n

    def unsigned_shift(n: int, bits: int) -> int:  # Java's >>>
        return (n & 0xFFFFFFFF) >> bits

    length = len(data)
    m, r = 0x5BD1E995, 24
    h = to_int(0x9747B28C ^ length)
    for i in range(length // 4):
        i4 = i * 4
        k = data[i4] + (data[i4 + 1] << 8) + (data[i4 + 2] << 16) + (data[i4 + 3] << 24)
        k = to_int(k * m)
        k = to_int(k ^ unsigned_shift(k, r))
        k = to_int(k * m)
        h = to_int(h * m)
        h = to_int(h ^ k)
    rest = length % 4
    base = length & ~3
    if rest == 3:
        h = to_int(h ^ (data[base + 2] << 16))
    if rest >= 2:
        h = to_int(h ^ (data[base + 1] << 8))
    if rest >= 1:
        h = to_int(h ^ data[base])
        h = to_int(h * m)
    h = to_int(h ^ unsigned_shift(h, 13))
    h = to_int(h * m)
    return to_int(h ^ unsigned_shift(h, 15))


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS.items(), ids=repr)
def test_murmur2_matches_kafkas_test_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_of_empty_key_matches_the_java_port() -> None:
    assert murmur2(b"") == java_murmur2(b"") == 275646681


@given(st.binary(max_size=2000))
def test_murmur2_equals_a_literal_port_of_the_java_code(data: bytes) -> None:
    assert murmur2(data) == java_murmur2(data)


@given(st.binary(max_size=64))
def test_murmur2_is_a_signed_32_bit_int(data: bytes) -> None:
    assert -(2**31) <= murmur2(data) < 2**31


def test_to_positive_clears_the_sign_bit_like_java() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(-790332482) == 1357151166
    assert to_positive(12345) == 12345


@given(st.binary(max_size=100), st.integers(min_value=1, max_value=1000))
def test_keyed_partition_is_positive_murmur2_modulo_the_count(key: bytes, count: int) -> None:
    partition = default_partition(key, count, counter=itertools.count())
    assert partition == to_positive(java_murmur2(key)) % count
    assert 0 <= partition < count


def test_keyed_partition_ignores_the_counter() -> None:
    counter = itertools.count()
    assert {default_partition(b"same", 7, counter=counter) for _ in range(10)} == {
        default_partition(b"same", 7, counter=itertools.count(99))
    }
    assert next(counter) == 0


def test_null_keys_go_round_robin_over_the_counter() -> None:
    counter = itertools.count()
    assert [default_partition(None, 3, counter=counter) for _ in range(7)] == [
        0, 1, 2, 0, 1, 2, 0,
    ]


def test_keys_spread_evenly_over_partitions() -> None:
    counts = Counter(
        default_partition(b"user-%d" % i, 12, counter=itertools.count()) for i in range(24_000)
    )
    assert set(counts) == set(range(12))
    assert all(1700 <= n <= 2300 for n in counts.values()), counts  # mean 2000, ±15%


@pytest.mark.parametrize("count", [0, -1])
def test_partition_count_below_one_is_refused(count: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        default_partition(b"k", count, counter=itertools.count())


def test_key_partitioner_answers_like_default_partition_and_bounds_its_memo() -> None:
    partitioner = KeyPartitioner(max_keys=3)
    keys = [f"user-{i}".encode() for i in range(10)]
    first = [partitioner.partition_for("t", key, 7) for key in keys]
    # memo hits, and a memo cleared twice on the way
    again = [partitioner.partition_for("t", key, 7) for key in keys]
    expected = [default_partition(key, 7, counter=itertools.count()) for key in keys]
    assert first == again == expected
    assert len(partitioner._memo) <= 3
    # the partition count is part of the memo's key
    assert partitioner.partition_for("t", keys[0], 1) == 0


def test_key_partitioner_spreads_null_keys_round_robin_on_its_own_counter() -> None:
    one, other = KeyPartitioner(), KeyPartitioner()
    assert [one.partition_for("t", None, 3) for _ in range(4)] == [0, 1, 2, 0]
    assert other.partition_for("t", None, 3) == 0
