"""A payments risk model as it really behaves, on 127.0.0.1, for the service benchmarks
(issue 35).

    service = RiskService(Behaviour(rate=40.0))
    url = await service.start()              # http://127.0.0.1:<free port>
    GET  {url}/score/{payment}   -> {"payment": p, "score": 0.42} after 10-80 ms
    await service.configure(rate=20.0)       # the allowed rate, changed at run time
    await service.configure(down_for=30.0)   # an outage: 502 to everything for 30 s
    stats = await service.stats()            # counters and a per-half-second timeline
    await service.stop()

    POST {url}/_control {"rate": 20, "down_for": 30, "error_share": 0.03, ...}
    GET  {url}/_stats

:class:`SpawnedRiskService` runs one in a process of its own (``python -m
benchmarks.risk_service``), with the same ``configure``/``stats``, so an aiostreams app's
load on the caller's event loop does not slow the answers it measures.

How each request is answered, in this order (the behaviour of the issue's fraud model):

1. **down** (an outage, ``down_for`` seconds from the control call): ``outage_status``
   (502 Bad Gateway: the process behind the proxy is gone), no ``Retry-After``;
2. **over the allowed rate**: a server-side token bucket of ``rate`` tokens a second,
   ``burst`` deep; a request that finds no token is answered 429 at once with
   ``Retry-After`` (whole seconds until the next token, at least 1: RFC 9110's
   delta-seconds) and, when ``rate_headers``, ``X-RateLimit-Limit``/``-Remaining``;
   admitted requests (whatever they answer next) take a token;
3. **over capacity** (when ``capacity`` is set): a request that finds ``capacity`` others
   being answered is answered 503 at once, without ``Retry-After`` (a concurrency-bound
   service); it gave its token back;
4. a share ``hang_share`` **hangs**: the answer comes after ``hang_seconds`` (a client's
   timeout fires first); a hung request does not hold a place of ``capacity`` (it is stuck
   downstream of the service's workers, which is why its workers cannot see it);
5. a share ``error_share`` answers **500** after its latency;
6. the rest answer **200** after a latency uniform in ``latency`` (10-80 ms).

Invariant (asserted): over any interval of length T the bucket admits at most
``burst + rate x T`` requests. Everything is counted on the server's own monotonic clock,
so the figures do not depend on how busy the client is.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import socket
import time
import zlib
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from aiohttp import web

from benchmarks.spawned_service import SpawnedService, serve_until_terminated

__all__ = ["TICK", "Behaviour", "RiskService", "SpawnedRiskService", "Stats"]

TICK = 0.5
"""Seconds of one bucket of the server's timeline."""


@dataclass(frozen=True)
class Behaviour:
    """How the service answers (see the module docstring); ``rate=None`` is no limit."""

    latency: tuple[float, float] = (0.010, 0.080)
    error_share: float = 0.03
    hang_share: float = 0.0
    hang_seconds: float = 60.0
    rate: float | None = None
    burst: float | None = None  # default: a fifth of a second's worth, at least 1
    rate_headers: bool = False
    capacity: int | None = None
    outage_status: int = 502
    seed: int = 35

    def __post_init__(self) -> None:
        low, high = self.latency
        if not 0 <= low <= high:
            raise ValueError(f"latency is (low, high) seconds with 0 <= low <= high; got "
                             f"{self.latency}")
        if not (0 <= self.error_share <= 1 and 0 <= self.hang_share <= 1
                and self.error_share + self.hang_share <= 1):
            raise ValueError("error_share and hang_share are shares in [0, 1] summing to "
                             f"at most 1; got {self.error_share}, {self.hang_share}")
        if self.rate is not None and self.rate <= 0:
            raise ValueError(f"rate is requests a second > 0 (or None: no limit); got "
                             f"{self.rate}")
        if self.capacity is not None and self.capacity < 1:
            raise ValueError(f"capacity is at least 1 request at once; got {self.capacity}")
        if self.burst is not None and self.burst < 1:
            raise ValueError(f"burst is at least 1 request; got {self.burst}")

    @property
    def depth(self) -> float:
        """The token bucket's depth (requests admitted at once after a quiet spell)."""
        if self.burst is not None:
            return self.burst
        return max(1.0, (self.rate or 0.0) / 5)


