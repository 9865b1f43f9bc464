"""What the engine and a service's call ask of a record's trace, without importing it.

OpenTelemetry is optional: :mod:`aiostreams.engine.tracing` (which imports it) is loaded
only when an app enables tracing. The engine's modules see a traced record only through
these protocols, and an untraced record has ``Slot.trace is None``: with tracing off the
engine allocates nothing for it and ``opentelemetry`` is never imported.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["CallTrace", "SlotTrace"]


class CallTrace(Protocol):
    """One call to a service on behalf of a traced record (from the permit wait on)."""

    def in_batch(self, size: int, call_id: str) -> None:
        """The call is one batch call made for ``size`` records (``call_id`` names it, the
        same for each of them); said before :meth:`dispatched`."""

    def dispatched(self) -> None:
        """The permit was granted: the call goes out now (the permit wait ends)."""

    def ended(self, outcome: str, error: BaseException | None) -> None:
        """The call returned (``error`` None) or raised; ``outcome`` is how the service
        classified it (:class:`~aiostreams.services.outcome.Outcome` value)."""


class SlotTrace(Protocol):
    """The trace of one record in flight (kept on its slot)."""

    def call(self, service: str, attempt: int) -> CallTrace:
        """A call to ``service`` starts waiting for its permit; ``attempt`` 0 is the first."""

    def failed(self, error: BaseException, action: str, attempt: int) -> None:
        """Attempt ``attempt`` raised ``error``; the failure policy chose ``action``."""
