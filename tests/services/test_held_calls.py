"""A call its service holds (issue 35's follow-ups), on a manual clock: a ``Retry-After``
is the refused call's own wait while the service takes calls; time held does not count
against the record's attempt timeout; a failure in a row with nothing between is marked a
suspected outage (the engine defers it rather than dead-letter it); a call cancelled
before it starts leaves no coroutine of the user's unawaited."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from aiostreams.engine.failure import Action, decide
from aiostreams.policies import OnError, Retry, mark_suspected_outage, suspected_outage
from aiostreams.processors.steps import call_when_run
from aiostreams.runtime.permit_wait import bind_attempt, unbind_attempt
from aiostreams.runtime.slot import CURRENT_SLOT
from aiostreams.services import CircuitBreaker, Overloaded, Service
from aiostreams.testing import ManualClock, settle


class Answers:
    """A call that answers each time as the list says: a value, or an exception."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.at: list[float] = []

    def __call__(self, clock: ManualClock):  # type: ignore[no-untyped-def]
        async def run() -> Any:
            self.at.append(clock.monotonic())
            answer = self.answers.pop(0)
            if isinstance(answer, BaseException):
                raise answer
            return answer
        return run


async def test_retry_after_holds_the_refused_call_not_the_calls_the_service_takes() -> None:
    clock = ManualClock()
    service = Service("s", concurrency=4, clock=clock)
    assert await service.call(Answers("ok")(clock)) == "ok"  # it takes calls
    refused = Answers(Overloaded("s", "429", retry_after=1.0), "late")
    held = asyncio.ensure_future(service.call(refused(clock)))
    await settle()
    other = Answers("on time")  # after the guess's interval, not the held call's second
    on_time = asyncio.ensure_future(service.call(other(clock)))
    for _ in range(5):  # the clock in small steps: a timer fires at most 0.05 s late
        clock.advance(0.05)
        await settle()
    assert on_time.result() == "on time" and not held.done()
    assert other.at[0] - refused.at[0] <= 0.25
    clock.advance(0.8)
    await settle()
    assert held.result() == "late" and refused.at[-1] - refused.at[0] >= 1.0


class Attempt:
    """The record's attempt timeout, as the engine binds it: counts pauses."""

    def __init__(self) -> None:
        self.paused = False
        self.pauses = 0

    def pause(self) -> None:
        if not self.paused:
            self.paused, self.pauses = True, self.pauses + 1

    def resume(self) -> None:
        self.paused = False


async def test_time_held_does_not_count_against_the_attempt_timeout() -> None:
    clock = ManualClock()
    service = Service("s", concurrency=4, timeout=0.5, clock=clock)
    paused_during: list[bool] = []
    attempt = Attempt()

    async def call() -> str:
        paused_during.append(attempt.paused)
        if len(paused_during) < 3:
            raise Overloaded("s", "429")
        return "ok"

    async def record() -> str:
        token = bind_attempt(attempt)
        try:
            return await service.call(call)
        finally:
            unbind_attempt(token)

    done = asyncio.ensure_future(record())
    while not done.done():
        await settle()
        clock.advance(0.05)
    assert done.result() == "ok"
    # the first dispatch counts (it is the attempt's); once held, the re-dispatches do not
    assert paused_during == [False, True, True] and not attempt.paused


class FakeSlot:
    trace = None  # an untraced record


async def test_failures_in_a_row_are_a_suspected_outage_until_another_call_succeeds(
) -> None:
    clock = ManualClock()
    service = Service("s", concurrency=4, breaker=CircuitBreaker(consecutive_failures=50),
                      clock=clock)
    slot = FakeSlot()

    async def attempt_of(record: object, answer: Any) -> BaseException | None:
        token = CURRENT_SLOT.set(record)  # type: ignore[arg-type]
        try:
            await service.call(Answers(answer)(clock))
        except Exception as error:
            return error
        finally:
            CURRENT_SLOT.reset(token)
        return None

    first = await attempt_of(slot, ConnectionError("down"))
    second = await attempt_of(slot, ConnectionError("down"))
    assert first is not None and suspected_outage(first)
    assert second is not None and suspected_outage(second)  # nothing succeeded between
    assert await attempt_of(FakeSlot(), "ok") is None  # the service answers others
    own = await attempt_of(slot, ConnectionError("its own"))
    assert own is not None and not suspected_outage(own)  # so this failure is the record's


def test_a_record_out_of_attempts_in_a_suspected_outage_is_deferred_not_dead_lettered(
) -> None:
    error = ConnectionError("down")
    retry = Retry(attempts=1)
    policy: dict[str, Any] = {"is_record": True, "attempts": 1, "retry": retry,
                              "on_error": OnError.DEAD_LETTER, "dead_letter_topic": "dlq"}
    assert decide(error, **policy).action is Action.DEAD_LETTER
    mark_suspected_outage(error)
    assert decide(error, **policy).action is Action.DEFER


async def test_a_call_cancelled_before_it_starts_makes_no_coroutine_of_the_users() -> None:
    made: list[int] = []

    async def score(n: int) -> int:
        made.append(n)
        return n

    task = asyncio.ensure_future(call_when_run(score, 1)())
    task.cancel()  # before its first step: as a held record's call at shutdown
    await asyncio.gather(task, return_exceptions=True)
    gc.collect()  # an unawaited coroutine would warn here (warnings are errors)
    assert made == [] and task.cancelled()
    assert await call_when_run(score, 2)() == 2 and made == [2]


async def test_the_users_own_exceptions_neither_open_the_breaker_nor_are_held() -> None:
    class UnknownCustomer(Exception):
        """Raised by the user's code after a 404: the service answered."""

    clock = ManualClock()
    service = Service("s", concurrency=4, breaker=CircuitBreaker(consecutive_failures=2),
                      clock=clock)
    for _ in range(3):  # three in a row: a probe that failed for ever kept it open before
        call = asyncio.ensure_future(service.call(Answers(UnknownCustomer("ghost"))(clock)))
        await settle()
        assert call.done() and isinstance(call.exception(), UnknownCustomer)
    assert service.breaker_state.value == "closed" and service.stats.held_total == 0