@dataclass
class Stats:
    """The service's counters; ``timeline[i]`` counts the half second ``i`` after start as
    ``[admitted, refused (429), errors (500), down (outage answers), busy (503 over
    capacity)]``; ``events`` are ``(seconds after start, what changed)``; ``in_flight`` is
    the requests being answered (hung ones not included)."""

    admitted: int = 0
    served: int = 0
    refused: int = 0
    busy: int = 0
    in_flight: int = 0
    most_in_flight: int = 0
    errors: int = 0
    hung: int = 0
    down: int = 0
    timeline: list[list[int]] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)


class _Bucket:
    """The server's rate limit: a token bucket (the invariant in the module docstring)."""

    def __init__(self, rate: float, depth: float, now: float) -> None:
        self.rate, self.depth = rate, depth
        self.tokens, self.at = depth, now

    def _refill(self, now: float) -> None:
        self.tokens = min(self.depth, self.tokens + max(0.0, now - self.at) * self.rate)
        self.at = max(self.at, now)

    def retune(self, rate: float, depth: float, now: float) -> None:
        """A new rate from ``now`` on, with a full bucket of its depth (a limiter's config
        push starts afresh)."""
        self.rate, self.depth = rate, depth
        self.tokens, self.at = depth, max(self.at, now)

    def give_back(self) -> None:
        self.tokens = min(self.depth, self.tokens + 1.0)

    def take(self, now: float) -> float:
        """0.0 and a token taken, or the seconds until the next token (none taken)."""
        self._refill(now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            assert self.tokens >= 0.0, "the bucket never admits on credit"
            return 0.0
        return (1.0 - self.tokens) / self.rate


class RiskService:
    """The risk model on the running event loop (everything it counts is read there)."""

    def __init__(self, behaviour: Behaviour | None = None) -> None:
        self.behaviour = behaviour or Behaviour()
        self.url = ""
        self._rng = random.Random(self.behaviour.seed)
        self._started = time.monotonic()
        self._bucket: _Bucket | None = None
        self._down_until = -math.inf
        self._stats = Stats()
        self._runner: web.AppRunner | None = None
        self._set_rate(self.behaviour)

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/score/{payment}", self._score)
        app.router.add_post("/_control", self._control)
        app.router.add_get("/_stats", self._stats_answer)
        # hung handlers would hold a graceful shutdown for hang_seconds: end them at once
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))  # the kernel picks a free port: never someone else's
        await web.SockSite(self._runner, sock).start()
        self._started = time.monotonic()
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def configure(self, *, rate: float | None = None, down_for: float | None = None,
                        error_share: float | None = None, hang_share: float | None = None
                        ) -> None:
        """Change the allowed rate, start an outage of ``down_for`` seconds (from now), or
        change the shares of 5xx and hangs; each change is logged in ``stats().events``."""
        changes: dict[str, Any] = {}
        if rate is not None:
            changes["rate"] = rate
        if error_share is not None:
            changes["error_share"] = error_share
        if hang_share is not None:
            changes["hang_share"] = hang_share
        if changes:
            self.behaviour = replace(self.behaviour, **changes)  # validates
            if rate is not None:
                self._set_rate(self.behaviour)
        now = time.monotonic()
        if down_for is not None:
            self._down_until = now + down_for
            changes["down_for"] = down_for
        self._stats.events.append((now - self._started, json.dumps(changes)))

    async def stats(self) -> Stats:
        return replace(self._stats, timeline=[list(t) for t in self._stats.timeline],
                       events=list(self._stats.events))

    def _set_rate(self, behaviour: Behaviour) -> None:
        now = time.monotonic()
        if behaviour.rate is None:
            self._bucket = None
        elif self._bucket is None:
            self._bucket = _Bucket(behaviour.rate, behaviour.depth, now)
        else:
            self._bucket.retune(behaviour.rate, behaviour.depth, now)

    def _count(self, column: int) -> None:
        tick = int((time.monotonic() - self._started) / TICK)
        timeline = self._stats.timeline
        while len(timeline) <= tick:
            timeline.append([0, 0, 0, 0, 0])
        timeline[tick][column] += 1

    async def _score(self, request: web.Request) -> web.Response:
        now = time.monotonic()
        behaviour, stats = self.behaviour, self._stats
        if now < self._down_until:
            stats.down += 1
            self._count(3)
            return web.Response(status=behaviour.outage_status, text="no healthy upstream")
        if self._bucket is not None:
            wait = self._bucket.take(now)
            if wait > 0:
                stats.refused += 1
                self._count(1)
                headers = {"Retry-After": str(max(1, math.ceil(wait)))}
                if behaviour.rate_headers:
                    headers.update(self._rate_headers())
                return web.Response(status=429, text="rate limit exceeded", headers=headers)
        draw = self._rng.random()
        hangs = draw < behaviour.hang_share
        if not hangs and behaviour.capacity is not None \
                and stats.in_flight >= behaviour.capacity:
            if self._bucket is not None:
                self._bucket.give_back()
            stats.busy += 1
            self._count(4)
            return web.Response(status=503, text="all workers busy")
        stats.admitted += 1
        self._count(0)
        if hangs:
            stats.hung += 1
            await asyncio.sleep(behaviour.hang_seconds)
            return web.Response(status=504, text="the model never answered")
        stats.in_flight += 1
        stats.most_in_flight = max(stats.most_in_flight, stats.in_flight)
        try:
            await asyncio.sleep(self._rng.uniform(*behaviour.latency))
        finally:
            stats.in_flight -= 1
        headers = self._rate_headers() if behaviour.rate_headers else {}
        if draw < behaviour.hang_share + behaviour.error_share:
            stats.errors += 1
            self._count(2)
            return web.Response(status=500, text="model error", headers=headers)
        stats.served += 1
        payment = request.match_info["payment"]
        score = (zlib.crc32(payment.encode()) % 1000) / 1000
        return web.json_response({"payment": payment, "score": score}, headers=headers)

    def _rate_headers(self) -> dict[str, str]:
        assert self._bucket is not None
        return {"X-RateLimit-Limit": f"{self._bucket.rate:g}",
                "X-RateLimit-Remaining": str(max(0, int(self._bucket.tokens)))}

    async def _control(self, request: web.Request) -> web.Response:
        body: dict[str, Any] = json.loads(await request.read())
        try:
            await self.configure(**body)
        except (TypeError, ValueError) as error:
            return web.Response(status=400, text=str(error))
        return web.json_response(asdict(self.behaviour))

    async def _stats_answer(self, request: web.Request) -> web.Response:
        return web.json_response(asdict(await self.stats()))


