"""``aiostreams dlq show | replay TOPIC``: read dead letters, and send them back once fixed.

A dead letter (see :mod:`aiostreams.engine.failure`) is the failed record's original key and
value bytes with ``aiostreams.dlq.*`` headers naming the error and the record's origin.

``show`` prints each readably (``--traceback`` adds the traceback). ``replay`` re-publishes
each to its origin topic: the original key and value bytes, the original timestamp, the
record's own headers (the ``aiostreams.dlq.*`` ones removed, an ``aiostreams.replayed-from``
one added), partitioned by key as any producer would. It remembers how far it got in a
consumer group (``--group``, default ``aiostreams-dlq-replay-<topic>``), committed only
after the re-published records are durable, so running it again replays only dead letters
that arrived since (``--from-beginning`` replays everything again). ``--dry-run`` lists
what would be replayed and changes nothing.

``--exception NAME`` (repeatable: any of them) and ``--header NAME[=VALUE]`` (repeatable:
all of them) replay only the dead letters that match (:class:`LetterFilter`); the others
stay where they are, and are counted by exception. A filtered replay keeps its position in a
group of its own (the default group's name followed by the filter), so a later replay with
another filter, or none, still finds what this one left.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

from aiostreams.commands import CommandError, UsageError
from aiostreams.commands.reader import Start, TopicReader
from aiostreams.commands.render import Decoder, header_name, header_text, show, timestamp
from aiostreams.engine.failure import DLQ_HEADER_PREFIX
from aiostreams.transport.base import Transport
from aiostreams.types import Headers, OutgoingRecord, RawRecord

REPLAYED_FROM = "aiostreams.replayed-from"


@dataclass(frozen=True)
class DeadLetter:
    """A record of a dead-letter topic, with its ``aiostreams.dlq.*`` headers parsed."""

    record: RawRecord
    exception: str
    message: str
    traceback: str
    attempts: str
    origin_topic: str
    origin_partition: str
    origin_offset: str
    processor: str
    failed_at: float | None
    headers: Headers
    """The failed record's own headers (without the ``aiostreams.dlq.*`` ones)."""

    @classmethod
    def parse(cls, record: RawRecord) -> DeadLetter | None:
        """None when the record has no ``aiostreams.dlq.topic`` header (not a dead letter
        aiostreams wrote)."""
        dlq: dict[str, str] = {}
        own: list[tuple[str, bytes | None]] = []
        for name, value in record.headers:
            if name.startswith(DLQ_HEADER_PREFIX):
                dlq[name.removeprefix(DLQ_HEADER_PREFIX)] = header_text(value) or ""
            else:
                own.append((name, value))
        if "topic" not in dlq:
            return None
        try:
            failed_at: float | None = float(dlq["timestamp"])
        except (KeyError, ValueError):
            failed_at = None
        return cls(record, dlq.get("exception", "?"), dlq.get("message", ""),
                   dlq.get("traceback", ""), dlq.get("attempts", "?"), dlq["topic"],
                   dlq.get("partition", "?"), dlq.get("offset", "?"),
                   dlq.get("processor", "?"), failed_at, tuple(own))

    @property
    def where(self) -> str:
        r = self.record
        return f"{r.topic}[{r.partition}]@{r.offset}"

    @property
    def origin(self) -> str:
        return f"{self.origin_topic}[{self.origin_partition}]@{self.origin_offset}"


Decoders = dict[str, tuple[Decoder, Decoder]]
"""Origin topic → (key decoder, value decoder); ``""`` is the fallback."""


def _decoders_for(decoders: Decoders, topic: str) -> tuple[Decoder, Decoder]:
    return decoders.get(topic) or decoders[""]


def format_dead_letter(letter: DeadLetter, decoders: Decoders, *, with_traceback: bool) -> str:
    key, value = _decoders_for(decoders, letter.origin_topic)
    failed = timestamp(letter.failed_at) if letter.failed_at is not None else "?"
    lines = [
        f"dead letter {letter.where}",
        f"  origin     {letter.origin}",
        f"  processor  {letter.processor}",
        f"  exception  {letter.exception}: {letter.message}",
        f"  attempts   {letter.attempts}",
        f"  failed at  {failed}",
        f"  key        {show(key(letter.record.key))}",
        f"  value      {show(value(letter.record.value))}",
    ]
    if letter.headers:
        lines.append("  headers    " + ", ".join(f"{header_name(n)}: {header_text(v)!r}"
                                                   for n, v in letter.headers))
    if with_traceback and letter.traceback:
        lines.append("  traceback")
        lines.extend("    " + line for line in letter.traceback.rstrip().splitlines())
    return "\n".join(lines)


async def show_dead_letters(transport: Transport, topic: str, *, limit: int | None,
                            decoders: Decoders, with_traceback: bool) -> int:
    """Print the dead letters of ``topic`` (the first ``limit``), then how many records the
    topic holds: records read, not offsets (transaction markers and compacted records
    take offsets too)."""
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}")
    shown = other = read = 0
    async with TopicReader(transport, topic) as reader:
        await reader.seek(Start.BEGINNING)
        # one past the limit tells whether more follow, without reading the whole topic
        async for record in reader.records(follow=False,
                                           limit=None if limit is None else limit + 1):
            read += 1
            if limit is not None and read > limit:
                continue  # the reader ends here, past its limit
            letter = DeadLetter.parse(record)
            if letter is None:
                other += 1
                print(f"record {record.topic}[{record.partition}]@{record.offset} has no "
                      f"{DLQ_HEADER_PREFIX}topic header: not a dead letter", flush=True)
                continue
            if shown:
                print(flush=True)
            print(format_dead_letter(letter, decoders, with_traceback=with_traceback),
                  flush=True)
            shown += 1
    note = f", {other} other record(s)" if other else ""
    if limit is not None and read > limit:
        print(f"\n{shown} dead letter(s) shown{note}; more follow in {topic!r} (--limit "
              f"{limit})", flush=True)
    else:
        print(f"\n{shown} dead letter(s) shown{note}; {read} record(s) in {topic!r}",
              flush=True)
    return 0


