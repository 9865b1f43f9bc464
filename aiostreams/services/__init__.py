"""The services a pipeline calls, declared: contract, limits, learned rate, breaker, retry
budget, coalescing.

See :class:`~aiostreams.services.service.Service`, :mod:`aiostreams.services.contract` and
``docs/guides/services.md``.
"""

from aiostreams.services.breaker import BreakerState, CircuitBreaker
from aiostreams.services.contract import RateHint, ServiceContract, Verdict
from aiostreams.services.declared import DeclaredService, ServiceOptions
from aiostreams.services.limit import Adaptive
from aiostreams.services.memo import Memo
from aiostreams.services.outcome import CircuitOpenError, HoldExpired, Outcome, Overloaded
from aiostreams.services.rate import RateLimit
from aiostreams.services.service import Service
from aiostreams.services.single_flight import SingleFlight

__all__ = ["Adaptive", "BreakerState", "CircuitBreaker", "CircuitOpenError", "DeclaredService",
           "HoldExpired", "Memo", "Outcome", "Overloaded", "RateHint", "RateLimit", "Service",
           "ServiceContract", "ServiceOptions", "SingleFlight", "Verdict"]
