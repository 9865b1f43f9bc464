"""The Apache Kafka releases :class:`~aiostreams.localkafka.LocalKafka` can run, and how each
one differs: its pom, how it logs, where its command-line tools live, what its broker needs.

Which release (first that applies): the ``version`` passed to ``LocalKafka(version=...)``;
``$AIOSTREAMS_KAFKA_VERSION``; :data:`DEFAULT_KAFKA_VERSION`. A version not in
:data:`RELEASES` is refused with the list of those that are.

The two families differ in ways the broker and the tests meet:

- 3.9 logs through slf4j + log4j 1 (``slf4j-reload4j``, ``-Dlog4j.configuration=file:...``);
  4.x through slf4j + log4j 2 (``log4j-slf4j-impl`` + ``log4j-core``,
  ``-Dlog4j2.configurationFile=...``). A broker given the other family's option logs nothing,
  and then never reports that it started.
- 3.9's console producer is ``kafka.tools.ConsoleProducer`` in ``kafka_2.13`` (its pom
  fetches no console consumer); 4.x's console tools are ``org.apache.kafka.tools.*`` in
  ``kafka-tools``, which the 4.x pom adds. The 3.9.1 pom stays byte for byte what it was
  when it was the only one: its digest keys the jar cache that checkouts share.
- From 4.2 the broker runs share groups, whose state topic wants three replicas unless told.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from aiostreams.localkafka.errors import LocalKafkaError

VERSION_VARIABLE = "AIOSTREAMS_KAFKA_VERSION"
"""The environment variable that picks the release when no ``version`` is passed."""

_HERE = Path(__file__).parent


class Logging(enum.Enum):
    """How a release's JVMs find their logging configuration."""

    LOG4J1 = "log4j"
    LOG4J2 = "log4j2"

    def option(self, config: Path) -> str:
        """The ``-D`` option that points this logging at ``config``."""
        if self is Logging.LOG4J1:
            return f"-Dlog4j.configuration=file:{config}"
        return f"-Dlog4j2.configurationFile={config}"


@dataclass(frozen=True)
class KafkaRelease:
    """One pinned Kafka release: the pom its jars resolve from and what differs in running it.

    Invariant: ``pom`` pins ``org.apache.kafka:kafka_2.13:<version>``, and its jars hold
    ``console_producer`` and, when named, ``console_consumer`` (tests/localkafka checks).
    """

    version: str
    logging: Logging
    console_producer: str
    console_consumer: str | None
    """None where the pom fetches none (3.9.1: only 4.x is needed for a consumer of the
    KIP-848 protocol)."""
    server_properties: Mapping[str, str] = field(default_factory=dict)
    """Added to the broker's ``server.properties`` for this release only."""

    @property
    def pom(self) -> Path:
        return _HERE / "poms" / f"kafka-{self.version}.xml"

    @property
    def major(self) -> int:
        return int(self.version.split(".", 1)[0])

    @property
    def broker_log_config(self) -> Path:
        return _HERE / ("log4j.properties" if self.logging is Logging.LOG4J1
                        else "log4j2.properties")

    @property
    def tools_log_config(self) -> Path:
        return _HERE / ("tools-log4j.properties" if self.logging is Logging.LOG4J1
                        else "tools-log4j2.properties")


_KAFKA_3 = KafkaRelease(
    version="3.9.1",
    logging=Logging.LOG4J1,
    console_producer="kafka.tools.ConsoleProducer",
    console_consumer=None,
)
_KAFKA_4 = KafkaRelease(
    version="4.4.0",
    logging=Logging.LOG4J2,
    console_producer="org.apache.kafka.tools.ConsoleProducer",
    console_consumer="org.apache.kafka.tools.consumer.ConsoleConsumer",
    server_properties={
        # Share groups are on from 4.2; their state topic defaults to three replicas.
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
    },
)

RELEASES: Mapping[str, KafkaRelease] = {r.version: r for r in (_KAFKA_3, _KAFKA_4)}
"""Every release LocalKafka can run, by version."""

DEFAULT_KAFKA_VERSION = _KAFKA_4.version
"""The release LocalKafka runs when neither ``version`` nor ``$AIOSTREAMS_KAFKA_VERSION``
says otherwise: the newest 4.x on Maven Central (4.4.0, seen 2026-11-25). The suite and the
examples run it; ``make compat`` runs a representative set on 3.9.1."""


def kafka_release(version: str | None = None) -> KafkaRelease:
    """The release ``version`` names, else ``$AIOSTREAMS_KAFKA_VERSION``'s, else the default.

    Raises :class:`LocalKafkaError` naming the known versions for any other.
    """
    chosen = version or os.environ.get(VERSION_VARIABLE) or DEFAULT_KAFKA_VERSION
    release = RELEASES.get(chosen.strip())
    if release is None:
        origin = "version=" if version else f"${VERSION_VARIABLE}="
        raise LocalKafkaError(
            f"no local Kafka release {chosen!r} ({origin}{chosen}); choose one of "
            f"{', '.join(sorted(RELEASES))}, or point AIOSTREAMS_KAFKA at a running broker "
            "of another version"
        )
    return release