@dataclass(frozen=True)
class LetterFilter:
    """Which dead letters a replay sends: those whose exception is one of ``exceptions``
    (the ``aiostreams.dlq.exception`` header, the exception's class name; any when
    empty) and that carry every header of ``headers`` (``(name, value)``; a value of None
    asks only that the header be there). Headers are the dead letter's own and its
    ``aiostreams.dlq.*`` ones, so ``aiostreams.dlq.processor=enrich`` selects by node."""

    exceptions: tuple[str, ...] = ()
    headers: tuple[tuple[str, str | None], ...] = ()

    @classmethod
    def parse(cls, exceptions: list[str], headers: list[str]) -> LetterFilter:
        wanted: list[tuple[str, str | None]] = []
        for item in headers:
            name, equals, value = item.partition("=")
            if not name:
                raise UsageError(f"--header {item!r}: expected NAME=VALUE or NAME, e.g. "
                                 "--header aiostreams.dlq.processor=enrich")
            wanted.append((name, value if equals else None))
        # a canonical order: the same filter written in another order keeps one position
        return cls(tuple(sorted(set(exceptions))),
                   tuple(sorted(set(wanted), key=lambda h: (h[0], h[1] or ""))))

    def __bool__(self) -> bool:
        return bool(self.exceptions or self.headers)

    def matches(self, letter: DeadLetter) -> bool:
        if self.exceptions and letter.exception not in self.exceptions:
            return False
        present = [(name, header_text(value)) for name, value in letter.record.headers]
        return all(any(n == name and (value is None or v == value) for n, v in present)
                   for name, value in self.headers)

    def describe(self) -> str:
        """As the command line wrote it, e.g. ``--exception KeyError --header a=b``."""
        return " ".join([*(f"--exception {e}" for e in self.exceptions),
                         *(f"--header {n}" + ("" if v is None else f"={v}")
                           for n, v in self.headers)])

    def default_group(self, topic: str) -> str:
        """A replay position per filter: rerunning a filter replays only newer matches,
        and another filter (or none) still finds the letters this one left."""
        base = f"aiostreams-dlq-replay-{topic}"
        return base if not self else f"{base} {self.describe()}"


async def replay_dead_letters(transport: Transport, topic: str, *, limit: int | None,
                              dry_run: bool, group: str | None,
                              from_beginning: bool,
                              only: LetterFilter = LetterFilter()) -> int:
    if limit is not None and limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}")
    group_id = group or only.default_group(topic)
    letters: list[DeadLetter] = []
    left: list[DeadLetter] = []
    skipped: list[str] = []
    async with TopicReader(transport, topic, group_id=group_id,
                           client_id="aiostreams-dlq-replay") as reader:
        await reader.seek(Start.BEGINNING if from_beginning else Start.COMMITTED)
        async for record in reader.records(follow=False, limit=limit):
            letter = DeadLetter.parse(record)
            if letter is None:
                skipped.append(f"{record.topic}[{record.partition}]@{record.offset}")
            elif only.matches(letter):
                letters.append(letter)
            else:
                left.append(letter)
        by_topic = collections.Counter(letter.origin_topic for letter in letters)
        summary = ", ".join(f"{n} to {t!r}" for t, n in sorted(by_topic.items())) or "none"
        if skipped:
            print(f"skipping {len(skipped)} record(s) that are not dead letters (no "
                  f"{DLQ_HEADER_PREFIX}topic header): {', '.join(skipped[:5])}"
                  f"{' ...' if len(skipped) > 5 else ''}", flush=True)
        if left:
            kinds = collections.Counter(letter.exception for letter in left)
            print(f"leaving {len(left)} dead letter(s) that do not match {only.describe()} "
                  f"({', '.join(f'{n} {e}' for e, n in sorted(kinds.items()))})", flush=True)
        if dry_run:
            for letter in letters:
                print(f"would replay {letter.where} -> {letter.origin_topic} "
                      f"({letter.exception}: {letter.message})", flush=True)
            print(f"dry run: would replay {len(letters)} dead letter(s) ({summary}); "
                  "nothing was sent or committed", flush=True)
            return 0
        if letters:
            await _check_origins(transport, by_topic)
            await _republish(transport, letters)
        if letters or skipped or left:
            await reader.commit()
    print(f"replayed {len(letters)} dead letter(s) from {topic!r} ({summary}); position "
          f"saved in group {group_id!r}", flush=True)
    return 0


async def _check_origins(transport: Transport, topics: collections.Counter[str]) -> None:
    admin = transport.admin()
    await admin.start()
    try:
        missing = [t for t in sorted(topics) if await admin.partitions_for(t) is None]
    finally:
        await admin.stop()
    if missing:
        raise CommandError(
            f"origin topic(s) {missing} do not exist on {transport.url}; nothing was "
            "replayed (create them, or replay once they exist)")


async def _republish(transport: Transport, letters: list[DeadLetter]) -> None:
    producer = transport.producer(client_id="aiostreams-dlq-replay")
    await producer.start()
    try:
        await producer.send_batch([
            OutgoingRecord(
                letter.origin_topic, letter.record.key, letter.record.value,
                letter.record.timestamp,
                (*letter.headers, (REPLAYED_FROM, letter.where.encode())))
            for letter in letters])
        await producer.flush()
    finally:
        await producer.stop()
