"""``python -m aiostreams.localregistry build | run [--port P] [--timeout S]``: build the
local schema registry, or run one on 127.0.0.1.

``run`` prints the registry's URL (its Confluent-compatible API, what
``SchemaRegistryClient`` takes) on stdout and, on stderr, the variable the test suite reads
(``AIOSTREAMS_SCHEMA_REGISTRY``); then keeps it up until Ctrl-C or SIGTERM and stops it.
Schemas are kept in memory: they are gone when it stops. ``--port P`` must be free.
Exit codes: 0 stopped, 1 could not build or start (the message says why: ``mvn`` or
``java`` missing, the port taken, the build failed).
"""

from __future__ import annotations

import argparse
import sys

from aiostreams.localjvm.cli import add_run_arguments, exit_code, run_until_signal
from aiostreams.localregistry.build import ensure_runner
from aiostreams.localregistry.errors import LocalRegistryError
from aiostreams.localregistry.registry import DEFAULT_START_TIMEOUT, LocalRegistry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aiostreams.localregistry")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build the registry (mvn, once) and print its jar")
    run = commands.add_parser("run", help="start a registry on 127.0.0.1 until Ctrl-C")
    add_run_arguments(run, port="HTTP port", timeout=DEFAULT_START_TIMEOUT,
                      first_run="the first build comes before and takes longer")
    args = parser.parse_args(argv)

    def command() -> int:
        if args.command == "build":
            print(ensure_runner())
            return 0
        return _run(LocalRegistry(port=args.port), args.timeout)

    return exit_code(command, LocalRegistryError)


def _run(registry: LocalRegistry, timeout: float) -> int:
    def start() -> None:
        print("starting the schema registry (the first run builds it with mvn: a few "
              "minutes)...", file=sys.stderr, flush=True)
        registry.start(timeout)

    def announce() -> None:
        print(registry.url)
        print(f"export AIOSTREAMS_SCHEMA_REGISTRY={registry.url}", file=sys.stderr)
        print("(Ctrl-C stops the registry; its schemas are kept in memory only)",
              file=sys.stderr)

    return run_until_signal(start, announce, registry.stop)


if __name__ == "__main__":
    sys.exit(main())
