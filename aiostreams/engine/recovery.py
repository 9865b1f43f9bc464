"""Which broker trouble a worker rides out, and for how long.

* a failed **send or flush** is answered by starting its tasks again from their last
  commit (a rewind), for as long as the trouble has lasted at most ``broker_timeout``
  since the last successful commit - except fencing (the task is lost instead) and a
  missing topic (it would fail again);
* any other failure that passes with time (a timeout, a dropped connection, a coordinator
  moving) is retried with backoff (:class:`Outage`) for up to ``broker_timeout`` seconds of
  continuous trouble - at-least-once only: under exactly-once a transactional commit's
  outcome is in doubt, so the worker stops and a restart resumes from the last committed
  transaction;
* anything else stops the worker.
"""

from __future__ import annotations

from aiostreams.errors import (
    BrokerUnavailableError,
    CommitFailedError,
    ProducerFencedError,
    UnknownTopicError,
)

_CONNECTION_ERRORS = frozenset({"KafkaConnectionError", "NodeNotReadyError",
                                "KafkaTimeoutError", "RequestTimedOutError"})


class Outage:
    """A stretch of continuous broker trouble, with exponential backoff (0.1 s → 5 s)."""

    def __init__(self, since: float) -> None:
        self.since = since
        self._backoff = 0.1

    def next_backoff(self) -> float:
        delay = self._backoff
        self._backoff = min(5.0, self._backoff * 2)
        return delay


def rewindable(error: BaseException, rewinding_since: float | None, now: float,
               broker_timeout: float) -> bool:
    """Whether a failed send or flush is answered by a rewind: any failure of the
    producer - including the odd ``RuntimeError`` aiokafka raises on a connection reset
    mid-request - but fencing or a missing topic, while the trouble since the last
    successful commit (``rewinding_since``: the first rewind since then) is young."""
    if isinstance(error, ProducerFencedError | UnknownTopicError):
        return False
    return rewinding_since is None or now - rewinding_since <= broker_timeout


def retriable(error: BaseException) -> bool:
    """A failure that passes with time (a timeout, a dropped connection), whatever the
    processing guarantee: fencing, missing topics and refused commits do not."""
    if isinstance(error, ProducerFencedError | UnknownTopicError | CommitFailedError):
        return False
    cause = error.__cause__ or error.__context__
    if type(cause).__name__ == "IllegalOperation":
        # "not in transaction": the coordinator aborted the open transaction under the
        # producer (a timeout, or a fence it has not reported yet): start again from the
        # last committed one
        return True
    flag = getattr(cause, "retriable", None)
    if isinstance(flag, bool):
        return flag or type(cause).__name__ in _CONNECTION_ERRORS
    return isinstance(error, BrokerUnavailableError) or isinstance(
        cause, ConnectionError | TimeoutError)
