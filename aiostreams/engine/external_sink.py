"""Starting and stopping the app's external sinks (the contract they keep is
:mod:`aiostreams.runtime.sink_contract`)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable

from aiostreams.runtime.sink_contract import ExternalSink
from aiostreams.transport.base import Transport, read_topic_ids

log = logging.getLogger("aiostreams.worker")


async def start_sinks(sinks: Collection[ExternalSink], transport: Transport, app_id: str,
                      sources: Iterable[str]) -> None:
    """Tell each sink who writes (the app, and the incarnations of the source topics, so a
    sink can refuse a table written for another app or a recreated topic), then start it."""
    if not sinks:
        return
    topic_ids = await read_topic_ids(transport, set(sources))
    for sink in sinks:
        getattr(sink, "bind_app", lambda app_id: None)(app_id)
        getattr(sink, "bind_topic_ids", lambda ids: None)(topic_ids)
        await sink.start()


async def stop_sinks(sinks: Iterable[ExternalSink]) -> None:
    """Stop every sink; one that fails to stop is logged and does not keep the others
    from stopping."""
    for sink in sinks:
        try:
            await sink.stop()
        except Exception:
            log.exception("worker: stopping sink %r failed", sink.name)


__all__ = ["start_sinks", "stop_sinks"]
