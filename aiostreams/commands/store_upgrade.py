"""``aiostreams store upgrade MODULE:APP --store NAME``: rewrite a store's changelog and
local files in the format this code writes (:mod:`aiostreams.state.store_format`).

Why a rewrite, not a reset: a reset (delete the files and the changelog's records) leaves
the store empty, exact again only if the app re-reads all of its input from the start,
which the input's retention rarely allows. The changelog already holds the state: each
record's value converts exactly (``window-timed/1`` carried its timestamp already) or with
the timestamp Kafka Streams uses for the same upgrade (``kv/1`` values get the changelog
record's own timestamp; see :func:`~aiostreams.state.store_format.convert`).

The steps, each safe to repeat (the command is idempotent, and a run cut short is taken up
by the next one):

1. Refuse while the app's consumer group has members: a running worker would write the old
   changelog on, or restore from a half-written one.
2. Read the changelog from its start to its end (committed records only), keep the newest
   record of each key per partition (what a restore ends with), and convert every value
   that is not in the store's format: unmarked records are read as
   ``StoreFormat.unmarked`` (``--unmarked-as`` says otherwise: ``kv-timestamped/2`` for a
   changelog written between the format change of 2026-11-25 and the markers). Each
   converted value must decode with the store's serde, or nothing is changed. Nothing to
   convert: the changelog is left alone (step 4 still runs).
3. Save that state to a staging file (``<state_dir>/.store-upgrade/<changelog>.json``,
   fsynced), delete the changelog topic, create it again (same partitions and config) and
   write the staged records with their timestamps and the format header; then delete the
   staging file. A run that finds a staging file starts here.
4. Delete the store's local files on this host that are not in the store's format (all of
   them after a rewrite: the changelog's offsets start again from 0), and their
   checkpoint entries: the next start restores them from the changelog.

Other hosts with a state directory: run the command there too (step 4 only, as the
changelog is done), or the app refuses their old files on open, saying so.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from aiostreams.commands import CommandError, UsageError
from aiostreams.state.checkpoint import CHECKPOINT_FILE, Checkpoint
from aiostreams.state.sqlite_file import delete_files
from aiostreams.state.store_format import (
    FORMATS,
    StoreFormat,
    changelog_headers,
    convert,
    format_in,
    store_format_of,
)
from aiostreams.state.store_spec import changelog_topic
from aiostreams.topology.topology import StoreSpec
from aiostreams.transport.base import IsolationLevel, TopicSpec, Transport
from aiostreams.transport.kafka_instance_fence import STATIC_MEMBERS_LINGER
from aiostreams.types import OutgoingRecord, RawRecord, TopicPartition

__all__ = ["upgrade_store"]

Staged = dict[int, dict[bytes, tuple[bytes, float]]]
"""Partition -> key bytes -> (value bytes in the store's format, record timestamp)."""

TOPIC_WAIT = 30.0
"""Seconds to wait for the broker to let the deleted changelog be created again."""


async def upgrade_store(app: Any, transport: Transport, store: str, *,
                        unmarked_as: str | None = None, dry_run: bool = False,
                        say: Callable[[str], None] = print) -> int:
    """See the module docstring. Returns the exit code (0). Raises :class:`UsageError`
    for a store the app does not have, :class:`CommandError` when the group has members
    or a value does not convert. Cancellation: stops where it is; run it again."""
    spec = _spec(app, store)
    instance = spec.factory()
    fmt = store_format_of(instance)
    source = fmt.unmarked if unmarked_as is None else unmarked_as
    if source not in FORMATS:
        raise UsageError(f"--unmarked-as {source!r} is not a format; one of {sorted(FORMATS)}")
    app_id = app.name
    topic = changelog_topic(app_id, store)
    state_dir: Path | None = app.settings.state_dir
    await _refuse_running(transport, app_id)
    staging = _staging_path(state_dir, topic)
    rewritten = False
    if spec.logged:
        staged = _load(staging) if staging.exists() else None
        if staged is None:
            staged = await _read_converted(transport, topic, store, fmt, source,
                                           instance.value_serde, say)
            if staged is not None and not dry_run:
                _save(staging, staged)
        if staged is not None:
            if dry_run:
                say(f"dry run: would rewrite {topic} ({_count(staged)} record(s)) as "
                    f"{fmt.id}")
            else:
                await _rewrite(transport, topic, spec, fmt, staged)
                staging.unlink()
                rewritten = True
                say(f"rewrote changelog {topic}: {_count(staged)} record(s) in format "
                    f"{fmt.id}")
    if state_dir is not None:
        _drop_local_files(state_dir, store, topic, fmt, everything=rewritten,
                          dry_run=dry_run, say=say)
    say(f"store {store!r} is in format {fmt.id}" + (" (dry run)" if dry_run else ""))
    return 0


def _spec(app: Any, store: str) -> StoreSpec:
    specs: dict[str, StoreSpec] = {s.name: s for sub in app.build() for s in sub.stores}
    if store not in specs:
        raise UsageError(f"app {app.name!r} has no store {store!r}; its stores: "
                         f"{sorted(specs) or 'none'}")
    return specs[store]


async def _refuse_running(transport: Transport, group: str) -> None:
    broker = getattr(transport, "broker", None)
    if broker is not None:  # memory://: the group lives in this process
        members = broker.member_count(group)
    else:
        from aiostreams.commands.groups import _Clients, _kafka

        async with _Clients(_kafka(transport)) as clients:
            members = len((await clients.describe(group)).members)
    if members:
        raise CommandError(
            f"the app's group {group!r} has {members} member(s): stop every instance of "
            "the app first (a running worker would write the old format on, or restore a "
            f"half-written changelog); nothing was changed. {STATIC_MEMBERS_LINGER}")


async def _read_converted(transport: Transport, topic: str, store: str, fmt: StoreFormat,
                          source: str, serde: Any, say: Callable[[str], None]
                          ) -> Staged | None:
    """The changelog's final state in ``fmt``; None when it is all in ``fmt`` already."""
    admin = transport.admin()
    await admin.start()
    try:
        partitions = await admin.partitions_for(topic)
    finally:
        await admin.stop()
    if partitions is None:
        say(f"no changelog {topic} (nothing to rewrite)")
        return None
    consumer = transport.consumer(None, client_id=f"{topic}-upgrade",
                                  isolation_level=IsolationLevel.READ_COMMITTED)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        starts = await consumer.beginning_offsets(tps)
        ends = await consumer.end_offsets(tps)
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, starts[tp])
        staged: Staged = {p: {} for p in range(partitions)}
        converted = 0
        left = {tp for tp in tps if starts[tp] < ends[tp]}
        while left:
            for tp, records in (await consumer.getmany(1.0)).items():
                for record in records:
                    if record.offset < ends[tp]:
                        converted += _stage(staged[tp.partition], record, store, fmt,
                                            source, serde)
                if await consumer.position(tp) >= ends[tp]:
                    left.discard(tp)
    finally:
        await consumer.stop()
    if not converted:
        say(f"changelog {topic} is in format {fmt.id} already")
        return None
    say(f"read {topic}: {converted} record(s) to convert to {fmt.id}")
    return staged


