"""An app run until it fails on its own, and the cause of a given type in an error's chain:
what the tests of a sink that must fail loudly, committing nothing, share."""

from __future__ import annotations

import asyncio
from typing import TypeVar

import pytest

from aiostreams import AiostreamsError, App

E = TypeVar("E", bound=BaseException)


async def run_until_it_fails(app: App, durable: asyncio.Event) -> tuple[AiostreamsError, bool]:
    """Start ``app`` and wait until it stops on its own or ``durable`` is set; stop it. The
    error it stopped with (it must have failed) and whether ``durable`` was set first."""
    await app.start()
    stopped = asyncio.ensure_future(app.wait())
    reached = asyncio.ensure_future(durable.wait())
    await asyncio.wait([stopped, reached], return_when=asyncio.FIRST_COMPLETED)
    reached.cancel()
    if not stopped.done():
        await app.stop()
    with pytest.raises(AiostreamsError) as failure:
        await stopped
    return failure.value, reached.done() and not reached.cancelled()


def cause_of(error: BaseException, kind: type[E]) -> E:
    """The first error of type ``kind`` in ``error``'s chain of causes and contexts."""
    cause: BaseException | None = error
    while cause is not None and not isinstance(cause, kind):
        cause = cause.__cause__ or cause.__context__
    assert isinstance(cause, kind), f"no {kind.__name__} in the chain of {error!r}"
    return cause
