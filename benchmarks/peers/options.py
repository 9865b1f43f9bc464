"""What the harness tells a contender process: one JSON object in ``$BENCH_OPTIONS``.

An environment variable rather than argv because the aiostreams contender is started by
aiostreams' own command line (``python -m aiostreams run MODULE:APP``), whose argv belongs
to it. Standard library only: Faust's and Quix's contenders import this in the peers venv.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

ENV = "BENCH_OPTIONS"
IO_KINDS = ("none", "sleep", "jitter", "tail", "http")
TAIL_SECONDS = 0.2
TAIL_SHARE = 0.01


@dataclass(frozen=True)
class ContenderOptions:
    """One contender run.

    ``io`` is what each record awaits before its output is produced: ``"none"`` (P2's
    CPU-light transform only), ``"sleep"`` (``io_seconds`` of ``asyncio.sleep``; blocking
    ``time.sleep`` in Quix, which has no async processing), ``"jitter"`` (a sleep drawn
    uniformly from 0.2..1.8 x ``io_seconds``, same mean), ``"tail"`` (``io_seconds``, but
    1% of records, drawn at random, take ``TAIL_SECONDS``) or ``"http"`` (a GET of
    ``io_url``, a local server that sleeps ``io_seconds`` before answering).
    ``concurrency``: records in flight at once (aiostreams' ``max_in_flight``, Faust's agent
    ``concurrency``, the raw loop's batch size); ``variant`` picks a contender's flavour
    (the raw loop's ``"send"`` or ``"batch"``); ``stuck_id``: the record with this ``id``
    never completes (P5's stuck record); ``guarantee``: aiostreams'
    ``processing_guarantee``; ``async_path``: aiostreams runs its async processor even
    with ``io="none"`` and no stuck record (the baseline of what a stuck record holds);
    ``service_step``: aiostreams awaits the record's I/O in a DSL step through a declared
    service (``map_values_async(..., service=app.service("io"))``) instead of its processor;
    ``record_dir``: aiostreams records its service answers there (``record_services_dir``;
    ``benchmarks.replay_cost``).
    """

    bootstrap: str
    src: str
    dst: str
    group: str
    partitions: int
    io: str = "none"
    io_seconds: float = 0.005
    io_url: str = ""
    concurrency: int = 1
    variant: str = ""
    stuck_id: int | None = None
    guarantee: str = "at_least_once"
    async_path: bool = False
    service_step: bool = False
    record_dir: str = ""

    def __post_init__(self) -> None:
        if self.io not in IO_KINDS:
            raise ValueError(f"io must be one of {', '.join(IO_KINDS)}; got {self.io!r}")
        if self.io == "http" and not self.io_url:
            raise ValueError("io='http' needs io_url (the local I/O server's address)")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency}")

    def to_env(self) -> dict[str, str]:
        return {ENV: json.dumps(asdict(self))}

    @classmethod
    def from_env(cls) -> ContenderOptions:
        text = os.environ.get(ENV)
        if not text:
            raise SystemExit(f"${ENV} is not set: contenders are started by the harness "
                             f"('python -m benchmarks all'), which sets it")
        return cls(**json.loads(text))
