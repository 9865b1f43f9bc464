"""The membership lease: a member acts as owner only within a session timeout of its last
group request the coordinator answered, and never after the coordinator disowned it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.transport.membership import MembershipLease


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_lease_never_renewed_is_not_valid() -> None:
    assert not MembershipLease(6.0, clock=Clock()).valid()


def test_a_lease_runs_out_a_margin_before_the_session_timeout_from_the_send() -> None:
    clock = Clock()
    lease = MembershipLease(6.0, clock=clock)
    lease.renew(sent_at=clock.now, generation=3)
    clock.now += 5.3  # the margin: 10% of 6 s
    assert lease.valid() and lease.valid(3)
    clock.now += 0.2
    assert not lease.valid()


def test_a_frozen_member_finds_its_lease_gone_when_it_resumes() -> None:
    clock = Clock()
    lease = MembershipLease(6.0, clock=clock)
    lease.renew(clock.now, 1)
    clock.now += 20.0  # SIGSTOP for 20 s
    assert not lease.valid()
    assert lease.expires_in() == 0.0


def test_revoke_ends_the_lease_at_once_and_only_a_new_renewal_restores_it() -> None:
    clock = Clock()
    lease = MembershipLease(6.0, clock=clock)
    lease.renew(clock.now, 1)
    lease.revoke()
    assert not lease.valid()
    lease.renew(clock.now, 2)
    assert lease.valid(2) and not lease.valid(1)


def test_a_late_answer_for_an_older_generation_renews_nothing() -> None:
    clock = Clock()
    lease = MembershipLease(6.0, clock=clock)
    lease.renew(clock.now, 5)
    clock.now += 5.0
    lease.renew(clock.now, 4)
    clock.now += 1.0
    assert not lease.valid()


def test_a_session_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        MembershipLease(0.0)


@given(st.lists(st.tuples(st.floats(0.0, 10.0), st.booleans()), max_size=30),
       st.floats(0.0, 20.0))
def test_valid_only_within_the_term_of_the_latest_send(steps: list[tuple[float, bool]],
                                                       wait: float) -> None:
    """Whatever the renewals (each after ``delay`` seconds, sent at that moment), the lease
    is valid exactly when the last renewal's send is less than the term ago."""
    clock = Clock()
    lease = MembershipLease(6.0, clock=clock)
    last: float | None = None
    for delay, renew in steps:
        clock.now += delay
        if renew:
            lease.renew(clock.now, 1)
            last = clock.now
    clock.now += wait
    assert lease.valid() == (last is not None and clock.now - last < lease.term)


def test_a_rebalance_keeps_the_lease_only_within_the_rebalance_timeout() -> None:
    clock = Clock()
    lease = MembershipLease(6.0, 30.0, clock=clock)
    lease.renew(clock.now, 2)
    for _ in range(10):  # heartbeats answered "rebalance in progress", every 2 s
        clock.now += 2.0
        lease.renew(clock.now, 2, rebalancing=True)
    assert lease.valid(2)  # 18 s into the rebalance: still a member
    for _ in range(6):
        clock.now += 2.0
        lease.renew(clock.now, 2, rebalancing=True)
    assert not lease.valid(2)  # 30 s: the rebalance went on without it
    assert lease.expires_in() == 0.0


def test_a_rebalance_answer_does_not_revive_an_ended_lease() -> None:
    clock = Clock()
    lease = MembershipLease(6.0, 30.0, clock=clock)
    lease.renew(clock.now, 2)
    lease.revoke()
    lease.renew(clock.now, 2, rebalancing=True)
    assert not lease.valid()
