"""The peer benchmark's output checks (benchmarks/peers/verify.py) on hand-made outputs."""

from __future__ import annotations

import orjson

from benchmarks.peers.topics import OutputRecord
from benchmarks.peers.verify import CommitSample, commits_ahead, key_order_violations, verify


def output(partition: int, offset: int, record_id: int, key: int, seq: int) -> OutputRecord:
    return OutputRecord(partition, offset, f"user-{key}".encode(),
                        orjson.dumps({"id": record_id, "key": key, "seq": seq}))


def test_one_late_record_is_one_violation() -> None:
    assert key_order_violations([("a", 0), ("a", 2), ("a", 1), ("a", 3)]) == 1


def test_swapped_pairs_are_one_violation_each() -> None:
    assert key_order_violations([("a", 1), ("a", 0), ("a", 3), ("a", 2)]) == 2


def test_keys_are_ordered_independently() -> None:
    outputs = [("a", 0), ("b", 1), ("a", 1), ("b", 0), ("c", 0), ("a", 2), ("b", 2)]
    assert key_order_violations(outputs) == 1  # only b's 0 after its 1


def test_in_order_outputs_have_no_violations() -> None:
    assert key_order_violations([("a", 0), ("b", 0), ("a", 1), ("b", 1)]) == 0


def test_verify_counts_missing_duplicates_and_violations() -> None:
    # inputs 0..4: keys 0,1,0,1,0 with seqs 0,0,1,1,2; output misses id 3, repeats id 1,
    # and has key 0's seq 1 after its seq 2
    outputs = [output(0, 0, 0, 0, 0), output(0, 1, 1, 1, 0), output(0, 2, 4, 0, 2),
               output(0, 3, 2, 0, 1), output(0, 4, 1, 1, 0)]
    verdict = verify(outputs, 5, None)
    assert (verdict.received, verdict.missing, verdict.duplicates) == (5, 1, 1)
    assert verdict.key_order_violations == 1
    assert verdict.commits_ahead is None
    assert not verdict.complete and not verdict.in_key_order


def test_a_key_in_two_output_partitions_is_reported() -> None:
    verdict = verify([output(0, 0, 0, 0, 0), output(1, 0, 1, 0, 1)], 2, None)
    assert verdict.split_keys == 1 and not verdict.in_key_order


def test_commit_before_an_output_existed_is_counted() -> None:
    # a sample saw committed offset 3 while the output held 2 records; ids 0 and 1 were
    # out, id 2 was produced later (output offset 2): committed ahead of its output.
    samples = [CommitSample(1.0, {0: 3}, {0: 2}), CommitSample(2.0, {0: 4}, {0: 4})]
    outputs = [(0, 0, 0), (1, 0, 1), (2, 0, 2), (3, 0, 3)]
    assert commits_ahead(outputs, samples) == 1


def test_commits_behind_the_output_are_fine() -> None:
    samples = [CommitSample(1.0, {0: 2}, {0: 2}), CommitSample(2.0, {0: 4}, {0: 4})]
    assert commits_ahead([(i, 0, i) for i in range(4)], samples) == 0
