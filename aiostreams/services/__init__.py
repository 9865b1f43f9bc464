"""The services a pipeline calls, declared: limits, rate, breaker, retry budget, coalescing.

See :class:`~aiostreams.services.service.Service` and ``docs/guides/services.md``.
"""

from aiostreams.services.breaker import BreakerState, CircuitBreaker
from aiostreams.services.declared import DeclaredService
from aiostreams.services.limit import Adaptive
from aiostreams.services.memo import Memo
from aiostreams.services.outcome import CircuitOpenError, Outcome, Overloaded
from aiostreams.services.rate import RateLimit
from aiostreams.services.service import Service
from aiostreams.services.single_flight import SingleFlight

__all__ = ["Adaptive", "BreakerState", "CircuitBreaker", "CircuitOpenError", "DeclaredService",
           "Memo", "Outcome", "Overloaded", "RateLimit", "Service",
           "SingleFlight"]
