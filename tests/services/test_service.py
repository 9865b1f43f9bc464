"""A declared service on a manual clock: permits, timeouts from dispatch, the breaker holding
callers instead of failing them, the retry budget, and coalescing. No sleeps: the clock moves
only when a test advances it, and ``settle`` lets the loop run what is due."""

from __future__ import annotations

import asyncio

import pytest

from aiostreams.runtime.permit_wait import bind_executor
from aiostreams.services import (
    Adaptive,
    BreakerState,
    CircuitBreaker,
    Overloaded,
    RateLimit,
    Service,
    SingleFlight,
)
from aiostreams.services.outcome import Outcome
from aiostreams.testing import ManualClock, settle


class Backend:
    """Calls that end when the test says: each is a future keyed by its number."""

    def __init__(self) -> None:
        self.pending: dict[int, asyncio.Future[str]] = {}
        self.out = 0
        self.most_out = 0
        self.made = 0

    def call(self, n: int):  # type: ignore[no-untyped-def]
        async def run() -> str:
            self.made += 1
            self.out += 1
            self.most_out = max(self.most_out, self.out)
            future = asyncio.get_running_loop().create_future()
            self.pending[n] = future
            try:
                return await future
            finally:
                self.out -= 1
        return run

    def answer(self, n: int, value: str | BaseException = "ok") -> None:
        future = self.pending.pop(n)
        if isinstance(value, BaseException):
            future.set_exception(value)
        else:
            future.set_result(value)


async def test_calls_beyond_the_concurrency_limit_wait_for_a_place() -> None:
    service, backend = Service("s", concurrency=3, clock=ManualClock()), Backend()
    calls = [asyncio.ensure_future(service.call(backend.call(i))) for i in range(10)]
    await settle()
    assert (backend.out, service.in_flight, service.waiting) == (3, 3, 7)
    for i in range(10):
        backend.answer(i)
        await settle()
    assert [c.result() for c in calls] == ["ok"] * 10
    assert backend.most_out == 3


async def test_the_timeout_starts_at_dispatch_not_while_queued_for_a_permit() -> None:
    clock, backend = ManualClock(), Backend()
    service = Service("s", concurrency=1, timeout=0.5, clock=clock)
    first = asyncio.ensure_future(service.call(backend.call(0)))
    second = asyncio.ensure_future(service.call(backend.call(1)))
    await settle()
    clock.advance(0.4)
    backend.answer(0)
    await settle()
    clock.advance(0.4)  # the second has waited 0.8 s in all, 0.4 s since its dispatch
    await settle()
    backend.answer(1)
    await settle()
    assert (first.result(), second.result()) == ("ok", "ok")
    third = asyncio.ensure_future(service.call(backend.call(2)))
    await settle()
    clock.advance(0.5)
    await settle()
    with pytest.raises(TimeoutError, match=r"within 0\.5 s of the call.s dispatch"):
        third.result()
    assert service.stats.outcomes[Outcome.TIMEOUT] == 1
    assert backend.out == 0  # the timed-out call was cancelled, not left running


async def test_an_open_breaker_holds_callers_until_a_probe_succeeds() -> None:
    clock, backend = ManualClock(), Backend()
    service = Service("s", concurrency=10, clock=clock,
                      breaker=CircuitBreaker(failure_ratio=0.5, min_calls=2, cool_down=5.0))
    first = asyncio.ensure_future(service.call(backend.call(0)))
    await settle()
    backend.answer(0, ConnectionError("down"))
    await settle()
    with pytest.raises(ConnectionError):  # the breaker still closed: the step's Retry's
        first.result()
    opener = asyncio.ensure_future(service.call(backend.call(1)))
    await settle()
    backend.answer(1, ConnectionError("down"))
    await settle()
    assert service.breaker_state is BreakerState.OPEN
    assert not opener.done() and service.held == 1  # it opened the breaker: held
    held = [asyncio.ensure_future(service.call(backend.call(10 + i))) for i in range(3)]
    await settle()
    assert backend.out == 0 and not any(h.done() for h in held)  # waiting, not failed
    assert service.held == 4
    clock.advance(5.0)
    await settle()
    assert backend.out == 1 and service.breaker_state is BreakerState.HALF_OPEN  # one probe
    probe = next(iter(backend.pending))
    backend.answer(probe)
    await settle()
    assert service.breaker_state is BreakerState.CLOSED
    for n in list(backend.pending):
        backend.answer(n)
    await settle()
    assert [h.result() for h in [opener, *held]] == ["ok"] * 4
    assert service.held == 0


async def test_the_rate_limit_spaces_dispatches() -> None:
    clock, backend = ManualClock(), Backend()
    service = Service("s", concurrency=100, rate=RateLimit(2, per=1.0, burst=1), clock=clock)
    calls = [asyncio.ensure_future(service.call(backend.call(i))) for i in range(4)]
    await settle()
    assert backend.made == 1
    clock.advance(0.5)
    await settle()
    assert backend.made == 2
    clock.advance(1.0)
    await settle()
    assert backend.made == 4
    for i in range(4):
        backend.answer(i)
    await settle()
    assert all(c.done() for c in calls)


