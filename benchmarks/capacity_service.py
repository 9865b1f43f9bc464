"""A lookup service with a real capacity, on 127.0.0.1, for the I/O-edge tests and benchmark.

    service = CapacityService(capacity=50, latency=0.005)
    url = await service.start()        # http://127.0.0.1:<free port>
    GET  {url}/lookup/{key}            -> {"key": k, "value": "v-<k>"} after ``latency``
    POST {url}/batch  ["k1", "k2"]     -> [{"key": ..., "value": ...}, ...] after
                                          batch_latency + per_item x n
    service.capacity = 25              # takes effect at once
    service.down = True                # 503 to everything until False again
    await service.stop()

Behaviour a real service has: more than ``capacity`` requests at once are answered 429 at
once (a bulkhead); above ``rate`` requests per second (when set) likewise; latency grows with
load (``latency x (1 + load_slowdown x in_flight / capacity)``). Counters: ``served``,
``rejected`` (429), ``unavailable`` (503), ``calls_by_key``, ``most_in_flight``.
It runs on the caller's event loop; everything it counts is read in that loop.
"""

from __future__ import annotations

import asyncio
import collections
import json
import socket
import time

from aiohttp import web

__all__ = ["CapacityService"]


class CapacityService:
    def __init__(self, *, capacity: int = 50, latency: float = 0.005, rate: float | None = None,
                 load_slowdown: float = 0.0, batch_latency: float = 0.005,
                 per_item: float = 0.00005) -> None:
        self.capacity = capacity
        self.latency = latency
        self.rate = rate
        self.load_slowdown = load_slowdown
        self.batch_latency = batch_latency
        self.per_item = per_item
        self.down = False
        self.in_flight = 0
        self.most_in_flight = 0
        self.served = 0
        self.rejected = 0
        self.unavailable = 0
        self.calls_by_key: collections.Counter[str] = collections.Counter()
        self._second = 0
        self._this_second = 0
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/lookup/{key}", self._lookup)
        app.router.add_post("/batch", self._batch)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))  # the kernel picks a free port: never someone else's
        await web.SockSite(self._runner, sock).start()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _admit(self) -> web.Response | None:
        if self.down:
            self.unavailable += 1
            return web.Response(status=503, text="down for maintenance")
        now = int(time.monotonic())
        if now != self._second:
            self._second, self._this_second = now, 0
        over_rate = self.rate is not None and self._this_second >= self.rate
        if self.in_flight >= self.capacity or over_rate:
            self.rejected += 1
            return web.Response(status=429, text="too many requests")
        self._this_second += 1
        return None

    async def _serve(self, seconds: float) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            load = self.in_flight / max(1, self.capacity)
            await asyncio.sleep(seconds * (1.0 + self.load_slowdown * load))
        finally:
            self.in_flight -= 1

    async def _lookup(self, request: web.Request) -> web.Response:
        refused = self._admit()
        if refused is not None:
            return refused
        key = request.match_info["key"]
        await self._serve(self.latency)
        self.served += 1
        self.calls_by_key[key] += 1
        return web.json_response({"key": key, "value": f"v-{key}"})

    async def _batch(self, request: web.Request) -> web.Response:
        refused = self._admit()
        if refused is not None:
            return refused
        keys = json.loads(await request.read())
        if not isinstance(keys, list):
            return web.Response(status=400, text="a JSON list of keys, please")
        await self._serve(self.batch_latency + self.per_item * len(keys))
        self.served += 1
        for key in keys:
            self.calls_by_key[str(key)] += 1
        return web.json_response([{"key": k, "value": f"v-{k}"} for k in keys])
