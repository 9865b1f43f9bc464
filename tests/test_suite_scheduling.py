"""How ``make test`` spreads the suite over workers (tests/support/suite_scheduling.py): the
tests sharing a process-wide server form one unit, and the long units are handed out first."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest

xdist = pytest.importorskip("xdist")

from suite_scheduling import SuiteScheduling, work_unit  # noqa: E402

SPARK = ["tests/spark/test_spark_session.py::test_a",
         "tests/spark/test_local_cluster.py::test_b[x]"]
REGISTRY = ["tests/registry/test_registry_app.py::test_c",
            "tests/registry/test_registry_wire.py::test_d"]


def test_the_spark_tests_and_the_registry_tests_each_form_one_unit() -> None:
    assert {work_unit(n) for n in SPARK} == {"tests/spark/"}
    assert {work_unit(n) for n in REGISTRY} == {"tests/registry/"}


def test_a_chaos_or_oracle_module_is_one_unit_and_any_other_test_is_its_own() -> None:
    assert work_unit("tests/chaos/test_restore.py::test_a[x]") == "tests/chaos/test_restore.py"
    assert work_unit("tests/chaos/test_restore.py::test_b") == "tests/chaos/test_restore.py"
    assert work_unit("tests/oracle/test_oracle_joins.py::test_j") == (
        "tests/oracle/test_oracle_joins.py")
    assert work_unit("tests/app/test_clients.py::test_a[kafka]") == (
        "tests/app/test_clients.py::test_a[kafka]")
    # a file named like a shared directory elsewhere is not in it
    assert work_unit("tests/engine/spark/test_x.py::test_y") == (
        "tests/engine/spark/test_x.py::test_y")


class _Node:
    def __init__(self) -> None:
        self.sent: list[list[int]] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.append(indices)


def test_the_spark_unit_then_chaos_modules_are_handed_out_before_larger_ones() -> None:
    collection = ["tests/app/test_a.py::test_1", "tests/app/test_a.py::test_2",
                  "tests/chaos/test_c.py::test_1", *SPARK]
    scheduler: Any = SuiteScheduling.__new__(SuiteScheduling)
    node = _Node()
    scheduler.registered_collections = {node: collection}
    scheduler.assigned_work = {}
    # a queue in which units of no rank come first
    scheduler.workqueue = OrderedDict([
        ("tests/app/test_a.py::test_1", {"tests/app/test_a.py::test_1": False}),
        ("tests/chaos/test_c.py", {"tests/chaos/test_c.py::test_1": False}),
        ("tests/spark/", dict.fromkeys(SPARK, False)),
        ("tests/app/test_a.py::test_2", {"tests/app/test_a.py::test_2": False}),
    ])
    for _ in range(3):
        scheduler._assign_work_unit(node)
    assert node.sent == [[3, 4], [2], [0]]
    assert list(scheduler.workqueue) == ["tests/app/test_a.py::test_2"]
