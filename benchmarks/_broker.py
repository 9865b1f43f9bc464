"""The broker a benchmark runs against: ``AIOSTREAMS_KAFKA=host:port`` when set, else one
started here with the project's :class:`~aiostreams.localkafka.LocalKafka` (and stopped)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


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
