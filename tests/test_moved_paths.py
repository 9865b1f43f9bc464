"""The module paths that moved keep working for one release: the old path gives the module
at the new one (the same object) with a DeprecationWarning naming the new path."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

from aiostreams.moved import MOVED


def _import_old_parents(old: str) -> None:
    """Import the old packages above ``old`` first, their warnings aside: importing ``old``
    alone would warn for its parent too, and which test of a worker imports the parent
    first depends on how the suite is spread over the workers."""
    parts = old.split(".")
    for end in range(2, len(parts)):
        parent = ".".join(parts[:end])
        if parent in MOVED and parent not in sys.modules:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                importlib.import_module(parent)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_imports_the_module_at_its_new_path_with_a_warning(old: str) -> None:
    _import_old_parents(old)
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {MOVED[old]}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])


def test_the_old_spark_path_gives_the_lake_sinks_by_the_names_users_imported() -> None:
    sys.modules.pop("aiostreams.spark", None)
    with pytest.warns(DeprecationWarning):
        from aiostreams.spark import DeltaSink, add_parquet_sink  # type: ignore[import-not-found]
    from aiostreams.sinks import DeltaSink as now
    from aiostreams.sinks import add_parquet_sink as now_add
    assert (DeltaSink, add_parquet_sink) == (now, now_add)


def test_importing_the_package_and_its_user_modules_touches_no_old_path() -> None:
    code = ("import aiostreams, aiostreams.testing, aiostreams.sinks, aiostreams.dsl, "
            "aiostreams.settings, aiostreams.ops.queries, aiostreams.pytest_plugin")
    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
