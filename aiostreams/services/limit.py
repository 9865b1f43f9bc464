"""How many calls to a service may be in flight: fixed, or adaptive.

``concurrency=`` of a service is an ``int`` (a :class:`FixedLimit`) or an :class:`Adaptive`,
whose ``algorithm`` picks the limit that moves with the calls' outcomes:

- ``"gradient"`` (the default): :class:`~aiostreams.services.gradient.GradientLimit`, per
  round trip, on the gradient of latency and on 429/503/timeouts, remembering where the
  service last refused (chosen by ``benchmarks/io_edge.py``: see ``docs/guides/services.md``);
- ``"aimd"``: :class:`~aiostreams.services.aimd.AimdLimit`, +1 per round trip, x``backoff``
  on a congestion signal.

A service builds the one its declaration asks for (:func:`~aiostreams.services.service.make_limit`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from aiostreams.errors import ConfigError
from aiostreams.services.outcome import Outcome

__all__ = ["Adaptive", "Algorithm", "FixedLimit", "Limit"]

Algorithm = Literal["gradient", "aimd"]


@dataclass(frozen=True)
class Adaptive:
    """An adaptive concurrency limit's settings.

    ``initial``/``min``/``max`` bound the limit; ``backoff`` is the factor of a cut on a
    429/503 or a timeout; ``tolerance`` is how far the short-term latency may grow past the
    no-load baseline (the lowest average of the last ``baseline_window`` seconds) before
    the limit lowers.
    """

    initial: int = 20
    min: int = 1
    max: int = 1000
    backoff: float = 0.9
    tolerance: float = 2.0
    baseline_window: float = 30.0
    algorithm: Algorithm = "gradient"

    def __post_init__(self) -> None:
        if not 1 <= self.min <= self.initial <= self.max:
            raise ConfigError(f"Adaptive needs 1 <= min <= initial <= max; got min={self.min}, "
                              f"initial={self.initial}, max={self.max}")
        if not 0.0 < self.backoff < 1.0:
            raise ConfigError(f"Adaptive backoff is a factor in (0, 1); got {self.backoff}")
        if self.tolerance <= 1.0:
            raise ConfigError(f"Adaptive tolerance must exceed 1.0; got {self.tolerance}")
        if not self.baseline_window > 0:
            raise ConfigError(f"Adaptive baseline_window is positive seconds; got "
                              f"{self.baseline_window}")
        if self.algorithm not in ("gradient", "aimd"):
            raise ConfigError(f"Adaptive algorithm is 'gradient' or 'aimd'; got "
                              f"{self.algorithm!r}")


class Limit:
    """The interface the service's permit gate reads: the current limit, and outcomes."""

    @property
    def limit(self) -> int:
        raise NotImplementedError

    def on_outcome(self, outcome: Outcome, latency: float, in_flight: int, now: float) -> None:
        """A call that was dispatched with ``in_flight`` calls out (itself included) ended
        at ``now``, ``latency`` seconds after its dispatch."""


class FixedLimit(Limit):
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ConfigError(f"a service's concurrency must be at least 1; got {limit}")
        self._limit = limit

    @property
    def limit(self) -> int:
        return self._limit