def _stage(into: dict[bytes, tuple[bytes, float]], record: RawRecord, store: str,
           fmt: StoreFormat, source: str, serde: Any) -> int:
    """Keep ``record`` as its key's newest state in ``fmt``; 1 if it was converted."""
    if record.key is None:
        raise CommandError(f"{record.topic}[{record.partition}] offset {record.offset}: a "
                           "null key; this topic holds records the store did not write")
    if record.value is None:
        into.pop(record.key, None)
        return 0
    found = format_in(record.headers)
    was = source if found is None else found
    try:
        value = convert(record.value, was, fmt.id, timestamp=record.timestamp)
        serde.deserialize(store, value)
    except Exception as error:
        raise CommandError(
            f"{record.topic}[{record.partition}] offset {record.offset}: a value of format "
            f"{was!r}{' (unmarked)' if found is None else ''} does not convert to "
            f"{fmt.id!r}: {type(error).__name__}: {error}. Nothing was changed. If this "
            "changelog was written between the format change of 2026-11-25 and the format "
            f"markers, pass --unmarked-as {fmt.id}") from None
    into[record.key] = (value, record.timestamp)
    return int(was != fmt.id)


async def _rewrite(transport: Transport, topic: str, spec: StoreSpec, fmt: StoreFormat,
                   staged: Staged) -> None:
    admin = transport.admin()
    await admin.start()
    try:
        if await admin.partitions_for(topic) is not None:
            await admin.delete_topics([topic])
        deadline = time.monotonic() + TOPIC_WAIT
        while True:  # a broker may still be deleting it: try again until the deadline
            try:
                await admin.create_topics([TopicSpec(topic, len(staged),
                                                     config=dict(spec.changelog_config))])
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
                continue
            if await admin.partitions_for(topic) == len(staged):
                break
    finally:
        await admin.stop()
    headers = changelog_headers(fmt)
    producer = transport.producer(client_id=f"{topic}-upgrade")
    await producer.start()
    try:
        await producer.send_batch([
            OutgoingRecord(topic, key, value, ts, headers, partition)
            for partition, rows in sorted(staged.items())
            for key, (value, ts) in rows.items()])
        await producer.flush()
    finally:
        await producer.stop()


