"""A tap on a step's answers from a service: what records or replays them.

A :class:`~aiostreams.services.declared.DeclaredService` has a ``tap``, None by default
(one attribute check per call when nothing records). When set, each answer an async step
gets for a record through the service - from its own call, a coalesced one or the memo -
goes through :meth:`CallTap.answer`: the recorder (:mod:`aiostreams.replay.recorder`) notes
it beside the record, a replay (:mod:`aiostreams.replay.player`) gives the recorded one
instead of calling. The tap sees the answer *the record used*, not the calls made: which
record of a coalesced group or of a memo period made the call depends on completion order,
what each record got does not.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Protocol

__all__ = ["CallTap"]


class CallTap(Protocol):
    async def answer(self, service: str, request: Hashable | None,
                     get: Callable[[], Awaitable[Any]]) -> Any:
        """The answer of ``service`` for the running record's next call: ``await get()``
        (recording) or the recorded one (replaying). ``request`` is the step's lookup key,
        when it has one. Raises what ``get()`` raised (or the recorded failure).
        Cancellation: as ``get()``'s."""
        ...
