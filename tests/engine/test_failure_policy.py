"""The failure policy alone: ``decide`` is a pure function of the failed attempt."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aiostreams.engine.failure import Action, Decision, Deferred, decide
from aiostreams.errors import DeserializationError
from aiostreams.policies import OnError, Retry

RETRY3 = Retry(attempts=3, backoff=1.0, multiplier=2.0, jitter=0.0)


def decision(error: BaseException, *, attempts: int = 1, retry: Retry = RETRY3,
             on_error: OnError = OnError.FAIL, dead_letter_topic: str | None = "dlq",
             is_record: bool = True) -> Decision:
    return decide(error, is_record=is_record, attempts=attempts, retry=retry,
                  on_error=on_error, dead_letter_topic=dead_letter_topic, rng=lambda: 0.5)


def test_a_deferred_record_is_deferred_by_its_own_delay_whatever_the_attempts() -> None:
    assert decision(Deferred(2.5), attempts=99) == Decision(Action.DEFER, 2.5)


def test_a_failed_record_is_retried_with_exponential_backoff_while_attempts_remain() -> None:
    assert decision(ValueError(), attempts=1) == Decision(Action.RETRY, 1.0)
    assert decision(ValueError(), attempts=2) == Decision(Action.RETRY, 2.0)
    assert decision(ValueError(), attempts=3).action is Action.FAIL


def test_an_undecodable_record_is_never_retried() -> None:
    error = DeserializationError("bad bytes", topic="in")
    assert decision(error, on_error=OnError.SKIP) == Decision(Action.SKIP)


def test_an_error_outside_retry_on_goes_straight_to_the_handler() -> None:
    retry = Retry(attempts=5, retry_on=(TimeoutError,))
    got = decision(ValueError(), retry=retry, on_error=OnError.DEAD_LETTER)
    assert got == Decision(Action.DEAD_LETTER)


def test_dead_letter_without_a_topic_fails_the_task() -> None:
    got = decision(ValueError(), attempts=3, on_error=OnError.DEAD_LETTER,
                   dead_letter_topic=None)
    assert got.action is Action.FAIL


def test_a_punctuation_is_never_retried_deferred_or_dead_lettered() -> None:
    for error in (Deferred(1.0), ValueError()):
        got = decision(error, is_record=False, on_error=OnError.DEAD_LETTER)
        assert got.action is Action.FAIL
    assert decision(ValueError(), is_record=False, on_error=OnError.SKIP).action is Action.SKIP


@given(attempts=st.integers(min_value=1, max_value=10),
       handler=st.sampled_from(list(OnError)), record=st.booleans())
def test_the_decision_depends_only_on_its_arguments(attempts: int, handler: OnError,
                                                    record: bool) -> None:
    first = decision(ValueError("x"), attempts=attempts, on_error=handler, is_record=record)
    again = decision(ValueError("x"), attempts=attempts, on_error=handler, is_record=record)
    assert first == again
    retried = record and attempts < RETRY3.attempts
    assert (first.action is Action.RETRY) == retried
