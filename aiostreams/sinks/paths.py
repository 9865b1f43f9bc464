"""Where a table lives: strict parsing of the paths and URIs the Spark bridge accepts.

Accepted forms (anything else is a :class:`~aiostreams.errors.ConfigError` naming them, never
a write somewhere else):

==============================================  =============================================
form                                            means
==============================================  =============================================
``/abs/dir``, a :class:`~pathlib.Path`           that local (or mounted) directory
``rel/dir``, ``./data:2024``                     resolved against the current directory, once,
                                                when parsed (the result is absolute)
``file:/abs``, ``file:///abs``,                  ``/abs`` (RFC 8089; ``%20`` and the like are
``file://localhost/abs``                         decoded)
``hdfs://namenode[:port]/abs``, ``hdfs:///abs``  HDFS (handed to Spark as written)
``s3a://bucket/key/prefix``,                     an S3 (or S3-protocol) bucket; Spark gets
``s3://bucket/key/prefix``                       ``s3a://`` (Hadoop's S3A) for both, delta-rs
                                                reads both the same
==============================================  =============================================

A relative path whose first part contains ``:`` must start with ``./`` (else it reads as a
URI scheme). ``file://otherhost/...``, ``file:relative``, a query or fragment, ``s3n://``,
a bucket without a key prefix, and other schemes are refused.

Invariant: :attr:`TablePath.local` is absolute whenever it is set (``..`` is kept, not
folded: a symlink may stand before it), and :attr:`TablePath.uri` names the same place for
Spark (``file:///abs`` for a local path, unquoted: Hadoop quotes it).
"""

from __future__ import annotations

import os
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from aiostreams.errors import ConfigError

__all__ = ["ACCEPTED_FORMS", "REMOTE_SCHEMES", "TablePath", "parse_table_path"]

REMOTE_SCHEMES = ("hdfs", "s3a")  # the schemes of TablePath.uri
ACCEPTED_FORMS = ("/abs/path", "relative/path", "file:/abs/path", "file:///abs/path",
                  "file://localhost/abs/path", "hdfs://namenode:port/path", "s3a://bucket/path",
                  "s3://bucket/path")

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


@dataclass(frozen=True)
class TablePath:
    """A parsed table location: ``local`` (absolute) for the local filesystem, else None;
    ``uri`` as Spark should get it; ``given`` as the user wrote it (for messages)."""

    uri: str
    local: Path | None
    given: str

    @property
    def scheme(self) -> str:
        return "file" if self.local is not None else self.uri.split(":", 1)[0]


def _refuse(given: str, why: str) -> ConfigError:
    return ConfigError(f"table path {given!r}: {why}. Accepted forms: "
                       f"{', '.join(ACCEPTED_FORMS)}")


def _local(path: Path, given: str, cwd: Path | None) -> TablePath:
    if not path.is_absolute():
        path = (cwd if cwd is not None else Path.cwd()) / path
    # Hadoop's Path quotes the URI itself, so Spark gets the path as it is, not %-encoded
    return TablePath(f"file://{path.as_posix()}", path, given)


def parse_table_path(path: str | os.PathLike[str], *, cwd: Path | None = None) -> TablePath:
    """Parse ``path`` (see the module docstring); relative paths are resolved against
    ``cwd`` (default: the current directory, now). Raises :class:`ConfigError`."""
    if not isinstance(path, str):
        return _local(Path(path), os.fspath(path), cwd)
    given = path
    if not given.strip():
        raise _refuse(given, "it is empty")
    match = _SCHEME.match(given)
    if match is None:
        return _local(Path(given), given, cwd)
    scheme = match.group(1).lower()
    parts = urllib.parse.urlsplit(given)
    if parts.query or parts.fragment:
        raise _refuse(given, "a query (?) or fragment (#) is not part of a table path; "
                             "percent-encode such characters in a file: URI")
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise _refuse(given, f"file URIs name this host only (file:///abs or "
                                 f"file://localhost/abs), not host {parts.netloc!r}")
        if not parts.path.startswith("/"):
            raise _refuse(given, "a file: URI needs an absolute path (file:/abs, file:///abs)")
        return _local(Path(urllib.parse.unquote(parts.path)), given, None)
    if scheme == "hdfs":
        if not parts.path.startswith("/") or parts.path == "/":
            raise _refuse(given, "an hdfs:// URI needs a directory path after the namenode")
        return TablePath(given, None, given)
    if scheme in ("s3a", "s3"):
        if not parts.netloc or parts.path.strip("/") == "":
            raise _refuse(given, f"an {scheme}:// URI needs a bucket and a key prefix "
                                 f"({scheme}://bucket/tables/orders)")
        if parts.username is not None or parts.port is not None:
            raise _refuse(given, "credentials and endpoints go in the sink's storage options "
                                 "(or Spark's fs.s3a.* settings), not in the URI")
        return TablePath(f"s3a://{parts.netloc}{parts.path}", None, given)
    hint = ""
    if scheme == "s3n":
        hint = "; for S3 use s3a:// or s3://"
    elif "://" not in given:
        hint = f"; for a relative path whose name has ':' write ./{given}"
    raise _refuse(given, f"scheme {scheme!r} is not supported{hint}")
