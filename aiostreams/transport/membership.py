"""How long a group member may still act as the owner of its assignment.

A consumer-group member owns its partitions only while the group coordinator counts it as a
member of the current generation. The coordinator drops a member that sent no heartbeat for
``session_timeout`` seconds and gives its partitions to others; the member learns of it only
at its next exchange with the coordinator - after a process frozen for 20 s resumes, its
retired records would otherwise be sent (changelog records computed from state another owner
has since moved on) before anything told it that the task is no longer its.

So a member holds a **lease**: every group request the coordinator answered without error
(a heartbeat, a SyncGroup) renews it from the moment the request was *sent* - the
coordinator received it no earlier, so it cannot expire the member before ``sent +
session_timeout``. A heartbeat answered "rebalance in progress" renews it too (the member
keeps its partitions until it rejoins), but only until ``rebalance_timeout`` after the first
such answer: a member that has not rejoined by then is dropped from the new generation.
Past either deadline (less a margin for the request still in flight) the member must assume
its partitions are gone: :meth:`MembershipLease.valid` is then false until a new SyncGroup
renews it (for the new generation). A coordinator that told the member
its generation or member id is unknown revokes the lease at once (:meth:`revoke`).

Invariant: ``valid()`` implies a successful group request was sent less than
``session_timeout - margin`` seconds ago for the generation :attr:`generation`, nothing has
revoked it since, and no rebalance has been under way for ``rebalance_timeout - margin``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["MembershipLease"]

LEASE_MARGIN_FRACTION = 0.1
"""The part of the session timeout the lease gives up early (at most :data:`LEASE_MARGIN_MAX`
seconds): a request checked just before the deadline still has to reach the broker."""

LEASE_MARGIN_MAX = 1.0


class MembershipLease:
    """A member's lease on its assignment (see the module doc)."""

    def __init__(self, session_timeout: float, rebalance_timeout: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if session_timeout <= 0:
            raise ValueError(f"session_timeout must be positive, got {session_timeout}")
        self.session_timeout = session_timeout
        self.term = session_timeout - _margin(session_timeout)
        rebalance = session_timeout if rebalance_timeout is None else rebalance_timeout
        self.rebalance_term = rebalance - _margin(rebalance)
        self._clock = clock
        self._renewed_at: float | None = None
        self._rebalancing_since: float | None = None
        self.generation: int | None = None
        """The generation the lease was last renewed for (None: never renewed)."""
        self.taken_over = False
        """Set (for good) when the coordinator forgot this *static* member while its lease
        was valid - it cannot have expired it, so another process joined with its
        ``group_instance_id`` and took its place (see :mod:`~aiostreams.transport.kafka_lease`).
        The member must then stop, not rejoin: rejoining would take the id back and fence
        the other process, which would do the same."""

    def renew(self, sent_at: float, generation: int, *, rebalancing: bool = False) -> None:
        """A group request sent at ``sent_at`` (this lease's clock) for ``generation`` was
        answered without error (``rebalancing``: with "rebalance in progress")."""
        if self.generation is not None and generation < self.generation:
            return  # a late answer for an older generation renews nothing
        if rebalancing:
            if self._renewed_at is None:
                return  # already ended: only a SyncGroup brings it back
            if self._rebalancing_since is None:
                self._rebalancing_since = sent_at
        else:
            self._rebalancing_since = None
        if generation != self.generation or self._renewed_at is None \
                or sent_at > self._renewed_at:
            self._renewed_at = sent_at
        self.generation = generation

    def revoke(self) -> None:
        """The coordinator no longer counts this member (unknown member id or generation,
        or it left the group): the lease ends now."""
        self._renewed_at = None
        self._rebalancing_since = None

    def valid(self, generation: int | None = None) -> bool:
        """Whether the member may still act as the owner of its assignment (of
        ``generation``, when given)."""
        if generation is not None and generation != self.generation:
            return False
        return self.expires_in() > 0.0

    def expires_in(self) -> float:
        """Seconds until the lease ends (0 when it has)."""
        if self._renewed_at is None:
            return 0.0
        end = self._renewed_at + self.term
        if self._rebalancing_since is not None:
            end = min(end, self._rebalancing_since + self.rebalance_term)
        return max(0.0, end - self._clock())


def _margin(timeout: float) -> float:
    return min(LEASE_MARGIN_MAX, timeout * LEASE_MARGIN_FRACTION)
