"""Micro-batching: ``map_values_batched_async(fn, service=svc, max_batch=100, max_wait=0.01)``.

Records reaching the step join the open batch; one call ``await fn([v1, v2, ...])`` is made
for it when it holds ``max_batch`` values or ``max_wait`` seconds (on the service's clock)
after its first value came, whichever is first, and must return one result per value, in
order. Each record gets its own result; results retire in each record's order (the reorder
buffer's guarantee, as for any async step). A record waiting for its batch to fill is not
executing (its executor parked, its attempt timeout paused, as for a permit:
:mod:`aiostreams.runtime.permit_wait`).

When a batch call fails, ``retry_per`` decides:

- ``"value"`` (default): every record of the batch fails with the error and follows its own
  retry policy (the step's ``Retry``): its next attempt joins a later batch;
- ``"batch"``: the same batch is called again, up to the step's ``Retry.attempts`` (each
  again through the service: a retry there, counted by its retry budget), and only then do
  its records fail.

When the app records service answers (or replays them), each record's own result passes
the service's ``tap`` (:mod:`aiostreams.services.call_tap`): recorded per record, as if it
had made a call of its own.

Tracing (``App(tracing=True)``): each traced record of a batch gets its own permit-wait and
call spans for the batch's call, marked with the batch's size and call id
(:mod:`aiostreams.engine.tracing`).

Invariant (asserted): a call's results are as many as its values; every submitted value's
future is resolved exactly once.
"""

from __future__ import annotations

import asyncio
import contextvars
import uuid
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Literal

from aiostreams.errors import ConfigError
from aiostreams.processors.steps import call_when_run
from aiostreams.runtime.clock import TimerHandle
from aiostreams.runtime.permit_wait import record_trace, waiting_for_permit
from aiostreams.runtime.trace_hooks import CallTrace, SlotTrace
from aiostreams.services.declared import DeclaredService
from aiostreams.services.service import Service

__all__ = ["BatchCaller", "RetryPer"]

RetryPer = Literal["value", "batch"]


class _Batcher:
    """The open batch of one step on one loop."""

    def __init__(self, owner: BatchCaller, service: Service) -> None:
        self.owner = owner
        self.service = service
        self.values: list[Any] = []
        self.futures: list[asyncio.Future[Any]] = []
        self.traces: list[_Traced] = []  # the traced records of the open batch
        self.timer: TimerHandle | None = None
        self.calls: set[asyncio.Task[None]] = set()

    def submit(self, fn: Callable[[list[Any]], Any], value: Any,
               trace: SlotTrace | None) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.values.append(value)
        self.futures.append(future)
        if trace is not None:  # its permit wait starts now: the batch fills, then the permit
            self.traces.append(_Traced(trace, trace.call(self.service.name, 0)))
        if len(self.values) >= self.owner.max_batch:
            self.flush(fn)
        elif self.timer is None:
            self.timer = self.service.clock.call_later(self.owner.max_wait,
                                                       lambda: self.flush(fn))
        return future

    def flush(self, fn: Callable[[list[Any]], Any]) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not self.values:
            return
        values, futures, traces = self.values, self.futures, self.traces
        self.values, self.futures, self.traces = [], [], []
        # a fresh context: the call is the batch's, not the record's that filled it (its
        # executor and attempt timeout must not be parked or paused by the call's waits)
        task = asyncio.get_running_loop().create_task(
            self._call(fn, values, futures, traces), context=contextvars.Context())
        self.calls.add(task)
        task.add_done_callback(self.calls.discard)

    async def _call(self, fn: Callable[[list[Any]], Any], values: list[Any],
                    futures: list[asyncio.Future[Any]], traces: list[_Traced]) -> None:
        owner = self.owner
        attempts = owner.attempts if owner.retry_per == "batch" else 1
        for attempt in range(attempts):
            trace = _BatchCallTrace.of(traces, attempt, self.service.name, len(values))
            try:
                results = await self.service.call(call_when_run(fn, list(values)),
                                                  attempt=attempt, timeout=owner.timeout,
                                                  trace=trace)
                results = _one_per_value(results, values, owner.op)
            except Exception as error:
                if attempt + 1 < attempts:
                    continue
                for future in futures:
                    if not future.done():
                        future.set_exception(error)
                return
            for future, result in zip(futures, results, strict=True):
                if not future.done():  # a record cancelled meanwhile needs no result
                    future.set_result(result)
            return


class _Traced:
    """A traced record of a batch and the trace of its first call (made when it joined)."""

    __slots__ = ("first", "record")

    def __init__(self, record: SlotTrace, first: CallTrace) -> None:
        self.record = record
        self.first = first


class _BatchCallTrace:
    """The trace of one batch call: each traced record's call trace, told together.

    Dispatched last to first, so the first record's call span is the current span while
    the batch function runs (the user's own spans are its children); ended first to last,
    which detaches the contexts back to the one before the call."""

    def __init__(self, members: list[CallTrace]) -> None:
        self.members = members

    @classmethod
    def of(cls, traces: list[_Traced], attempt: int, service: str,
           size: int) -> _BatchCallTrace | None:
        if not traces:
            return None
        members = [t.first if attempt == 0 else t.record.call(service, attempt)
                   for t in traces]
        call = cls(members)
        call.in_batch(size, uuid.uuid4().hex[:16])
        return call

    def in_batch(self, size: int, call_id: str) -> None:
        for member in self.members:
            member.in_batch(size, call_id)

    def dispatched(self) -> None:
        for member in reversed(self.members):
            member.dispatched()

    def ended(self, outcome: str, error: BaseException | None) -> None:
        for member in self.members:
            member.ended(outcome, error)


def _one_per_value(results: Any, values: Sequence[Any], op: str) -> list[Any]:
    answered: list[Any] = list(results)
    if len(answered) != len(values):
        raise ValueError(f"{op}: the batch function returned {len(answered)} results for "
                         f"{len(values)} values; return one result per value, in order")
    return answered


class BatchCaller:
    """The call path of one ``map_values_batched_async`` step (a step caller)."""

    def __init__(self, service: DeclaredService, *, max_batch: int,
                 max_wait: float, retry_per: RetryPer, attempts: int, timeout: float | None,
                 op: str) -> None:
        if max_batch < 1:
            raise ConfigError(f"{op}: max_batch must be >= 1, got {max_batch}")
        if not max_wait > 0:
            raise ConfigError(f"{op}: max_wait must be positive seconds, got {max_wait}")
        if retry_per not in ("value", "batch"):
            raise ConfigError(f"{op}: retry_per is 'value' or 'batch', got {retry_per!r}")
        self.service = service
        self.max_batch = max_batch
        self.max_wait = max_wait
        self.retry_per = retry_per
        self.attempts = max(1, attempts)
        self.timeout = timeout
        self.op = op
        self._batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batcher] = (
            weakref.WeakKeyDictionary())

    async def call(self, fn: Callable[..., Any], args: tuple[Any, ...],
                   timeout: float | None, context: Any = None) -> Any:
        """The result for the one value in ``args``, from its batch's call."""
        tap = self.service.tap
        if tap is not None:  # recorded, or answered from a recording (services.call_tap)
            return await tap.answer(self.service.name, None,
                                    lambda: self._batched(fn, args))
        return await self._batched(fn, args)

    async def _batched(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        (value,) = args
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            batcher = self._batchers[loop] = _Batcher(self, self.service.on_loop())
        future = batcher.submit(fn, value, record_trace())
        with waiting_for_permit():  # not executing while the batch fills and is called
            return await asyncio.shield(future)
