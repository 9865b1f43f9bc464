"""The module paths that moved keep working for one release: the old path gives the module
at the new one (the same object) with a DeprecationWarning naming the new path."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from aiostreams.moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_imports_the_module_at_its_new_path_with_a_warning(old: str) -> None:
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
