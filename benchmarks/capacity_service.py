"""A lookup service with a real capacity, on 127.0.0.1, for the I/O-edge tests and benchmark.

    service = CapacityService(capacity=50, latency=0.005)
    url = await service.start()        # http://127.0.0.1:<free port>
    GET  {url}/lookup/{key}            -> {"key": k, "value": "v-<k>"} after ``latency``
    POST {url}/batch  ["k1", "k2"]     -> [{"key": ..., "value": ...}, ...] after
                                          batch_latency + per_item x n
    service.capacity = 25              # takes effect at once
    service.down = True                # 503 to everything until False again
    await service.stop()

    POST {url}/_control {"capacity": 20, "down": false}   # the same, over HTTP
    GET  {url}/_stats  -> {"served": ..., "rejected": ..., "unavailable": ..., ...}

:class:`SpawnedService` runs one in a process of its own (``python -m
benchmarks.capacity_service``), as a real service runs: its event loop does not share the
caller's, so the caller's load (an aiostreams app's engine) does not slow the service's
answers, and the figures a benchmark compares are the client's alone.

Behaviour a real service has: more than ``capacity`` requests at once are answered 429 at
once (a bulkhead); above ``rate`` requests per second (when set) likewise; latency grows with
load (``latency x (1 + load_slowdown x in_flight / capacity)``). Counters: ``served``,
``rejected`` (429), ``unavailable`` (503), ``calls_by_key``, ``most_in_flight``.
It runs on the caller's event loop; everything it counts is read in that loop.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import socket
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from benchmarks.spawned_service import SpawnedService as ChildProcessService
from benchmarks.spawned_service import serve_until_terminated

__all__ = ["CapacityService", "Counts", "SpawnedService"]


@dataclass(frozen=True)
class Counts:
    """A service's counters at one moment."""

    served: int
    rejected: int
    unavailable: int


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
        app.router.add_post("/_control", self._control)
        app.router.add_get("/_stats", self._stats)
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

    async def configure(self, *, capacity: int | None = None, down: bool | None = None
                        ) -> None:
        """Change the capacity or the outage switch (the same call as a
        :class:`SpawnedService`'s)."""
        if capacity is not None:
            self.capacity = capacity
        if down is not None:
            self.down = down

    async def counts(self) -> Counts:
        return Counts(self.served, self.rejected, self.unavailable)

    async def _control(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = json.loads(await request.read())
        await self.configure(capacity=body.get("capacity"), down=body.get("down"))
        return web.json_response({"capacity": self.capacity, "down": self.down})

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response({"served": self.served, "rejected": self.rejected,
                                  "unavailable": self.unavailable,
                                  "in_flight": self.in_flight,
                                  "most_in_flight": self.most_in_flight})

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


class SpawnedService(ChildProcessService):
    """A :class:`CapacityService` in a child process, driven over its control endpoints.

    ``await start()`` spawns it and waits for its URL; ``await stop()`` ends it (SIGTERM,
    then waits). Cancellation: a cancelled ``start()`` leaves no child behind.
    """

    def __init__(self, *, capacity: int = 50, latency: float = 0.005,
                 load_slowdown: float = 0.0) -> None:
        self.capacity = capacity
        self.latency = latency
        self.load_slowdown = load_slowdown
        super().__init__("benchmarks.capacity_service", "--capacity", str(capacity),
                         "--latency", str(latency), "--load-slowdown", str(load_slowdown))

    async def configure(self, *, capacity: int | None = None, down: bool | None = None
                        ) -> None:
        body: dict[str, Any] = {}
        if capacity is not None:
            body["capacity"] = self.capacity = capacity
        if down is not None:
            body["down"] = down
        async with self.session.post(f"{self.url}/_control", json=body) as response:
            response.raise_for_status()

    async def counts(self) -> Counts:
        async with self.session.get(f"{self.url}/_stats") as response:
            response.raise_for_status()
            body = await response.json()
        return Counts(body["served"], body["rejected"], body["unavailable"])


def main() -> None:
    parser = argparse.ArgumentParser(description="a lookup service with a real capacity; "
                                     "prints its URL, serves until SIGTERM")
    parser.add_argument("--capacity", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.005)
    parser.add_argument("--load-slowdown", type=float, default=0.0)
    args = parser.parse_args()
    run: Any = asyncio.run
    try:
        import uvloop
        run = uvloop.run
    except ImportError:
        pass
    run(serve_until_terminated(CapacityService(capacity=args.capacity, latency=args.latency,
                                               load_slowdown=args.load_slowdown)))


if __name__ == "__main__":
    main()
