"""The ceiling of P1's HTTP variant on this machine: the HTTP calls alone, nothing else.

    python -m benchmarks.http_ceiling [--requests 30000] [--concurrency 1000] [--rounds 3]

P1 http (``python -m benchmarks p1``) has each record await a GET of a local aiohttp server
that answers after 5 ms (:mod:`benchmarks.peers.io_server`), through one shared
``aiohttp.ClientSession`` (:mod:`benchmarks.peers.record_io`). This runs that server and
``--concurrency`` coroutines doing nothing but those GETs: no Kafka, no engine, the event
loop and GC settings an aiostreams app uses (uvloop, :func:`aiostreams.app.tune_gc`). The
figure that matters is the client's CPU time per request: a contender's process pays it
for every record on top of its own per-record work (fetch, decode, produce, commit), on
one core. Issue 8's "P1 http >= 100 x Quix Streams" asks for 100 x Quix's rate, and Quix
makes the calls one at a time (5 ms of server wait plus ~0.7-2.3 ms of urllib here), so it
leaves a contender (5.7-7.3 ms) / 100 = 57-73 us of CPU per record in all. The
requests/s printed are also bounded by the server (one process on the same two cores).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time

import aiohttp

from aiostreams.app import run_event_loop, tune_gc


async def one_round(url: str, requests: int, concurrency: int) -> tuple[float, float]:
    """(requests/s, client CPU seconds per request) of one round."""
    todo = iter(range(requests))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def caller() -> None:
            for _ in todo:
                async with session.get(url) as response:
                    response.raise_for_status()
                    await response.read()

        async with session.get(url) as response:  # one call first: connection, imports
            await response.read()
        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(caller() for _ in range(concurrency)))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return requests / elapsed, cpu / requests


async def main_async(requests: int, concurrency: int, rounds: int,
                     seconds: float) -> dict[str, object]:
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.peers.io_server", "--port", "0",
        "--seconds", str(seconds), stdout=asyncio.subprocess.PIPE)
    try:
        assert server.stdout is not None
        line = (await server.stdout.readline()).decode()
        if not line.startswith("listening "):
            raise SystemExit(f"the I/O server did not start: {line!r}")
        url = line.split()[-1]
        results = [await one_round(url, requests, concurrency) for _ in range(rounds)]
    finally:
        server.terminate()
        await server.wait()
    return {"benchmark": "http_ceiling", "requests": requests, "concurrency": concurrency,
            "server_seconds": seconds, "rates": [r for r, _ in results],
            "cpu_us_per_request": [c * 1e6 for _, c in results],
            "rate": statistics.median(r for r, _ in results)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=30_000)
    parser.add_argument("--concurrency", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.005, help="the server's wait")
    args = parser.parse_args()
    tune_gc()
    r = run_event_loop(main_async(args.requests, args.concurrency, args.rounds, args.seconds))
    rates, cpus = r["rates"], r["cpu_us_per_request"]
    assert isinstance(rates, list) and isinstance(cpus, list)
    for rate, cpu in zip(rates, cpus, strict=True):
        print(f"  {rate:10,.0f} requests/s, {cpu:6.1f} us of client CPU per request")
    print(f"median: {statistics.median(cpus):.1f} us of client CPU per request (one core: at "
          f"most {1e6 / statistics.median(cpus):,.0f} requests/s with nothing else to do); "
          f"{r['rate']:,.0f} requests/s, also bounded by the one server process")
    print(json.dumps(r))


if __name__ == "__main__":
    main()