class SpawnedRiskService(SpawnedService):
    """A :class:`RiskService` in a child process, driven over its control endpoints
    (see :class:`~benchmarks.spawned_service.SpawnedService`)."""

    def __init__(self, behaviour: Behaviour | None = None) -> None:
        self.behaviour = behaviour or Behaviour()
        super().__init__("benchmarks.risk_service", json.dumps(asdict(self.behaviour)))

    async def configure(self, **changes: float) -> None:
        """The same as :meth:`RiskService.configure`, over HTTP."""
        async with self.session.post(f"{self.url}/_control", json=changes) as response:
            if response.status != 200:
                raise ValueError(await response.text())

    async def stats(self) -> Stats:
        async with self.session.get(f"{self.url}/_stats") as response:
            response.raise_for_status()
            body = await response.json()
        body["events"] = [tuple(e) for e in body["events"]]
        return Stats(**body)


def main() -> None:
    parser = argparse.ArgumentParser(description="the issue-35 risk model; prints its URL, "
                                     "serves until SIGTERM")
    parser.add_argument("behaviour", nargs="?", default="{}",
                        help='Behaviour fields as JSON, e.g. \'{"rate": 40}\'')
    args = parser.parse_args()
    fields: dict[str, Any] = json.loads(args.behaviour)
    if "latency" in fields:
        fields["latency"] = tuple(fields["latency"])
    run: Any = asyncio.run
    try:
        import uvloop
        run = uvloop.run
    except ImportError:
        pass
    run(serve_until_terminated(RiskService(Behaviour(**fields))))


if __name__ == "__main__":
    main()
