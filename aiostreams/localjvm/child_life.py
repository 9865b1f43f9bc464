"""Child processes that do not outlive the process that started them.

A broker left running after its parent died (a test run stopped by ``timeout``, whose SIGTERM
runs no finalizer) holds ports, memory and a temporary directory until someone kills it by
hand. On Linux, ``prctl(PR_SET_PDEATHSIG)`` in the child asks the kernel to kill it when its
parent goes away.

Invariant: the death signal is set only for children forked from the main thread. Linux sends
it when the *thread* that forked the child exits, so a child started from a worker thread
(``asyncio.to_thread``) would be killed when that thread ended, while its parent still needs it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that ties the child's life to this process,
    or None where that cannot be done safely (not Linux, or not the main thread)."""
    if not sys.platform.startswith("linux"):
        return None
    if threading.current_thread() is not threading.main_thread():
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    parent = os.getpid()

    def tie() -> None:  # runs in the child, between fork and exec
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return  # the kernel refused: the child lives on as before, nothing worse
        if os.getppid() != parent:  # the parent died before the signal was set
            os._exit(1)

    return tie
