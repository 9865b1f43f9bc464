"""The Spark bridge's fixtures: one SparkSession for the whole test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from aiostreams.spark import SparkConfig, get_session, stop_session

TEST_SPARK = SparkConfig(master="local[2]", driver_memory="1g", app_name="aiostreams-tests")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The process's SparkSession (started once, stopped at the end of the session); sinks
    with ``engine="spark"`` share it."""
    session = get_session(TEST_SPARK)
    yield session
    stop_session()
