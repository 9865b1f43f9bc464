"""The one way operations tools look inside a running app: :meth:`App.inspect` gives an
:class:`Inspection` (the live worker and its tasks, engine objects, read-only by
convention), and the tools take an app as an :class:`OperatedApp` (the members they use).

So metrics, health, the progress line, the store routes, the CLI's run command and the test
driver read the same few things through one door instead of reaching into the App's private
members, and the operations layer does not import the App (the layer test keeps it so).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from aiostreams.lifecycle.state import AppState
from aiostreams.runtime.clock import Clock

if TYPE_CHECKING:
    from aiostreams.engine.task import StreamTask, TaskSettings
    from aiostreams.engine.worker import CommitRecord, Worker
    from aiostreams.ops.queries import ReadOnlyStore
    from aiostreams.ops.status import AppStatus
    from aiostreams.services.declared import DeclaredService
    from aiostreams.topology.nodes import SubTopology
    from aiostreams.topology.topology import Topology
    from aiostreams.transport.base import Transport
    from aiostreams.windows import DroppedRecords

__all__ = ["Inspection", "OperatedApp"]


@dataclass(frozen=True)
class Inspection:
    """A look at one instant: ``worker`` (None before the app starts), its live ``tasks``
    by id (a copy of the mapping; the tasks themselves are live), and ``task_settings()``,
    the settings the app's tasks are made with."""

    worker: Worker | None
    tasks: Mapping[str, StreamTask]
    task_settings: Callable[[], TaskSettings]

    @property
    def standby_tasks(self) -> Mapping[str, tuple[StreamTask, bool]]:
        """The worker's standby tasks by id, each with whether its first catch-up is done
        (empty when it keeps none)."""
        placement = self.worker.placement if self.worker is not None else None
        if placement is None:
            return {}
        return {task_id: (s.task, s.ready.is_set())
                for task_id, s in placement.standbys.tasks.items()}

    @property
    def commits(self) -> int:
        """Commits the worker made so far (0 before it starts)."""
        return self.worker.commits if self.worker is not None else 0

    @property
    def failure(self) -> BaseException | None:
        """Why the worker failed, or None."""
        return self.worker.failure if self.worker is not None else None


class OperatedApp(Protocol):
    """What the operations tools use of an :class:`~aiostreams.App`."""

    name: str
    state: AppState
    clock: Clock

    @property
    def transport(self) -> Transport: ...

    @property
    def services(self) -> Mapping[str, DeclaredService]: ...

    @property
    def topology(self) -> Topology: ...

    @property
    def dropped_records(self) -> DroppedRecords: ...

    def on_commit(self, listener: Callable[[CommitRecord], None]) -> None: ...

    def store(self, name: str, *, stale_ok: bool = False) -> ReadOnlyStore: ...

    def status(self) -> AppStatus: ...

    def inspect(self) -> Inspection: ...

    def build(self) -> list[SubTopology]: ...

    async def run_async(self) -> None: ...
