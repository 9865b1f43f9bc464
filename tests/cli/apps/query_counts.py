"""Counts per key for the interactive-query tests with ``--workers``: ``{QUERY_PREFIX}-words``
(2 partitions) counted into store ``counts``, the updates to ``{QUERY_PREFIX}-counts``. The
broker comes from ``--broker``."""

from __future__ import annotations

import os

from aiostreams import App

PREFIX = os.environ.get("QUERY_PREFIX", "query")

app = App(f"query-{PREFIX}", commit_interval_ms=50)
words = app.topic(f"{PREFIX}-words", key=str, value=str, partitions=2)
counts = app.topic(f"{PREFIX}-counts", key=str, value=int, partitions=2)
app.stream(words).group_by_key().count(materialized="counts").to_stream().to(counts)