def _drop_local_files(state_dir: Path, store: str, topic: str, fmt: StoreFormat, *,
                      everything: bool, dry_run: bool, say: Callable[[str], None]) -> None:
    """Delete ``store``'s files under ``state_dir`` not in ``fmt`` (all when
    ``everything``), with their checkpoint entries."""
    if not state_dir.is_dir():
        return
    for path in sorted(state_dir.glob(f"*/{store}.sqlite")):
        found = _file_format(path)
        if not everything and (found == fmt.id or (found is None and fmt.accepts_unmarked)):
            continue
        if dry_run:
            say(f"dry run: would delete {path} (format {found or 'unmarked'})")
            continue
        checkpoint = Checkpoint(path.parent / CHECKPOINT_FILE)
        saved = checkpoint.read()
        kept = {tp: off for tp, off in saved.items() if tp.topic != topic}
        if kept != saved:
            checkpoint.write(kept)
        delete_files(path)
        say(f"deleted {path} (format {found or 'unmarked'}); it restores from {topic}")


def _file_format(path: Path) -> str | None:
    import sqlite3

    db = sqlite3.connect(path)
    try:
        if not db.execute("SELECT count(*) FROM sqlite_master WHERE type='table' "
                          "AND name='meta'").fetchone()[0]:
            return None
        row = db.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
        return None if row is None else str(row[0])
    finally:
        db.close()


def _staging_path(state_dir: Path | None, topic: str) -> Path:
    base = Path(state_dir) if state_dir is not None else Path.cwd()
    return base / ".store-upgrade" / f"{topic}.json"


def _count(staged: Staged) -> int:
    return sum(map(len, staged.values()))


def _save(path: Path, staged: Staged) -> None:
    doc = {str(p): [[base64.b64encode(k).decode(), base64.b64encode(v).decode(), ts]
                    for k, (v, ts) in rows.items()] for p, rows in staged.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(orjson.dumps(doc))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _load(path: Path) -> Staged:
    doc = orjson.loads(path.read_bytes())
    return {int(p): {base64.b64decode(k): (base64.b64decode(v), float(ts))
                     for k, v, ts in rows} for p, rows in doc.items()}
