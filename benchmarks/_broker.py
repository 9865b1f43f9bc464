"""The broker a benchmark runs against: ``AIOSTREAMS_KAFKA=host:port`` when set, else one
started here with the project's :class:`~aiostreams.localkafka.LocalKafka` (and stopped)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path


@asynccontextmanager
async def kafka_broker() -> AsyncIterator[str]:
    configured = os.environ.get("AIOSTREAMS_KAFKA")
    if configured:
        yield configured
        return
    from aiostreams.localkafka import LocalKafka

    kafka = LocalKafka()
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, kafka.start)
    try:
        yield kafka.bootstrap
    finally:
        await loop.run_in_executor(None, kafka.stop)


def listening_pid(bootstrap: str) -> int | None:
    """The pid of the local process listening on ``bootstrap``'s port (the broker), found
    through ``/proc/net/tcp{,6}`` and the processes' socket descriptors; None when the
    broker is not a process of this machine that this user can see (then no broker CPU
    figure is reported)."""
    port = int(bootstrap.rsplit(":", 1)[1])
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == _LISTEN and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{inode}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    return int(proc.name)
        except OSError:
            continue
    return None


_LISTEN = "0A"
"""The TCP state LISTEN in ``/proc/net/tcp``."""
