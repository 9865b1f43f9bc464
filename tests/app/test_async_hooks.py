"""Callbacks the app calls without awaiting refuse an ``async def`` when registered: it
would be called, never awaited, and Python would say "coroutine ... was never awaited" at
exit, far from the mistake (an async ``combine=`` of a coalesced lookup did: its coroutine
became the record's value, which the sink refused)."""

from __future__ import annotations

import asyncio
import gc
import warnings
from typing import Any

import pytest

from aiostreams import App, ConfigError, TopologyError


async def listener(*_: Any) -> None:
    pass


def test_an_async_commit_listener_is_refused_naming_the_fix() -> None:
    app = App("hooks", broker="memory://hooks")
    with pytest.raises(ConfigError, match=r"on_commit\(\) got the coroutine function "
                                          r"'listener'.*pass a plain def"):
        app.on_commit(listener)


@pytest.mark.parametrize("option", ["combine", "coalesce_by"])
def test_an_async_combine_or_lookup_key_of_a_lookup_step_is_refused(option: str) -> None:
    app = App("hooks", broker="memory://hooks")
    orders = app.topic("orders", key=str, value=str)
    customers = app.service("customers")

    async def fetch_profile(customer: str) -> str:
        return customer

    async def helper(*_: Any) -> str:
        return ""

    options: dict[str, Any] = {"coalesce_by": lambda v: v, "combine": lambda v, p: v,
                               option: helper}
    with pytest.raises(TopologyError, match=rf"map_values_async\({option}=\.\.\.\) got the "
                                            r"coroutine function 'helper'.*plain def"):
        app.stream(orders).map_values_async(fetch_profile, service=customers, **options)


def test_an_async_late_record_hook_is_refused_naming_the_fix() -> None:
    app = App("hooks", broker="memory://hooks")
    with pytest.raises(ConfigError, match=r"on_late\(\) got the coroutine function"):
        app.late_records.on_late(listener)


async def test_an_app_with_an_async_lookup_and_plain_hooks_leaves_no_coroutine_unawaited(
        ) -> None:
    """The issue's app: an async lookup through a service, coalesced and memoized, plus a
    commit listener; stopped while lookups are still out."""
    app = App("lookup-exit", broker="memory://lookup-exit", commit_interval_ms=10,
              drain_timeout=0.2)
    orders = app.topic("orders", key=str, value=str, partitions=2)
    customers = app.service("customers", concurrency=2)
    out = app.topic("enriched", key=str, value=str, partitions=2)
    asked, never = asyncio.Event(), asyncio.Event()

    async def fetch_profile(customer: str) -> str:
        if customer != "c0":  # c0 answers, so records retire and commits happen
            asked.set()
            await never.wait()
        return customer.upper()

    (app.stream(orders)
     .map_values_async(fetch_profile, service=customers, coalesce_by=lambda v: v[:2],
                       combine=lambda v, profile: f"{v}:{profile}")
     .to(out))
    committed = asyncio.Event()
    app.on_commit(lambda _entry: committed.set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with app:
            for i in range(20):
                await app.send(orders, f"k{i % 5}", f"c{i % 3}-{i}")
            await asked.wait()
            async with asyncio.timeout(10):
                await committed.wait()
        del app
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []
