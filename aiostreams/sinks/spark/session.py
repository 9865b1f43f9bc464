"""The process's one SparkSession: how it is configured, started and stopped.

Spark allows one active session per JVM, and starting one costs seconds, so aiostreams keeps
exactly one per process. It starts lazily, on the Spark thread
(:mod:`aiostreams.sinks.spark.spark_thread`), the first time something needs it (a sink with
``engine="spark"`` starts it in ``start()``), and stops at interpreter exit or on
:func:`stop_session`.

Local masters (``local``, ``local[N]``, ``local[*]``) bind to 127.0.0.1 (``SPARK_LOCAL_IP``)
with the web UI off; ``spark://``, ``yarn`` and ``k8s://`` masters pass through untouched, as
does anything in :attr:`SparkConfig.conf`. Timestamps are written as Parquet
``TIMESTAMP_MICROS`` in UTC (not Spark's legacy INT96), so pyarrow reads back exactly the
``timestamp[us, tz=UTC]`` the sink wrote.

``createDataFrame(arrow_table)`` always builds an RDD of the Arrow batches
(``spark.sql.execution.arrow.localRelationThreshold=0``): below Spark's default threshold
(48 MB) it copies every row into a driver-side ``LocalRelation`` instead, and every planner
rule then walks those rows; for a 50k-row batch that tripled ``createDataFrame`` and added
about 40% to the write (measured: ``benchmarks/RESULTS.md``).

Invariant: at most one session is started per process; asking for one with a different
:class:`SparkConfig` while it runs is a :class:`~aiostreams.errors.ConfigError`.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from aiostreams.errors import ConfigError
from aiostreams.sinks.spark.spark_thread import call_on_spark_thread

__all__ = ["SparkConfig", "get_session", "running_config", "stop_session"]

log = logging.getLogger("aiostreams.sinks")

_LOCAL_MASTER = re.compile(r"^local(\[(\*|\d+)(,\s*\d+)?\])?$")


class SparkConfig(BaseModel):
    """How to start the process's SparkSession.

    ``packages`` become ``spark.jars.packages`` (Maven coordinates, resolved from
    ``~/.m2`` first, then Maven Central); ``conf`` is passed as-is and wins over the
    defaults set here.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    master: str = "local[*]"
    driver_memory: str = "1g"
    app_name: str = "aiostreams"
    packages: tuple[str, ...] = ()
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("master")
    @classmethod
    def _known_master(cls, value: str) -> str:
        if _LOCAL_MASTER.match(value) or value.startswith(("spark://", "k8s://", "mesos://")) \
                or value == "yarn":
            return value
        raise ValueError("use local, local[N], local[*], spark://host:port, yarn or "
                         "k8s://...")

    @property
    def is_local(self) -> bool:
        return bool(_LOCAL_MASTER.match(self.master))

    def spark_conf(self) -> dict[str, str]:
        """Every setting the session is built with."""
        settings = {
            "spark.app.name": self.app_name,
            "spark.master": self.master,
            "spark.driver.memory": self.driver_memory,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
            "spark.sql.shuffle.partitions": "4" if self.is_local else "200",
            "spark.sql.execution.arrow.localRelationThreshold": "0",
        }
        if self.is_local:
            settings["spark.driver.host"] = "127.0.0.1"
            settings["spark.driver.bindAddress"] = "127.0.0.1"
        if self.packages:
            settings["spark.jars.packages"] = ",".join(self.packages)
        settings.update(self.conf)
        return settings


_state_lock = threading.Lock()
_session: Any = None
_config: SparkConfig | None = None
_atexit_registered = False


def running_config() -> SparkConfig | None:
    """The config of the running session, or None when none runs."""
    return _config


def get_session(config: SparkConfig | None = None) -> Any:
    """The process's SparkSession, started with ``config`` (default :class:`SparkConfig`)
    if none runs. Blocks while it starts (seconds): from async code call it on the Spark
    thread (:func:`~aiostreams.sinks.spark.spark_thread.run_on_spark_thread`). Raises
    :class:`ConfigError` if a session runs with another config."""
    return call_on_spark_thread(_get_or_start, config)


def _get_or_start(config: SparkConfig | None) -> Any:
    global _session, _config, _atexit_registered
    with _state_lock:
        if _session is not None:
            if config is not None and config != _config:
                raise ConfigError(
                    f"a SparkSession already runs in this process with {_config!r}; one "
                    f"session per process: pass the same SparkConfig (or none), or call "
                    f"aiostreams.sinks.stop_session() first to start one with {config!r}")
            return _session
        chosen = config or SparkConfig()
        _fresh_jvm_for(chosen)
        if chosen.is_local:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from pyspark.sql import SparkSession

        builder = SparkSession.builder
        for key, value in chosen.spark_conf().items():
            builder = builder.config(key, value)
        log.info("starting SparkSession (%s, driver memory %s)", chosen.master,
                 chosen.driver_memory)
        try:
            session = builder.getOrCreate()
        except Exception as e:
            raise RuntimeError(
                f"Spark did not start with {chosen!r}: {e}. Check that Java 17+ is on "
                "PATH (or JAVA_HOME is set) and that every package in "
                "SparkConfig.packages exists in ~/.m2 or on Maven Central") from e
        session.sparkContext.setLogLevel("WARN")
        _session, _config = session, chosen
        if not _atexit_registered:
            atexit.register(_stop_now)
            _atexit_registered = True
        return session


_jvm_jars: str | None = None  # spark.jars.packages the running JVM was launched with


def _fresh_jvm_for(config: SparkConfig) -> None:
    """Packages load only when Spark's JVM starts, and a stopped session leaves that JVM
    running for the next one: a session that needs other packages (hadoop-aws for s3a://)
    would start without them ("Class ...S3AFileSystem not found"). Shut the JVM down so the
    next session launches one with ``config``'s packages."""
    global _jvm_jars
    from pyspark import SparkContext

    wanted = config.spark_conf().get("spark.jars.packages")
    gateway = SparkContext._gateway
    if gateway is not None and wanted != _jvm_jars:
        log.info("restarting Spark's JVM for packages %s", wanted)
        proc = getattr(gateway, "proc", None)  # the JVM pyspark launched (a Popen)
        gateway.shutdown()
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()  # the JVM exits when its stdin closes
            proc.wait(timeout=60)
        SparkContext._gateway = None
        SparkContext._jvm = None
    _jvm_jars = wanted


def stop_session() -> None:
    """Stop the process's SparkSession, if one runs (blocks; waits for the Spark thread to
    finish the job it is on). A later :func:`get_session` starts a new one."""
    call_on_spark_thread(_stop_now)


def _stop_now() -> None:
    global _session, _config
    with _state_lock:
        session, _session, _config = _session, None, None
    if session is not None:
        try:
            session.stop()
        except Exception:  # at interpreter exit the gateway may already be gone
            log.debug("stopping the SparkSession failed", exc_info=True)
