"""``python -m aiostreams.localcatalog fetch | run [--warehouse DIR] [--port P] [--timeout S]``:
copy the local Iceberg REST catalog's jars, or run one on 127.0.0.1.

``run`` prints the catalog's URI on stdout (what pyiceberg's ``RestCatalog(name, uri=...)``
takes) and, on stderr, how to use it; then keeps it up until Ctrl-C or SIGTERM and stops it.
Its tables stay in ``--warehouse`` (default: a temporary directory, removed at stop).
``--port P`` must be free. Exit codes: 0 stopped, 1 could not fetch or start (the message
says why: ``mvn`` or ``java`` missing, the port taken, Maven Central unreachable).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aiostreams.localcatalog.classpath import ensure_classpath
from aiostreams.localcatalog.errors import LocalCatalogError
from aiostreams.localcatalog.server import DEFAULT_START_TIMEOUT, LocalRestCatalog
from aiostreams.localjvm.cli import add_run_arguments, exit_code, run_until_signal


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aiostreams.localcatalog")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="copy the catalog's jars (mvn, once) and print where")
    run = commands.add_parser("run", help="start a REST catalog on 127.0.0.1 until Ctrl-C")
    run.add_argument("--warehouse", type=Path, default=None,
                     help="directory of the catalog's database and tables (default: a "
                          "temporary one, removed at stop)")
    add_run_arguments(run, port="HTTP port", timeout=DEFAULT_START_TIMEOUT,
                      first_run="the first fetch of the jars comes before and takes longer")
    args = parser.parse_args(argv)

    def command() -> int:
        if args.command == "fetch":
            print(ensure_classpath())
            return 0
        return _run(LocalRestCatalog(args.warehouse, port=args.port), args.timeout)

    return exit_code(command, LocalCatalogError)


def _run(catalog: LocalRestCatalog, timeout: float) -> int:
    def start() -> None:
        print("starting the Iceberg REST catalog (the first run copies its jars with mvn)...",
              file=sys.stderr, flush=True)
        catalog.start(timeout)

    def announce() -> None:
        print(catalog.uri)
        print(f"pyiceberg: RestCatalog('local', uri='{catalog.uri}'); tables' files under "
              f"{catalog.warehouse}", file=sys.stderr)
        print("(Ctrl-C stops the catalog)", file=sys.stderr)

    return run_until_signal(start, announce, catalog.stop)


if __name__ == "__main__":
    sys.exit(main())
