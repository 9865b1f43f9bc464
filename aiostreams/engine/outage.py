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

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiostreams.engine.clock import Clock
from aiostreams.errors import (
    BrokerUnavailableError,
    CommitFailedError,
    ProducerFencedError,
    TransportError,
    UnknownTopicError,
)

log = logging.getLogger("aiostreams.worker")

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


async def ride_out(step: Callable[[], Awaitable[None]], *, stopping: asyncio.Event,
                   transient: Callable[[TransportError], bool], clock: Clock,
                   broker_timeout: float, on_retry: Callable[[], None]) -> Exception | None:
    """Run ``step`` again and again until ``stopping`` is set, riding out transient broker
    trouble: a :class:`TransportError` that ``transient`` accepts is retried with backoff
    (``on_retry`` first: e.g. ask for the interrupted commit again) for up to
    ``broker_timeout`` seconds of continuous trouble. Returns the error that ends the run
    (anything else, or an outage longer than that), or None once ``stopping`` is set.

    Cancellation: propagates at once (``step`` is cancelled where it is)."""
    outage: Outage | None = None
    while not stopping.is_set():
        try:
            await step()
            if outage is not None:
                log.warning("worker: the broker is back after %.1fs",
                            clock.monotonic() - outage.since)
                outage = None
        except asyncio.CancelledError:
            raise
        except TransportError as e:
            if not transient(e):
                log.error("worker: stopping: %s", e)
                return e
            now = clock.monotonic()
            if outage is None:
                outage = Outage(now)
                log.warning("worker: broker trouble, retrying for up to %.0fs: %s",
                            broker_timeout, e)
            if now - outage.since > broker_timeout:
                log.error("worker: the broker has been unreachable for %.0fs; stopping: %s",
                          now - outage.since, e)
                return e
            on_retry()
            await asyncio.sleep(outage.next_backoff())
        except Exception as e:  # a bug, or a failure we cannot ride out: stop cleanly
            log.exception("worker: fetch loop failed")
            return e
    return None
