"""A real Apache Kafka broker that the project starts itself (tests, benchmarks, first runs).

``LocalKafka`` runs a single-node KRaft broker from jars that ``mvn`` fetches from Maven Central
into a git-ignored cache::

    with LocalKafka() as kafka:
        app = App("demo", broker=f"kafka://{kafka.bootstrap}")

From a shell: ``python -m aiostreams.localkafka fetch`` (download the jars) and
``python -m aiostreams.localkafka run`` (start a broker, print its address, stop on Ctrl-C).
"""

from aiostreams.localkafka.broker import BrokerState, LocalKafka
from aiostreams.localkafka.jars import KAFKA_VERSION, LocalKafkaError, cache_dir

__all__ = ["KAFKA_VERSION", "BrokerState", "LocalKafka", "LocalKafkaError", "cache_dir"]
