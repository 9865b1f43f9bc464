"""The local I/O dependency of P1's HTTP variant: an aiohttp server on 127.0.0.1 whose one
route sleeps ``--seconds`` and answers ``ok``. Its own process, started and stopped by the
harness (:func:`benchmarks.peers.runner.io_server`). ``GET /cpu`` answers the CPU seconds
the server process has used so far (``time.process_time()``), so that a client can measure
the server's CPU per request (:mod:`benchmarks.peers.http_limit`).

    python -m benchmarks.peers.io_server --port 0 [--seconds 0.005]

Prints ``listening http://127.0.0.1:<port>/`` once it accepts connections (``--port 0``: a
free port), and serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time

from aiohttp import web


async def serve(port: int, seconds: float) -> None:
    async def handle(request: web.Request) -> web.Response:
        await asyncio.sleep(seconds)
        return web.Response(text="ok")

    async def cpu(request: web.Request) -> web.Response:
        return web.Response(text=repr(time.process_time()))

    app = web.Application()
    app.router.add_get("/", handle)
    app.router.add_get("/cpu", cpu)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=4096)
    await site.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    bound = runner.addresses[0][1]
    print(f"listening http://127.0.0.1:{bound}/", flush=True)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=0.005)
    args = parser.parse_args()
    try:
        import uvloop
        uvloop.run(serve(args.port, args.seconds))
    except ImportError:
        asyncio.run(serve(args.port, args.seconds))


if __name__ == "__main__":
    main()
