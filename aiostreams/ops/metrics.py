"""Metrics of a running app: a Prometheus endpoint and a ``/health`` check, read at scrape time.

::

    async with MetricsServer(app, port=9108) as server:   # 127.0.0.1 unless host= says so
        print(server.metrics_url)                          # http://127.0.0.1:9108/metrics
        print(server.base_url + "/stores/totals/alice")     # interactive queries
        await app.run_async()

Nothing here is on the record path: a scrape reads the app through
:class:`~aiostreams.ops.app_collector.AppCollector` (per-task series, commit latency,
services, tables) on the event loop thread that updates it. :class:`TaskTracker` keeps
app-wide totals that survive rebalances, for the progress line and the final summary.

Consumer lag (end offset minus the retired position, per partition) needs the log end
offsets; the server reads them with a consumer of its own (no group) before each scrape,
bounded by :data:`LAG_TIMEOUT`, and leaves the series out when the broker does not answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from aiostreams.errors import ConfigError
from aiostreams.lifecycle.start_stop import StartStop
from aiostreams.ops.app_collector import AppCollector, metrics_registry
from aiostreams.ops.inspection import OperatedApp as App
from aiostreams.ops.probes import health, liveness, readiness
from aiostreams.ops.query_http import add_store_routes
from aiostreams.ops.status_page import add_status_page_routes
from aiostreams.ops.task_totals import AppTotals, TaskTracker, retire_lag
from aiostreams.transport.base import Consumer
from aiostreams.types import TopicPartition

__all__ = ["AppCollector", "AppTotals", "MetricsServer", "TaskTracker", "health",
           "metrics_registry", "retire_lag"]

log = logging.getLogger("aiostreams.ops.metrics")

DEFAULT_HOST = "127.0.0.1"
LAG_TIMEOUT = 2.0
"""Seconds a scrape waits for the broker's end offsets before leaving the lag out."""


# -- the HTTP server --------------------------------------------------------------------


class MetricsServer(StartStop):
    """Serves one app over HTTP on the app's event loop (aiohttp): ``/metrics`` (Prometheus
    text format), ``/health``, an orchestrator's probes ``/health/live`` and
    ``/health/ready`` (:mod:`~aiostreams.ops.probes`), the live status page (``/``,
    :mod:`~aiostreams.ops.status_page`) and the interactive queries ``/stores/{name}`` and
    ``/stores/{name}/{key}`` (:mod:`~aiostreams.ops.query_http`). ``aiostreams run
    --metrics-port P`` starts one; in a program, ``async with MetricsServer(app,
    port=9108) as server:`` around the run.

    Bound to ``host`` (default 127.0.0.1: metrics can reveal topic names and rates, so
    exposing them on other interfaces is a decision to make explicitly) on ``port``
    (0: a free port; read :attr:`port` after :meth:`start`). Start it before the app to
    see ``/health`` answer 503 while the app starts.

    URLs: :attr:`base_url` (``http://127.0.0.1:9108``) is what paths are built on
    (``base_url + "/stores/totals/alice"``); :attr:`metrics_url` is the one to scrape;
    :attr:`url` is the metrics URL too (kept for scrape configs written against it).
    ``peers`` are the base URLs of the group's workers, for redirects of keys another
    worker owns.
    """

    def __init__(self, app: App, *, host: str = DEFAULT_HOST, port: int = 0,
                 peers: Sequence[str] = ()) -> None:
        if not 0 <= port < 65536:
            raise ConfigError(f"metrics port must be within 0..65535, got {port}")
        self.app = app
        self.host = host
        self.registry, self.collector = metrics_registry(app)
        self._requested_port = port
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._lag_consumer: Consumer | None = None
        self.peers = tuple(peers)  # the metrics URLs of the group's workers (queries)

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the metrics server is not started: `await server.start()`")
        return self._port

    @property
    def base_url(self) -> str:
        """The server's root, without a trailing slash, e.g. ``http://127.0.0.1:9108``:
        build ``/health`` and ``/stores/...`` URLs on it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def metrics_url(self) -> str:
        """The Prometheus endpoint, e.g. ``http://127.0.0.1:9108/metrics``."""
        return f"{self.base_url}/metrics"

    @property
    def url(self) -> str:
        """The same as :attr:`metrics_url`; other paths hang off :attr:`base_url`."""
        return self.metrics_url

    async def start(self) -> None:
        """Bind and serve. Raises ``OSError`` when the port is taken."""
        web_app = web.Application()
        web_app.router.add_get("/metrics", self._metrics)
        web_app.router.add_get("/health", self._health)
        web_app.router.add_get("/health/live", self._probe(liveness))
        web_app.router.add_get("/health/ready", self._probe(readiness))
        add_status_page_routes(web_app, self.app, self._end_offsets)  # "/": the status page
        store_routes = add_store_routes(web_app, self.app, self.peers)
        runner = web.AppRunner(web_app, access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self._requested_port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        address = runner.addresses[0]
        self._port = int(address[1])
        store_routes.self_url = self.base_url

    async def stop(self) -> None:
        """Stop serving and close the lag consumer. Idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        consumer, self._lag_consumer = self._lag_consumer, None
        if consumer is not None:
            with contextlib.suppress(Exception):
                await consumer.stop()

    async def _metrics(self, request: web.Request) -> web.Response:
        await self._refresh_end_offsets()
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _health(self, request: web.Request) -> web.Response:
        status, body = health(self.app)
        return web.Response(status=status, text=json.dumps(body),
                            content_type="application/json")

    def _probe(self, check: Callable[[App], tuple[int, dict[str, Any]]]
               ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def answer(request: web.Request) -> web.Response:
            status, body = check(self.app)
            return web.Response(status=status, text=json.dumps(body),
                                content_type="application/json")
        return answer

    async def _end_offsets(self) -> Mapping[TopicPartition, int]:
        await self._refresh_end_offsets()
        return self.collector.end_offsets

    async def _refresh_end_offsets(self) -> None:
        tps = [tp for task in self.app.inspect().tasks.values() for tp in task.partitions]
        if not tps:
            self.collector.end_offsets = {}
            return
        try:
            async with asyncio.timeout(LAG_TIMEOUT):
                if self._lag_consumer is None:
                    consumer = self.app.transport.consumer(None, client_id="aiostreams-metrics")
                    await consumer.start()
                    self._lag_consumer = consumer
                self.collector.end_offsets = await self._lag_consumer.end_offsets(tps)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # lag is optional: a slow or failing broker must not fail a scrape
            log.debug("metrics: no consumer lag this scrape: %s: %s", type(e).__name__, e)
            self.collector.end_offsets = {}
