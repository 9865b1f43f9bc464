"""The commands of the ``aiostreams`` command line, one module each (the parser and the
error handling live in :mod:`aiostreams.cli`).

Exit codes (:class:`ExitCode`) mean the same for every command:

* 0: done (also a run or a ``tail`` stopped by SIGTERM: a service manager's normal stop);
* 1: a runtime failure: a task failed, a topic is missing, the broker refused a request;
* 2: a usage or configuration error: bad arguments, a bad ``MODULE:APP``, a bad setting,
  an invalid topology;
* 3: the broker could not be reached within ``--connect-timeout``;
* 130: interrupted by Ctrl-C (SIGINT), for every command (``run`` first stops
  gracefully: drain, retire, commit), or by SIGTERM during a command other than ``run``
  and ``tail``;
* 141: stdout was closed by its reader (``aiostreams tail T | head -1``): a quiet exit, as
  a Unix tool killed by SIGPIPE has (128 + 13).
"""

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    FAILURE = 1
    USAGE = 2
    BROKER_UNREACHABLE = 3
    UNCOMMITTED = 4  # stopped, but the last commit did not land (UncommittedStopError)
    INTERRUPTED = 130
    PIPE_CLOSED = 141


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
