"""A step's call that fails in an outage (the breaker is not closed) holds its record until
the service is back, instead of failing it into the dead-letter topic; ordinary failures
still go to the step's retry policy. Manual clock, no sleeps."""

from __future__ import annotations

import asyncio

import pytest

from aiostreams import Retry
from aiostreams.engine.failure import Action, decide
from aiostreams.policies import OnError
from aiostreams.processors.service_caller import ServiceCaller
from aiostreams.processors.steps import StepLimiter
from aiostreams.services import (
    Adaptive,
    BreakerState,
    CircuitBreaker,
    DeclaredService,
    HoldExpired,
    Outcome,
    Overloaded,
    Service,
)
from aiostreams.testing import ManualClock, settle


class Switchable:
    """A lookup that fails with ConnectionError while ``down``."""

    def __init__(self) -> None:
        self.down = False
        self.calls = 0
        self.gate: asyncio.Future[None] | None = None

    async def lookup(self, v: str) -> str:
        self.calls += 1
        if self.gate is not None:
            await self.gate
        if self.down:
            raise ConnectionError("service down")
        return v.upper()


def caller(clock: ManualClock) -> tuple[ServiceCaller, DeclaredService]:
    declared = DeclaredService("s", concurrency=10, clock=clock, breaker=CircuitBreaker(
        failure_ratio=0.5, min_calls=2, cool_down=5.0))
    return ServiceCaller(StepLimiter(None), declared, None), declared


async def test_calls_failing_in_an_outage_are_held_and_answered_after_recovery() -> None:
    clock, backend = ManualClock(), Switchable()
    step, declared = caller(clock)
    backend.down = True
    backend.gate = asyncio.get_running_loop().create_future()
    records = [asyncio.ensure_future(step.call(backend.lookup, (f"v{i}",), None))
               for i in range(4)]
    await settle()
    backend.gate.set_result(None)  # all four fail together: the breaker opens
    await settle(6)
    service = declared.current
    assert service is not None and service.breaker_state is BreakerState.OPEN
    # the first failure came with the breaker still closed (1 call < min_calls): the
    # step's Retry has it (its next attempt would wait for the breaker); the rest are held
    assert isinstance(records[0].exception(), ConnectionError)
    held = records[1:]
    assert not any(r.done() for r in held)  # held, not failed
    clock.advance(5.0)  # the cool-down: one probe goes out, and fails
    await settle(6)
    assert service.breaker_state is BreakerState.OPEN and not any(r.done() for r in held)
    backend.down = False
    clock.advance(5.0)  # the next probe succeeds and the held calls go out
    await settle(10)
    assert [r.result() for r in held] == ["V1", "V2", "V3"]
    assert service.breaker_state is BreakerState.CLOSED
    assert service.stats.held_by_breaker >= 3


async def test_a_failure_with_the_breaker_closed_goes_to_the_steps_retry() -> None:
    clock, backend = ManualClock(), Switchable()
    step, declared = caller(clock)
    backend.down = True
    with pytest.raises(ConnectionError):  # one failure: below min_calls, still closed
        await step.call(backend.lookup, ("v",), None)
    service = declared.current
    assert service is not None and service.breaker_state is BreakerState.CLOSED


async def test_an_overloaded_answer_holds_the_record_even_with_the_breaker_closed() -> None:
    clock = ManualClock()
    step, declared = caller(clock)
    answers = iter([Overloaded("s", "503", retry_after=2.0), "ok"])

    async def once(v: str) -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    record = asyncio.ensure_future(step.call(once, ("v",), None))
    await settle()
    assert not record.done()  # held: dispatch pauses for the Retry-After
    clock.advance(1.9)
    await settle()
    assert not record.done()
    clock.advance(0.1)
    await settle(6)
    assert record.result() == "ok"  # called again, not failed
    service = declared.current
    assert service is not None and service.breaker_state is BreakerState.CLOSED
    assert service.stats.outcomes[Outcome.OVERLOADED] == 1
    assert service.stats.held_total == 1 and service.held == 0


async def test_the_breaker_opens_at_one_call_a_second_and_holds_the_record() -> None:
    # issue 35: all payments on one card, the service down, one call a second: min_calls
    # was never reached in the window and every record was dead-lettered
    clock, backend = ManualClock(), Switchable()
    declared = DeclaredService("s", concurrency=10, clock=clock,
                               breaker=CircuitBreaker(cool_down=5.0))  # defaults: 5 in a row
    step = ServiceCaller(StepLimiter(None), declared, None)
    backend.down = True
    for _ in range(4):  # the step's Retry has these (its attempts 1-4)
        with pytest.raises(ConnectionError):
            await step.call(backend.lookup, ("v",), None)
        clock.advance(1.0)
    service = declared.current
    assert service is not None and service.breaker_state is BreakerState.CLOSED
    fifth = asyncio.ensure_future(step.call(backend.lookup, ("v",), None))
    await settle()
    assert service.breaker_state is BreakerState.OPEN and not fifth.done()  # held
    backend.down = False
    clock.advance(5.0)
    await settle(6)
    assert fifth.result() == "V"


async def test_a_record_held_past_max_hold_fails_to_on_error_without_a_retry() -> None:
    clock, backend = ManualClock(), Switchable()
    declared = DeclaredService("s", concurrency=10, clock=clock, max_hold=12.0,
                               breaker=CircuitBreaker(consecutive_failures=1, cool_down=5.0))
    step = ServiceCaller(StepLimiter(None), declared, None)
    backend.down = True
    record = asyncio.ensure_future(step.call(backend.lookup, ("v",), None))
    await settle()
    for _ in range(2):  # probes at 5 s and 10 s fail: still held
        clock.advance(5.0)
        await settle(6)
        assert not record.done()
    clock.advance(2.0)
    await settle(6)
    error = record.exception()
    assert isinstance(error, HoldExpired) and "max_hold" in str(error)
    assert not Retry(attempts=5).should_retry(error, 1)  # on_error decides at once
    # ...whatever the policy: with attempts left, and though it failed in an outage
    for on_error, action in ((OnError.DEAD_LETTER, Action.DEAD_LETTER),
                             (OnError.SKIP, Action.SKIP), (OnError.FAIL, Action.FAIL)):
        decision = decide(error, is_record=True, attempts=1, retry=Retry(attempts=5),
                          on_error=on_error, dead_letter_topic="dlq")
        assert decision.action is action


async def test_one_hung_call_among_answers_does_not_cut_the_concurrency_limit() -> None:
    clock = ManualClock()
    service = Service("s", concurrency=Adaptive(initial=20, min=2, max=100), timeout=1.0,
                      clock=clock)
    hang = asyncio.get_running_loop().create_future()  # never answers

    async def answer() -> str:
        return "ok"

    async def hung() -> str:
        return await hang  # type: ignore[no-any-return]

    for i in range(40):  # 2.5% of calls hang, each timing out after 1 s
        call = asyncio.ensure_future(service.call(hung if i % 40 == 39 else answer))
        await settle()
        clock.advance(1.0 if i % 40 == 39 else 0.01)
        await settle()
        if i % 40 == 39:
            assert isinstance(call.exception(), TimeoutError)
    assert service.limit == 20 and service.stats.outcomes[Outcome.TIMEOUT] == 1
