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
import sys

from aiostreams.localjvm.cli import add_run_arguments, exit_code, run_until_signal
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
    for subcommand in (fetch, run):
        subcommand.add_argument(
            "--version", default=None, choices=sorted(RELEASES),
            help=f"the Kafka release (default: ${VERSION_VARIABLE}, else "
                 f"{DEFAULT_KAFKA_VERSION})")
    add_run_arguments(run, port="client port", timeout=60.0,
                      first_run="the first download of the jars comes before")
    args = parser.parse_args(argv)

    def command() -> int:
        if args.command == "fetch":
            print(LocalKafka(version=args.version).ensure_jars())
            return 0
        return _run(LocalKafka(port=args.port, version=args.version), args.timeout)

    return exit_code(command, LocalKafkaError)


def broker_variables(bootstrap: str) -> str:
    """A line to paste into a shell: apps read the first variable, the tests the second."""
    return f"export AIOSTREAMS_BROKER=kafka://{bootstrap} AIOSTREAMS_KAFKA={bootstrap}"


def _run(kafka: LocalKafka, timeout: float) -> int:
    def announce() -> None:
        print(kafka.bootstrap)
        print(broker_variables(kafka.bootstrap), file=sys.stderr)
        print("(Ctrl-C stops the broker)", file=sys.stderr)

    return run_until_signal(lambda: kafka.start(timeout), announce, kafka.stop)


if __name__ == "__main__":
    sys.exit(main())
