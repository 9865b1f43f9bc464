"""The physical limit of P1's HTTP variant: a bare aiohttp client, no Kafka, against the
same local server (:mod:`benchmarks.peers.io_server`) with the same request the contenders
make (:class:`benchmarks.peers.record_io.RecordIO`: a GET of the URL, status checked, body
read, one unlimited connection pool). Its own process, as the contenders are.

    python -m benchmarks.peers.http_limit URL --requests N [--in-flight 1000,200,50]

It runs the requests once at each ``--in-flight`` level (the first is the contenders'
concurrency; an aiohttp client spends more CPU per request with more requests at once, so
the pair can do better at fewer), and measures, at each level, the client's CPU per
request and the server's (read from the server's ``GET /cpu``). Two limits follow:

- ``rate``: the best requests/s of the bare client at any level, measured;
- ``cpu_ceiling``: the machine's cores over the least client CPU plus the least server CPU
  per request seen at any level: what the pair could do if both had every core to
  themselves at their cheapest, Kafka and the framework costing nothing. No framework on
  this machine can make P1 http's requests faster.

It also times requests made one at a time (``sequential_s``, seconds a request): the
least time a chain of requests that wait for each other takes per request, which bounds
a hot key's records under key order (P1 http zipf).

Prints one JSON line: ``{"requests": N, "seconds": S, "cpu_seconds": C, "levels": [...],
"client_cpu_us": .., "server_cpu_us": .., "cores": .., "cpu_ceiling": .., "sequential_s":
..}`` (``seconds`` and ``cpu_seconds`` of the best level).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any
from urllib.parse import urljoin

import aiohttp


async def _get(session: aiohttp.ClientSession, url: str) -> None:
    """The contenders' request (:class:`~benchmarks.peers.record_io.RecordIO`)."""
    async with session.get(url) as response:
        response.raise_for_status()
        await response.read()


async def _server_cpu(session: aiohttp.ClientSession, url: str) -> float:
    async with session.get(urljoin(url, "cpu")) as response:
        response.raise_for_status()
        return float(await response.text())


async def measure(session: aiohttp.ClientSession, url: str, requests: int,
                  in_flight: int) -> dict[str, float]:
    """Seconds for ``requests`` GETs of ``url``, ``in_flight`` at a time (each of
    ``in_flight`` workers takes the next request as soon as its last one is answered),
    with the client's and the server's CPU seconds over them.

    Timed after an untimed warm-up of ``in_flight`` requests at once, which opens the
    pool's connections: the contenders are timed from their first output, by which time
    theirs are open too."""
    assert requests > 0 and in_flight > 0, (requests, in_flight)
    left = 0

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await _get(session, url)

    workers = min(in_flight, requests)
    left = workers
    await asyncio.gather(*(worker() for _ in range(workers)))
    left = requests
    server_started = await _server_cpu(session, url)
    started, cpu_started = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(workers)))
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    server = await _server_cpu(session, url) - server_started
    assert left == 0, f"{left} requests not made"
    return {"in_flight": in_flight, "rate": requests / seconds, "seconds": seconds,
            "cpu_seconds": cpu, "client_cpu_us": cpu / requests * 1e6,
            "server_cpu_us": server / requests * 1e6}


async def sequential(session: aiohttp.ClientSession, url: str, requests: int) -> float:
    """Seconds a GET of ``url`` takes when made one at a time (the mean over ``requests``,
    after one untimed request): the least a chain of requests that must wait for each other
    (one key's, under key order) takes per request."""
    assert requests > 0, requests
    await _get(session, url)
    started = time.perf_counter()
    for _ in range(requests):
        await _get(session, url)
    return (time.perf_counter() - started) / requests


async def measure_levels(url: str, requests: int, levels: list[int]) -> dict[str, Any]:
    """:func:`measure` at each level, the two limits of the module docstring, and
    :func:`sequential` on up to 200 requests."""
    assert levels, "at least one --in-flight level"
    async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=False)) as session:
        runs = [await measure(session, url, requests, level) for level in levels]
        one_at_a_time = await sequential(session, url, min(requests, 200))
    best = max(runs, key=lambda r: r["rate"])
    client = min(r["client_cpu_us"] for r in runs)
    server = min(r["server_cpu_us"] for r in runs)
    cores = os.cpu_count() or 1
    return {"requests": requests, "seconds": best["seconds"],
            "cpu_seconds": best["cpu_seconds"], "levels": runs, "client_cpu_us": client,
            "server_cpu_us": server, "cores": cores,
            "cpu_ceiling": cores * 1e6 / (client + server), "sequential_s": one_at_a_time}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url")
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--in-flight", default="1000,200,50",
                        help="comma-separated concurrency levels (default 1000,200,50)")
    args = parser.parse_args()
    levels = [int(x) for x in args.in_flight.split(",") if x.strip()]
    run = measure_levels(args.url, args.requests, levels)
    try:  # the same event loop as the raw loop and the server use when they can
        import uvloop
        result = uvloop.run(run)
    except ImportError:
        result = asyncio.run(run)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
