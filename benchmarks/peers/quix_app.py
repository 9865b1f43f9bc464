"""Contender: a Quix Streams application, ``apply`` then ``to_topic``.

Quix Streams processes each partition's records one at a time in one thread (its functions
are synchronous), so P1's I/O is a blocking ``time.sleep``/``urllib`` GET per record.
Run in the peers venv:

    <peers venv>/bin/python -m benchmarks.peers.quix_app      (options in $BENCH_OPTIONS)
"""

from __future__ import annotations

from benchmarks.peers.contenders import REPO
from benchmarks.peers.options import ContenderOptions
from benchmarks.peers.record_io import blocking_wait
from benchmarks.peers.workload import enrich_bytes


def main() -> None:
    from quixstreams import Application

    options = ContenderOptions.from_env()
    app = Application(broker_address=options.bootstrap, consumer_group=options.group,
                      auto_offset_reset="earliest", loglevel="WARNING",
                      use_changelog_topics=False,
                      state_dir=str(REPO / ".cache" / "quix-state" / options.group))
    src = app.topic(options.src, key_deserializer="bytes", value_deserializer="bytes")
    dst = app.topic(options.dst, key_serializer="bytes", value_serializer="bytes")
    wait = blocking_wait(options)

    def step(value: bytes) -> bytes:
        wait()
        return enrich_bytes(value)

    app.dataframe(src).apply(step).to_topic(dst)
    app.run()


if __name__ == "__main__":
    main()
