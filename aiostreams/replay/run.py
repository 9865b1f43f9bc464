"""Running a (possibly changed) app over recorded inputs on a private memory broker, and
writing what it produced: what ``aiostreams replay MODULE:APP --from ... --out DIR`` does
(:func:`replay`).

1. The inputs: a recorded input file (``--from DIR``), or source records read from the
   app's broker by offsets (``--from TOPIC:PARTITION:START-END``) or time
   (``--since``/``--until``) - :mod:`aiostreams.replay.inputs`. They are written to
   ``DIR/inputs.jsonl`` of the output, so a later replay can take the same ones.
2. A private broker (``memory://aiostreams-replay-<id>``): the source topics made as wide
   as the app declares them (at least as wide as the recording needs), each input appended
   to its recorded partition in offset order with the origin header
   (:data:`~aiostreams.replay.player.ORIGIN_HEADER`).
3. With ``services="recorded"`` every declared service answers from the recording
   (:class:`~aiostreams.replay.player.Player`); with ``"live"`` the app calls them. The app
   runs with ``origin_headers``: what it writes carries the place of the input it came from
   (:mod:`aiostreams.runtime.origin`), so calls behind repartitions find their answers and
   outputs name their input.
4. The app runs (``max_in_flight`` as given), until it has processed and committed every
   input; then every output topic (what it wrote but does not read itself, and not its
   changelogs) is written to the output directory (:mod:`aiostreams.replay.outputs`).

The app's own broker is only read (for inputs), never written; the replay records nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from aiostreams.replay.inputs import save_inputs
from aiostreams.replay.outputs import OutputRecord, write_outputs
from aiostreams.replay.player import ORIGIN_HEADER, MissingCall, Player, origin_of
from aiostreams.replay.recording import Recording
from aiostreams.services.declared import DeclaredService
from aiostreams.transport.memory import MemoryBroker
from aiostreams.types import OutgoingRecord, RawRecord

__all__ = ["CAUGHT_UP_TIMEOUT", "REPLAY_COMMIT_MS", "ReplayResult", "ReplayableApp",
           "replay"]

CAUGHT_UP_TIMEOUT = 600.0
"""Seconds a replay waits for the app to process its inputs before it gives up."""

REPLAY_COMMIT_MS = 50.0
"""The commit interval of a replay (at most; outputs do not depend on it)."""



class ReplayableApp(Protocol):
    """What a replay needs of an :class:`aiostreams.App` (one not started yet)."""

    name: str
    settings: Any
    topology: Any

    @property
    def services(self) -> Mapping[str, DeclaredService]: ...

    @property
    def transport(self) -> Any: ...

    def build(self) -> list[Any]: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def wait_until_caught_up(self, timeout: float | None = None) -> None: ...


@dataclass
class ReplayResult:
    inputs: int
    outputs: dict[str, int]
    answered: int = 0
    missing_count: int = 0
    missing: list[MissingCall] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "outputs": self.outputs, "answered": self.answered,
                "missing_count": self.missing_count,
                "missing_examples": [str(m) for m in self.missing]}


async def replay(app: ReplayableApp, inputs: Sequence[RawRecord], out: str | Path, *,
                     recording: Recording | None, max_in_flight: int | None = None,
                     latency_scale: float = 0.0,
                     timeout: float = CAUGHT_UP_TIMEOUT) -> ReplayResult:
    """Replay ``inputs`` through ``app`` (not started yet; it is started and stopped
    here), answering its services from ``recording`` (None: live), and write its outputs
    to ``out``. Raises the app's failure (a task that failed), after writing what it had
    produced. Cancellation: the app is stopped; nothing is written."""
    name = f"aiostreams-replay-{uuid.uuid4().hex[:12]}"
    overrides: dict[str, Any] = {
        "broker": f"memory://{name}", "record_services_dir": None,
        # every output names its input; records read back carry (origin, path) for the player
        "origin_headers": True,
        # persistent stores need a state directory: a fresh one, never the app's
        "state_dir": None if app.settings.state_dir is None else Path(out) / "state",
        # a replay waits for its last commit: no need to wait a production interval for it
        "commit_interval_ms": min(app.settings.commit_interval_ms, REPLAY_COMMIT_MS)}
    if max_in_flight is not None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        overrides["max_in_flight"] = max_in_flight
    app.settings = app.settings.model_copy(update=overrides)
    if app.transport.url != overrides["broker"]:
        raise RuntimeError(
            f"app {app.name!r} opened its broker ({app.transport.url}) before the replay: "
            "give the replay an app that has not used its producer, consumer or transport")
    player = Player(recording, latency_scale) if recording is not None else None
    for declared in app.services.values():
        declared.tap = player
    broker = MemoryBroker.named(name)
    _load_inputs(app, broker, inputs)
    save_inputs(out, inputs)
    await app.start()
    failure: BaseException | None = None
    try:
        await app.wait_until_caught_up(timeout)
    except Exception as error:
        failure = error
    finally:
        await app.stop()
    topics = _output_topics(app, broker, {r.topic for r in inputs})
    records = [_output(app, raw) for topic in topics for raw in broker.records(topic)]
    result = ReplayResult(len(inputs), {t: len(broker.records(t)) for t in topics})
    broker.delete_topics(broker.topic_names())  # the registry keeps the broker: not its data
    if player is not None:
        result.answered = player.answered
        result.missing_count = player.missing_count
        result.missing = list(player.missing)
    write_outputs(out, records, topics, {
        "app": app.name, "services": "recorded" if recording is not None else "live",
        "max_in_flight": app.settings.max_in_flight,
        "failure": None if failure is None else f"{type(failure).__name__}: {failure}",
        **result.to_json()})
    if failure is not None:
        raise failure
    return result


def _load_inputs(app: ReplayableApp, broker: MemoryBroker, inputs: Sequence[RawRecord]) -> None:
    """Create the source topics and append the inputs, each to its recorded partition."""
    widths: dict[str, int] = {}
    for r in inputs:
        widths[r.topic] = max(widths.get(r.topic, 1), r.partition + 1)
    for topic, width in widths.items():
        declared = app.topology.topic(topic)
        partitions = declared.partitions if declared is not None else None
        if partitions is not None and partitions < width:
            raise ValueError(
                f"topic {topic!r}: the app declares {partitions} partition(s), the recorded "
                f"inputs use {width}; declare it as wide as the recorded run had it")
        broker.create_topic(topic, partitions or max(width, app.settings.default_partitions))
    for r in sorted(inputs, key=lambda r: (r.topic, r.partition, r.offset)):
        headers = (*((n, v) for n, v in r.headers if n != ORIGIN_HEADER),
                   (ORIGIN_HEADER, f"{r.topic}/{r.partition}/{r.offset}".encode()))
        broker.append([(OutgoingRecord(r.topic, r.key, r.value, r.timestamp, headers,
                                       r.partition), r.partition)])


def _output_topics(app: ReplayableApp, broker: MemoryBroker, inputs: set[str]) -> list[str]:
    """What the app wrote that it does not read itself (repartition topics), that is not a
    changelog, and not an input."""
    read = {t for sub in app.build() for t in sub.source_topics} | inputs
    return sorted(t for t in broker.topic_names() if t not in read
                  and not (t.startswith(f"{app.name}-") and t.endswith("-changelog")))


def _output(app: ReplayableApp, raw: RawRecord) -> OutputRecord:
    topic = app.topology.topic(raw.topic)
    key_text = _text(topic, "key_serde", raw.topic, raw.key)
    value_text = _text(topic, "value_serde", raw.topic, raw.value)
    headers = tuple((n, v) for n, v in raw.headers if n != ORIGIN_HEADER)
    return OutputRecord(raw.topic, raw.partition, raw.offset, raw.timestamp, raw.key,
                        raw.value, headers, origin_of(raw.headers), key_text, value_text)


def _text(topic: Any, serde: str, name: str, data: bytes | None) -> Any:
    """``data`` decoded with the declared topic's serde, JSON-shaped for people (a model
    as its JSON form; bytes as text when they are UTF-8); the bytes' repr when undecodable."""
    if data is None:
        return None
    try:
        value = getattr(topic, serde).deserialize(name, data) if topic is not None else data
    except Exception:
        value = data
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return repr(value)
    return value
