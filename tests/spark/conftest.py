"""The Spark bridge's fixtures: the process's SparkSession on ``local[2]``, and Spark
standalone clusters on 127.0.0.1 (:mod:`localcluster`) for the cluster tests.

A process has one SparkSession (:mod:`aiostreams.sinks.spark.session`): ``spark`` starts (or
returns) the local one; a cluster test module takes the session of a cluster with
:func:`cluster_session`, which stops whatever session runs first and stops its own at the
module's end, so the next test asking for ``spark`` gets a local one again. Run cluster
test files one at a time on a small machine: each cluster is a master, a worker and an
executor JVM.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deltakit import DELTA_CONF, DELTA_PACKAGE
from localcluster import LocalSparkCluster
from s3kit import S3Server

from aiostreams.sinks import SparkConfig, get_session, stop_session

TEST_SPARK = SparkConfig(master="local[2]", driver_memory="1g", app_name="aiostreams-tests")


@pytest.fixture(scope="session")
def _session_stopped_at_exit() -> Iterator[None]:
    yield
    stop_session()


@pytest.fixture
def spark(_session_stopped_at_exit: None) -> Any:
    """The process's SparkSession on ``local[2]`` (started on first use, stopped at the end of
    the test session); sinks with ``engine="spark"`` share it."""
    return get_session(TEST_SPARK)


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[LocalSparkCluster]:
    """A standalone cluster whose worker shares the driver's disk (one core)."""
    with LocalSparkCluster() as cluster:
        yield cluster
    assert cluster.alive_groups() == []


@pytest.fixture(scope="session")
def private_disk_cluster() -> Iterator[LocalSparkCluster]:
    """A standalone cluster whose worker has a private disk at ``cluster.private_dir``: its
    executors write there into a tmpfs only they see (as on another host), while the driver
    sees the real, empty directory."""
    with tempfile.TemporaryDirectory(prefix="aiostreams-private-") as directory:
        with LocalSparkCluster(private_dir=Path(directory)) as cluster:
            yield cluster
        assert cluster.alive_groups() == []


def cluster_session(config: SparkConfig) -> Iterator[Any]:
    """Body of a module-scoped fixture: the process's session, on a cluster, for one module."""
    stop_session()
    session = get_session(config)
    yield session
    stop_session()


@pytest.fixture(scope="module")
def private_disk_spark(private_disk_cluster: LocalSparkCluster) -> Iterator[Any]:
    """The process's session on the private-disk cluster, for one module."""
    yield from cluster_session(private_disk_cluster.config())


@pytest.fixture(scope="module")
def delta_spark(spark_cluster: LocalSparkCluster) -> Iterator[Any]:
    """The config of a session on the standalone cluster with Delta's jar and SQL
    extensions (read in a process of its own: see ``delta_spark_reader.py``)."""
    config = spark_cluster.config(conf=DELTA_CONF, app_name="aiostreams-delta-readers")
    yield config.model_copy(update={"packages": (DELTA_PACKAGE,)})


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server on 127.0.0.1, for the session."""
    server = S3Server.start()
    try:
        yield server
    finally:
        server.stop()
