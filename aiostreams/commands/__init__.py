"""The commands of the ``aiostreams`` command line, one module each (the parser and the
error handling live in :mod:`aiostreams.cli`).

Exit codes (:class:`ExitCode`) mean the same for every command:

* 0: done (also a run stopped by SIGINT/SIGTERM, and ``tail`` ended with Ctrl-C);
* 1: a runtime failure: a task failed, a topic is missing, the broker refused a request;
* 2: a usage or configuration error: bad arguments, a bad ``MODULE:APP``, a bad setting,
  an invalid topology;
* 3: the broker could not be reached within ``--connect-timeout``;
* 130: interrupted (SIGINT/SIGTERM) during a command other than ``run`` and ``tail``.
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    FAILURE = 1
    USAGE = 2
    BROKER_UNREACHABLE = 3
    INTERRUPTED = 130


class CommandError(Exception):
    """An error a command reports as one line, with the exit code it means."""

    def __init__(self, message: str, code: ExitCode = ExitCode.FAILURE) -> None:
        super().__init__(message)
        self.code = code


class UsageError(CommandError):
    """Bad arguments (exit code 2)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.USAGE)


__all__ = ["CommandError", "ExitCode", "UsageError"]
