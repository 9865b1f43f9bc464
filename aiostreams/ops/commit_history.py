"""What an app keeps and tells of its commits: the latest ones (``App.commit_log``), and the
listeners (``App.on_commit``) called with each.

Invariants: the log (whatever list ``App.commit_log`` is at each commit: a test may set
its own) holds at most :data:`COMMIT_LOG_LIMIT` entries, the latest ones, in commit order,
and is trimmed in place; every listener is called once per commit, in the order they were added; a
coroutine function is refused as a listener (it would be called, never awaited).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from aiostreams.engine.worker_config import CommitRecord
from aiostreams.errors import ConfigError

__all__ = ["COMMIT_LOG_LIMIT", "CommitHistory"]

COMMIT_LOG_LIMIT = 1000
"""How many of the latest commits ``App.commit_log`` keeps (older ones are dropped; to see
every commit, use :meth:`App.on_commit`)."""


class CommitHistory:
    """The latest commits, kept in the list ``log()`` returns, and the listeners told of
    each (see the module docstring)."""

    def __init__(self, log: Callable[[], list[CommitRecord]]) -> None:
        self._log = log
        self._listeners: list[Callable[[CommitRecord], None]] = []

    def listen(self, listener: Callable[[CommitRecord], None]) -> None:
        if inspect.iscoroutinefunction(listener):
            raise ConfigError(
                f"on_commit() got the coroutine function "
                f"{getattr(listener, '__name__', listener)!r}: a commit listener is called, "
                "not awaited, inside the commit; pass a plain def (it may start a task)")
        self._listeners.append(listener)

    def committed(self, entry: CommitRecord) -> None:
        """Keep ``entry`` (dropping the oldest past the limit), then tell every listener."""
        log = self._log()
        log.append(entry)
        if len(log) > COMMIT_LOG_LIMIT:  # a worker runs for months: keep the recent ones
            del log[:len(log) - COMMIT_LOG_LIMIT]
        assert len(log) <= COMMIT_LOG_LIMIT
        for listener in self._listeners:
            listener(entry)
