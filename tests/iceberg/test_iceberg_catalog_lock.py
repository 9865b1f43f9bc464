"""The default SQL catalog waits for SQLite's lock: another process holding it (a second
worker's commit, a reader's catalog) longer than sqlite3's 5-s default no longer fails the
sink's commit with ``database is locked``."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from aiostreams.sinks.iceberg_table import CATALOG_LOCK_WAIT, default_catalog

HELD = 6.0
"""Longer than sqlite3's default wait (5 s), well inside ours."""


def test_a_catalog_change_waits_out_a_lock_held_longer_than_sqlites_default(
        tmp_path: Path) -> None:
    assert CATALOG_LOCK_WAIT > HELD
    catalog = default_catalog(tmp_path)
    catalog.create_namespace("lake")  # the catalog's tables exist
    holder = sqlite3.connect(tmp_path / "catalog.db", isolation_level=None,
                             check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    released = threading.Event()
    timer = threading.Timer(HELD, lambda: (holder.execute("COMMIT"), released.set()))
    timer.start()
    try:
        catalog.create_namespace("after_the_lock")  # waits for the holder's commit
        assert released.is_set()
        assert ("after_the_lock",) in catalog.list_namespaces()
    finally:
        timer.join()
        holder.close()