async def test_a_retry_beyond_the_budget_is_held_until_the_budget_refills() -> None:
    clock = ManualClock()
    service, backend = Service("s", retry_budget=0.0, clock=clock), Backend()
    budget = service.budget
    assert budget is not None
    budget.min_per_second = 0.1  # one retry in a 10 s window
    first = asyncio.ensure_future(service.call(backend.call(0), attempt=1))
    await settle()
    backend.answer(0)
    await settle()
    assert first.result() == "ok"
    held = asyncio.ensure_future(service.call(backend.call(1), attempt=1))
    for _ in range(39):  # 9.75 s: the first retry is still in the window
        clock.advance(0.25)
        await settle()
    assert not held.done() and backend.made == 1 and service.waiting == 1
    assert service.stats.retries_refused == 1
    clock.advance(0.25)  # 10 s: the first retry's second leaves the window
    await settle()
    assert backend.made == 2 and service.waiting == 0
    backend.answer(1)
    await settle()
    assert held.result() == "ok"


async def test_a_held_retry_waits_as_for_a_permit_and_cancelling_it_takes_no_budget(
        ) -> None:
    clock = ManualClock()
    service = Service("s", retry_budget=0.0, clock=clock)
    budget = service.budget
    assert budget is not None
    budget.min_per_second = 0.1
    assert budget.try_retry(clock.monotonic())  # the one retry of the window, spent
    parked: list[int] = []
    bind_executor(parked.append)
    held = asyncio.ensure_future(service.call(Backend().call(0), attempt=1))
    await settle()
    assert parked == [1]  # its executor is parked while the budget holds it
    held.cancel()
    await settle()
    assert parked == [1, -1] and service.waiting == 0
    for _ in range(41):
        clock.advance(0.25)
    assert budget.try_retry(clock.monotonic())  # the window refilled; nothing was taken


async def test_the_adaptive_limit_lowers_on_busy_answers_while_in_use() -> None:
    clock, backend = ManualClock(), Backend()
    service = Service("s", concurrency=Adaptive(initial=20, min=2, max=100), clock=clock)

    class AllBusy(Exception):
        status = 503  # every worker busy: a concurrency, not a rate

    calls = [asyncio.ensure_future(service.call(backend.call(i))) for i in range(20)]
    await settle()
    clock.advance(0.01)
    backend.answer(1, "ok")  # it takes calls: its 503 is about how many at once
    await settle()
    backend.answer(0, AllBusy())
    await settle()
    assert service.limit < 20 and not calls[0].done()  # cut; the record is held
    assert service.learned.rate is None  # and no rate learned from it
    for c in calls:
        c.cancel()
    await settle()


async def test_a_429_with_one_call_out_does_not_cut_the_concurrency_limit() -> None:
    clock, backend = ManualClock(), Backend()
    service = Service("s", concurrency=Adaptive(initial=20, min=2, max=100), clock=clock)
    call = asyncio.ensure_future(service.call(backend.call(0)))
    await settle()
    clock.advance(0.01)
    backend.answer(0, Overloaded("s", "rate", retry_after=1.0))
    await settle()
    assert service.limit == 20  # a rate-bound refusal: the learned rate's, not the limit's
    clock.advance(1.0)
    await settle()
    backend.answer(0)
    await settle()
    assert call.result() == "ok"


async def test_callers_of_one_key_share_one_call_and_each_gets_its_answer() -> None:
    flights: SingleFlight[str] = SingleFlight()
    backend = Backend()
    a = asyncio.ensure_future(flights.run("k", backend.call(0)))
    b = asyncio.ensure_future(flights.run("k", backend.call(1)))
    c = asyncio.ensure_future(flights.run("other", backend.call(2)))
    await settle()
    assert backend.made == 2 and flights.shared == 1
    backend.answer(0, "for k")
    backend.answer(2, "for other")
    await settle()
    assert (a.result(), b.result(), c.result()) == ("for k", "for k", "for other")
    assert len(flights) == 0  # the next caller for k makes a new call


async def test_a_cancelled_waiter_leaves_the_shared_call_to_the_others() -> None:
    flights: SingleFlight[str] = SingleFlight()
    backend = Backend()
    a = asyncio.ensure_future(flights.run("k", backend.call(0)))
    b = asyncio.ensure_future(flights.run("k", backend.call(1)))
    await settle()
    a.cancel()
    await settle()
    assert 0 in backend.pending  # still running for b
    backend.answer(0, "v")
    await settle()
    assert b.result() == "v" and a.cancelled()
    c = asyncio.ensure_future(flights.run("k", backend.call(2)))
    await settle()
    c.cancel()
    await settle()
    assert backend.out == 0 and len(flights) == 0  # nobody left: the call was cancelled
