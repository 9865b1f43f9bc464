"""Owner epochs fence stale writes: a replay applies exactly the records of the owners in
the order they took the task, and skips what a deposed owner appended after its successor."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from aiostreams.state.owner_epoch import EpochFence, owner_headers, record_epoch
from aiostreams.types import Headers


@dataclass(frozen=True)
class Rec:
    value: int
    headers: Headers


def test_the_header_round_trips_and_a_foreign_one_has_no_epoch() -> None:
    assert record_epoch(owner_headers(7)) == 7
    assert record_epoch(owner_headers(-1)) == -1
    assert record_epoch((("other", b"x"),)) is None
    assert record_epoch((("aiostreams.owner", b"\x01"),)) is None


def test_a_stale_owners_late_record_is_skipped() -> None:
    fence = EpochFence()
    log = [Rec(1, owner_headers(3)), Rec(2, owner_headers(5)), Rec(3, owner_headers(3)),
           Rec(4, owner_headers(5)), Rec(5, ())]
    assert [r.value for r in fence.admitted(log)] == [1, 2, 4, 5]
    assert fence.skipped == 1


def test_a_replay_from_a_checkpoint_fences_with_the_epoch_it_saved() -> None:
    fence = EpochFence(high=5)
    assert [r.value for r in fence.admitted([Rec(1, owner_headers(4)),
                                              Rec(2, owner_headers(5))])] == [2]


@given(st.lists(st.integers(1, 6), min_size=1, max_size=8),
       st.data())
def test_a_replay_keeps_every_legitimate_write_and_no_stale_one(
        owners: list[int], data: st.DataObject) -> None:
    """Owners take the task in later and later generations; each writes a run of records;
    a deposed owner's late records land anywhere after its successor started writing."""
    epochs = sorted(set(owners))
    log: list[Rec] = []
    legit: list[int] = []
    stale: list[int] = []
    n = 0
    for i, epoch in enumerate(epochs):
        for _ in range(data.draw(st.integers(1, 4))):
            n += 1
            log.append(Rec(n, owner_headers(epoch)))
            legit.append(n)
        if i > 0 and data.draw(st.booleans()):  # the previous owner's late record
            first_of_run = next(j for j, r in enumerate(log)
                                if record_epoch(r.headers) == epoch)
            n += 1
            at = data.draw(st.integers(first_of_run + 1, len(log)))
            log.insert(at, Rec(n, owner_headers(epochs[i - 1])))
            stale.append(n)
    kept = [r.value for r in EpochFence().admitted(log)]
    assert kept == [r.value for r in log if r.value in legit]
