"""Per-attempt timeouts for thousands of concurrent attempts, at the cost of a dict entry.

``asyncio.timeout`` schedules a timer per use: with a reorder buffer of 1,000 attempts in
flight, each attempt pays a push into (and a cancelled entry left in) the event loop's timer
heap: measured here (CPU time, 1,000 tasks awaiting ``sleep(0)`` 100 times each), 1.3 µs per
await bare, 7.4-8.1 µs inside ``asyncio.timeout(300)``, 2.8-3.0 µs inside ``bound(300)``. An
engine that bounds every async attempt by default (``processing_timeout``) should not pay
the former.

:class:`CoarseTimeouts` gives the same contract as ``asyncio.timeout`` -- the block is
cancelled once its deadline passes and ``TimeoutError`` comes out of it; a cancellation from
elsewhere still comes out as ``CancelledError`` -- with one timer per owner instead of one per
block: a sweep every ``granularity`` seconds, while blocks are open, cancels those past their
deadline. So a block times out between ``timeout`` and ``timeout + granularity`` seconds after
it was entered; :func:`granularity_for` keeps that slack to a tenth of the timeout.

An executor runs thousands of attempts one after another, each bounded the same way: its
:class:`ExecutorBlock` stays registered with the owner for the executor's life, and an
attempt opens and closes it with plain attribute stores (the protocol is in the class
docstring), which saves the two calls of a ``with`` and a dict insert and delete per
attempt.

Time is the event loop's clock (as ``asyncio.timeout``'s).
"""

from __future__ import annotations

import asyncio
from types import TracebackType

__all__ = ["CoarseTimeouts", "ExecutorBlock", "granularity_for"]

_CLOSED = float("inf")  # the deadline of an executor block between attempts


def granularity_for(timeout: float) -> float:
    """The sweep interval for ``timeout``: a tenth of it, within [1 ms, 1 s]."""
    return min(1.0, max(0.001, timeout / 10))


class CoarseTimeouts:
    """Deadlines of open :meth:`bound` blocks, swept every ``granularity`` seconds.

    Invariants: ``_open`` holds exactly the ``bound`` blocks entered and not yet exited,
    ``_executors`` every executor block not yet released; a sweep timer (``sweep``) is
    pending whenever ``_open`` is not empty or an executor block is in an attempt (the sweep
    re-arms only then; an attempt that finds none pending arms one); a block is cancelled at
    most once per entry, and only once its deadline has passed.
    """

    def __init__(self, granularity: float) -> None:
        if granularity <= 0:
            raise ValueError(f"granularity must be > 0 seconds, got {granularity}")
        self.granularity = granularity
        self._open: dict[_Bound, None] = {}
        self._executors: dict[ExecutorBlock, None] = {}
        self.sweep: asyncio.TimerHandle | None = None
        """The pending sweep timer; None when no block is open."""

    def bound(self, timeout: float) -> _Bound:
        """``with timeouts.bound(seconds):`` inside a task -- as ``async with
        asyncio.timeout(seconds):`` (a plain ``with``: entering and leaving await nothing,
        which saves two coroutines per block). The block may be entered again after it
        exits, each time with a fresh deadline of ``timeout`` seconds.

        Cancellation: a cancellation of the enclosing task that is not this block's own
        propagates unchanged (``CancelledError``)."""
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        return _Bound(self, timeout)

    def executor_block(self, timeout: float) -> ExecutorBlock:
        """The block bounding each attempt the current task (an executor) runs, registered
        until :meth:`ExecutorBlock.release`; see :class:`ExecutorBlock` for its protocol."""
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        block = ExecutorBlock(self, timeout)
        self._executors[block] = None
        return block

    @property
    def open_blocks(self) -> int:
        """``bound`` blocks entered and not exited, and executor blocks in an attempt."""
        return len(self._open) + sum(
            b.deadline != _CLOSED or b.paused_left is not None for b in self._executors)

    def arm(self) -> None:
        """Start sweeping (an executor block opened while no sweep was pending)."""
        if self.sweep is None:
            loop = asyncio.get_running_loop()
            self.sweep = loop.call_later(self.granularity, self._expire, loop)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        for block in list(self._open):
            if not block.expired and block.deadline <= now:
                block.expired = True
                block.task.cancel()
        attempts = False  # an executor block is in an attempt, with its clock running
        for executor in self._executors:
            deadline = executor.deadline
            assert not (executor.expired and deadline == _CLOSED), \
                "an executor block was closed without settling its expiry"
            if deadline != _CLOSED:
                attempts = True
                if not executor.expired and deadline <= now:
                    executor.expired = True
                    executor.task.cancel()
        self.sweep = loop.call_later(self.granularity, self._expire, loop) \
            if self._open or attempts else None


