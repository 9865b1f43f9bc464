"""``async with`` for anything with ``start()`` and ``stop()`` coroutines.

``async with resource:`` awaits ``start()``, runs the block, and awaits ``stop()`` however
the block ends (a ``start()`` that raises means the block never runs and ``stop()`` is not
called: a failed start must clean up after itself).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

__all__ = ["StartStop"]


class StartStop(ABC):
    """A base for clients and servers entered with ``async with`` (not an app's
    :class:`~aiostreams.lifecycle.resources.Resource`, which the app opens and closes)."""

    __slots__ = ()

    @abstractmethod
    async def start(self) -> None: ...

    @abstractmethod
    async def stop(self) -> None: ...

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()
