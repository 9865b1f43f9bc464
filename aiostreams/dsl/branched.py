"""``BranchedStream``: the branches of a :meth:`Stream.split` being declared.

``stream.split().branch(p, name="a")...default_branch()`` adds one branching processor
and one pass-through node per branch, and returns ``{name: Stream}``. A record goes to the
first branch whose predicate holds (declaration order), else to the default branch, if
there is one, else it is dropped.

Invariants: branch names are unique within a split; a split is finished once (by
``default_branch()`` or ``no_default_branch()``), after which it takes no more branches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from aiostreams.errors import TopologyError
from aiostreams.processors.steps import BranchProcessor, Passthrough, require_sync

if TYPE_CHECKING:
    from aiostreams.dsl.stream import Stream

K = TypeVar("K")
V = TypeVar("V")


class BranchedStream(Generic[K, V]):
    """The branches of a :meth:`Stream.split` being declared. Branch ``name`` is
    ``<split name><branch name>`` (a counter when none is given), as Kafka's
    ``Branched.as``."""

    def __init__(self, stream: Stream[K, V], name: str | None) -> None:
        self._stream = stream
        self._prefix = name if name is not None else stream.builder.new_name(
            "KSTREAM-BRANCH") + "-"
        self._branches: list[tuple[Callable[[Any, Any], Any], str]] = []
        self._done = False

    def _branch_name(self, name: str | None) -> str:
        return self._prefix + (name if name is not None else str(len(self._branches) + 1))

    def branch(self, predicate: Callable[[K, V], bool], *,
               name: str | None = None) -> BranchedStream[K, V]:
        """Add a branch taking the records for which ``predicate(key, value)`` holds (and
        no earlier branch's did)."""
        require_sync(predicate, "branch")
        if self._done:
            raise TopologyError("this split is finished; start another with split()")
        full = self._branch_name(name)
        if any(n == full for _, n in self._branches):
            raise TopologyError(f"split has two branches named {full!r}")
        self._branches.append((predicate, full))
        return self

    def default_branch(self, *, name: str | None = None) -> dict[str, Stream[K, V]]:
        """Finish with a branch for the records no predicate took."""
        return self._finish(self._prefix + (name if name is not None else "0"))

    def no_default_branch(self) -> dict[str, Stream[K, V]]:
        """Finish; records no predicate took are dropped."""
        return self._finish(None)

    def _finish(self, default: str | None) -> dict[str, Stream[K, V]]:
        from aiostreams.dsl.stream import Stream

        if self._done:
            raise TopologyError("this split is finished already")
        if not self._branches and default is None:
            raise TopologyError("split() needs at least one branch")
        self._done = True
        builder = self._stream.builder
        branches = list(self._branches)
        outlets = [n for _, n in branches] + ([default] if default is not None else [])
        splitter = builder.add_processor(
            "KSTREAM-BRANCH", lambda: BranchProcessor(branches, default), [self._stream.node])
        result: dict[str, Stream[K, V]] = {}
        for outlet in outlets:
            node = builder.add_processor("KSTREAM-BRANCHCHILD", Passthrough, [splitter],
                                         name=outlet)
            result[outlet] = Stream(builder, node, key_serde=self._stream.key_serde,
                                    value_serde=self._stream.value_serde,
                                    key_changed=self._stream.key_changed)
        return result
