"""The physical limit of P1's HTTP variant: a bare aiohttp client, no Kafka, keeping
``--in-flight`` requests at once against the same local server
(:mod:`benchmarks.peers.io_server`) with the same request the contenders make
(:class:`benchmarks.peers.record_io.RecordIO`: a GET of the URL, status checked, body read,
one unlimited connection pool). Its own process, as the contenders are.

    python -m benchmarks.peers.http_limit URL --requests N [--in-flight 1000]

Prints one JSON line: ``{"requests": N, "seconds": S, "cpu_seconds": C}``. No framework
on this machine can make P1 http's requests faster than this client alone does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import aiohttp


async def measure(url: str, requests: int, in_flight: int) -> dict[str, float]:
    """Seconds for ``requests`` GETs of ``url``, ``in_flight`` at a time (each of
    ``in_flight`` workers takes the next request as soon as its last one is answered).

    Timed after an untimed warm-up of ``in_flight`` requests at once, which opens the
    pool's connections: the contenders are timed from their first output, by which time
    theirs are open too."""
    assert requests > 0 and in_flight > 0, (requests, in_flight)
    left = 0
    async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, force_close=False)) as session:
        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                async with session.get(url) as response:
                    response.raise_for_status()
                    await response.read()

        workers = min(in_flight, requests)
        left = workers
        await asyncio.gather(*(worker() for _ in range(workers)))
        left = requests
        started, cpu_started = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker() for _ in range(workers)))
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
    assert left == 0, f"{left} requests not made"
    return {"requests": requests, "seconds": seconds, "cpu_seconds": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url")
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--in-flight", type=int, default=1000)
    args = parser.parse_args()
    run = measure(args.url, args.requests, args.in_flight)
    try:  # the same event loop as the raw loop and the server use when they can
        import uvloop
        result = uvloop.run(run)
    except ImportError:
        result = asyncio.run(run)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
