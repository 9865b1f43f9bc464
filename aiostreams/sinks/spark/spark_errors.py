"""Spark's errors as one line a user can act on.

A failure inside the JVM reaches Python as a ``Py4JJavaError`` whose text is the whole Java
stack trace, or as one of pyspark's captured exceptions; the line that matters is the
innermost cause (``ClassNotFoundException: Class ...S3AFileSystem not found``). These
helpers find it, and say what to do for the failures users meet first: a path whose
filesystem Spark has no class for.
"""

from __future__ import annotations

import re

from aiostreams.errors import ConfigError

__all__ = ["MissingFileSystemError", "explain_setup_failure", "root_message"]

_CALL_PREFIX = re.compile(r"^An error occurred while calling [\w.]+\.\s*:?\s*")
_MISSING_FS = ("No FileSystem for scheme", "FileSystem not found")
_FS_CLASS_NOT_FOUND = re.compile(r"Class (org\.apache\.hadoop\.fs\.\S+) not found")

_PACKAGE_FOR_SCHEME = {"s3a": "org.apache.hadoop:hadoop-aws:{hadoop}",
                       "gs": "com.google.cloud.bigdataoss:gcs-connector:<version>",
                       "abfs": "org.apache.hadoop:hadoop-azure:{hadoop}",
                       "abfss": "org.apache.hadoop:hadoop-azure:{hadoop}"}


class MissingFileSystemError(ConfigError):
    """Spark has no Hadoop filesystem class for a path's scheme."""


def root_message(error: BaseException) -> str:
    """The innermost cause of a Spark error, on one line (``Class: message``)."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        try:
            cause = java
            while cause.getCause() is not None:
                cause = cause.getCause()
            return " ".join(str(cause.toString()).split())
        except Exception:  # the gateway is gone: fall back to the Python text
            pass
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = " ".join(lines[:2]) if lines else type(error).__name__
    return _CALL_PREFIX.sub("", text)


def explain_setup_failure(error: BaseException, path: str, hadoop_version: str) -> ConfigError:
    """A :class:`ConfigError` (one line) for ``error``, raised while a query was set up
    (options checked, sink path resolved) with output ``path``."""
    message = root_message(error)
    scheme = path.split("://", 1)[0] if "://" in path else "file"
    if any(m in message for m in _MISSING_FS) or _FS_CLASS_NOT_FOUND.search(message):
        package = _PACKAGE_FOR_SCHEME.get(scheme, "<the jar that provides it>")
        return MissingFileSystemError(
            f"Spark has no filesystem for {scheme}:// (path {path}): {message}. Add the jar "
            f"that provides it with --packages {package.format(hadoop=hadoop_version)} "
            f"(SparkConfig.packages), matching Spark's Hadoop {hadoop_version}")
    return ConfigError(f"Spark refused the job's settings: {message}")
