"""How ``make test`` spreads the suite over pytest-xdist workers (``-n N --dist loadgroup``).

pytest-xdist hands out *work units*; all tests of a unit run on one worker, one after the
other. Here a unit is:

* a whole directory of :data:`SHARED` (``tests/spark``: the process's one SparkSession and
  the standalone clusters, one at a time; ``tests/registry``: one Apicurio registry a
  session), so each server starts once, on one worker, as in a run on one process;
* a whole module of :data:`BY_MODULE` (``tests/chaos``: a module's tests share its
  module-scoped broker; ``tests/oracle``: a worker running oracle modules starts one Kafka
  Streams JVM for them, at most one a worker);
* any other test on its own.

Units start longest first (:data:`FIRST`, then by number of tests), so the long ones do not
end the run alone. Every worker process starts its own session broker on first use
(``tests/conftest.py``); tests name their topics, groups and ports uniquely, so they do not
meet across workers.

The grouping is by path because the controller sees only node ids (pytest-xdist 3.8's own
``loadgroup``, from ``xdist_group`` marks, groups nothing under pytest 9.2:
pytest-dev/pytest-xdist#1386). Invariant: each test belongs to exactly one unit, and every
test of a :data:`SHARED` directory to the same one.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

SHARED = ("tests/spark/", "tests/registry/")
BY_MODULE = ("tests/chaos/", "tests/oracle/", "tests/iceberg/test_iceberg_rest_catalog.py")
FIRST = ("tests/spark/", "tests/chaos/", "tests/oracle/", "tests/registry/")
"""Prefixes of the units handed out first, in this order (the longest ones)."""


def work_unit(nodeid: str) -> str:
    """The unit a test (by node id, relative to the rootdir) belongs to."""
    path = nodeid.split("::", 1)[0]
    for directory in SHARED:
        if path.startswith(directory):
            return directory
    if path.startswith(BY_MODULE):
        return path
    return nodeid


def rank(unit: str) -> int:
    """Position of ``unit``'s prefix in :data:`FIRST` (``len(FIRST)`` for the rest)."""
    return next((i for i, prefix in enumerate(FIRST) if unit.startswith(prefix)), len(FIRST))


class SuiteScheduling(LoadScopeScheduling):
    """pytest-xdist's scope scheduling with :func:`work_unit` as the scope, handing out
    the units of :data:`FIRST` before the others."""

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid)

    def _assign_work_unit(self, node: WorkerController) -> None:
        # the queue is ordered by number of tests (largest first); min keeps that order
        # among units of the same rank
        first = min(self.workqueue, key=rank)
        self.workqueue.move_to_end(first, last=False)
        super()._assign_work_unit(node)
