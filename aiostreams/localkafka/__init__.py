"""A real Apache Kafka broker that the project starts itself (tests, benchmarks, first runs).

``LocalKafka`` runs a single-node KRaft broker from jars that ``mvn`` fetches from Maven Central
into a git-ignored cache::

    with LocalKafka() as kafka:
        app = App("demo", broker=f"kafka://{kafka.bootstrap}")

It runs Kafka 4.4.0 (the default) or 3.9.1: ``LocalKafka(version="3.9.1")``, or
``AIOSTREAMS_KAFKA_VERSION=3.9.1`` for every broker the process starts (the test suite's too).

From a shell: ``python -m aiostreams.localkafka fetch`` (download the jars) and
``python -m aiostreams.localkafka run`` (start a broker, print its address, stop on Ctrl-C);
both take ``--version``.
"""

from aiostreams.localkafka.broker import BrokerState, LocalKafka
from aiostreams.localkafka.errors import LocalKafkaError
from aiostreams.localkafka.jars import KAFKA_VERSION, cache_dir
from aiostreams.localkafka.releases import (
    DEFAULT_KAFKA_VERSION,
    RELEASES,
    VERSION_VARIABLE,
    KafkaRelease,
    kafka_release,
)

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "KAFKA_VERSION",
    "RELEASES",
    "VERSION_VARIABLE",
    "BrokerState",
    "KafkaRelease",
    "LocalKafka",
    "LocalKafkaError",
    "cache_dir",
    "kafka_release",
]
