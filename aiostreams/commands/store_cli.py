"""The state stores' command line: ``aiostreams store upgrade MODULE:APP --store NAME``
(:mod:`aiostreams.commands.store_upgrade`).

:func:`register` adds it to the parser ``cli.py`` builds; the app gives the store's kind,
format and serdes, its changelog topic, the broker and the state directory."""

from __future__ import annotations

import argparse
from typing import Any

from aiostreams.commands.admin import RunTool
from aiostreams.commands.store_upgrade import upgrade_store
from aiostreams.commands.target import (
    apply_settings,
    client_transport,
    command_line_overrides,
    load_app,
)
from aiostreams.state.store_format import FORMATS


def register(commands: Any, common: argparse.ArgumentParser,
             settings: argparse.ArgumentParser, run_tool: RunTool) -> None:
    """Add ``store`` (``upgrade``) to ``commands``."""
    store = commands.add_parser("store", parents=[common], help="state stores: upgrade",
                                description="An app's state stores.")
    actions = store.add_subparsers(dest="store_command", metavar="ACTION", required=True,
                                   parser_class=type(store))
    upgrade = actions.add_parser(
        "upgrade", parents=[common, settings],
        help="rewrite a store's changelog and files in this version's format",
        description="Rewrite STORE's changelog (and delete this host's files of it that "
                    "are not in the store's format, to be restored from it) in the format "
                    "this version writes, converting each value: what to run when the app "
                    "stops with 'holds format ...'. Refused while the app's group has "
                    "members. Idempotent; run it on every host with a state directory.")
    upgrade.add_argument("app", metavar="MODULE:APP", help="the app, as for `aiostreams run`")
    upgrade.add_argument("--store", required=True, metavar="NAME", help="the store")
    upgrade.add_argument("--unmarked-as", metavar="FORMAT", choices=sorted(FORMATS),
                         help="the format of records without a format header (default: "
                              "what this store wrote before 2026-11-25; give the store's "
                              "own format for a changelog written between that change and "
                              "the markers)")
    upgrade.add_argument("--dry-run", action="store_true",
                         help="say what would change; change nothing")
    upgrade.set_defaults(handler=lambda args: run_tool(_upgrade(args)))


async def _upgrade(args: argparse.Namespace) -> int:
    app = load_app(args.app)
    apply_settings(app, command_line_overrides(args.broker, args.set), args.config)
    transport = client_transport(app.settings, args.connect_timeout)
    return await upgrade_store(app, transport, args.store, unmarked_as=args.unmarked_as,
                               dry_run=args.dry_run)