class _Bound:
    __slots__ = ("_cancelling", "_owner", "_paused_left", "deadline", "expired", "task",
                 "timeout")

    def __init__(self, owner: CoarseTimeouts, timeout: float) -> None:
        self._owner = owner
        self.timeout = timeout
        self.expired = False
        self.deadline = float("inf")  # set on entry
        self._paused_left: float | None = None

    def pause(self) -> None:
        """Stop the clock of this block (a record waiting for a service's permit is not
        executing, see :mod:`~aiostreams.runtime.permit_wait`) until :meth:`resume`. The
        time left is kept; a block already expired stays expired."""
        if self._paused_left is None and not self.expired:
            loop = asyncio.get_running_loop()
            self._paused_left = max(0.0, self.deadline - loop.time())
            self.deadline = float("inf")

    def resume(self) -> None:
        """Restart the clock with the time that was left when :meth:`pause` stopped it."""
        left, self._paused_left = self._paused_left, None
        if left is not None:
            self.deadline = asyncio.get_running_loop().time() + left

    def __enter__(self) -> None:
        # a block may be entered again once it has exited (an executor reuses one block for
        # every attempt it runs): each entry starts a fresh clock
        assert self not in self._owner._open, "a block was entered twice without an exit"
        self.expired = False
        self._paused_left = None
        loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("CoarseTimeouts.bound() must be used inside a task")
        self.task = task
        self._cancelling = task.cancelling()
        self.deadline = loop.time() + self.timeout
        owner = self._owner  # its _enter, inlined: this runs once per attempt
        owner._open[self] = None
        if owner.sweep is None:
            owner.sweep = loop.call_later(owner.granularity, owner._expire, loop)

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        owner = self._owner  # the owner's exit bookkeeping, inlined (once per attempt)
        del owner._open[self]
        if not owner._open and owner.sweep is not None and not any(
                b.deadline != _CLOSED for b in owner._executors):
            owner.sweep.cancel()
            owner.sweep = None
        if self.expired and self.task.uncancel() <= self._cancelling \
                and et is asyncio.CancelledError:
            raise TimeoutError(f"the block ran past its {self.timeout} s timeout") from e


class ExecutorBlock:
    """The timeout of the attempts one executor task runs one after another.

    Protocol, inline in the executor's loop (no call per attempt in the common case)::

        block.deadline = loop.time() + block.timeout      # open: the clock starts
        block.cancelling = block.task.cancelling()
        if block.owner.sweep is None:
            block.owner.arm()
        ...                                               # the attempt
        block.deadline = inf                              # close (before what follows)
        if block.expired:                                 # the sweep cancelled the attempt
            error = block.timed_out(cancelled)  # it ended in CancelledError: TimeoutError
            block.settle()                      # it ended otherwise

    :meth:`timed_out` re-raises a cancellation that was not the block's own (a cancellation
    of the executor from elsewhere stays a cancellation), as ``asyncio.timeout`` does.

    Invariants: ``deadline`` is finite exactly while an attempt runs with its clock going
    (``inf`` between attempts and while :meth:`pause` holds the time left); ``expired`` is
    set only by the sweep, during an attempt, and cleared when the attempt is settled.
    """

    __slots__ = ("cancelling", "deadline", "expired", "owner", "paused_left", "task",
                 "timeout")

    def __init__(self, owner: CoarseTimeouts, timeout: float) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("CoarseTimeouts.executor_block() must be called in a task")
        self.owner = owner
        self.task = task
        self.timeout = timeout
        self.deadline = _CLOSED
        self.cancelling = 0
        self.expired = False
        self.paused_left: float | None = None

    def pause(self) -> None:
        """Stop the clock of the attempt (it waits for a service's permit) until
        :meth:`resume`; an attempt already expired stays expired."""
        if self.paused_left is None and not self.expired and self.deadline != _CLOSED:
            self.paused_left = max(0.0, self.deadline - asyncio.get_running_loop().time())
            self.deadline = _CLOSED

    def resume(self) -> None:
        """Restart the clock with the time that was left when :meth:`pause` stopped it."""
        left, self.paused_left = self.paused_left, None
        if left is not None:
            self.deadline = asyncio.get_running_loop().time() + left
            self.owner.arm()

    def timed_out(self, cancelled: asyncio.CancelledError) -> TimeoutError:
        """The attempt ended in ``cancelled`` after the block expired: the error it ends
        with, or ``cancelled`` re-raised when another cancellation is pending too."""
        self.expired = False
        self.paused_left = None
        if self.task.uncancel() > self.cancelling:
            raise cancelled
        error = TimeoutError(f"the block ran past its {self.timeout} s timeout")
        error.__cause__ = cancelled
        return error

    def settle(self) -> None:
        """The attempt ended otherwise after the block expired: take back its cancel."""
        self.expired = False
        self.paused_left = None
        self.task.uncancel()

    def release(self) -> None:
        """The executor ends: the block is no longer swept."""
        self.deadline = _CLOSED
        del self.owner._executors[self]
