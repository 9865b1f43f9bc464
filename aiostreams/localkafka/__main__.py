"""``python -m aiostreams.localkafka fetch|run [--version V]``: download the broker's jars, or
run a broker (of release ``V``: 4.4.0 or 3.9.1; default ``$AIOSTREAMS_KAFKA_VERSION``).

``run`` prints the bootstrap address on stdout, and on stderr the variables to export:
``AIOSTREAMS_BROKER=kafka://...`` (what apps, examples and the CLI read) and
``AIOSTREAMS_KAFKA=...`` (what the test suite and benchmarks read); then keeps the broker up
until Ctrl-C or SIGTERM, stops it and removes its data. ``--port P`` must be free: a port
another process holds is refused before anything starts.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from aiostreams.localkafka import (
    DEFAULT_KAFKA_VERSION,
    RELEASES,
    VERSION_VARIABLE,
    LocalKafka,
    LocalKafkaError,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aiostreams.localkafka")
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("fetch", help="download the broker's jars into the cache")
    run = commands.add_parser("run", help="start a broker on 127.0.0.1 until Ctrl-C/SIGTERM")
    for command in (fetch, run):
        command.add_argument(
            "--version", default=None, choices=sorted(RELEASES),
            help=f"the Kafka release (default: ${VERSION_VARIABLE}, else "
                 f"{DEFAULT_KAFKA_VERSION})")
    run.add_argument("--port", type=int, default=None, help="client port (default: a free one)")
    run.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for start")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            print(LocalKafka(version=args.version).ensure_jars())
            return 0
        return _run(LocalKafka(port=args.port, version=args.version), args.timeout)
    except LocalKafkaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def broker_variables(bootstrap: str) -> str:
    """A line to paste into a shell: apps read the first variable, the tests the second."""
    return f"export AIOSTREAMS_BROKER=kafka://{bootstrap} AIOSTREAMS_KAFKA={bootstrap}"


def _run(kafka: LocalKafka, timeout: float) -> int:
    done = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        done.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        kafka.start(timeout)
        print(kafka.bootstrap)
        print(broker_variables(kafka.bootstrap), file=sys.stderr)
        print("(Ctrl-C stops the broker)", file=sys.stderr)
        sys.stdout.flush()
        done.wait()
    finally:
        kafka.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
