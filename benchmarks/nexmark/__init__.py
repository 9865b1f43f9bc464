"""Nexmark (persons, auctions, bids) against Kafka Streams (issue 40).

    python -m benchmarks.nexmark [--events N] [--queries q0,q1,...] [--partitions P]
                                 [--no-kafka-streams] [--profile DIR]
                                 [--aiostreams-cache-bytes B] [--kafka-streams-cache-bytes B]
    python -m benchmarks.nexmark --check [--events N]

A seeded, event-time generator (:mod:`~benchmarks.nexmark.generator`) writes Nexmark's
events once to three topics of a real broker (``AIOSTREAMS_KAFKA`` or one started here);
then each query (:mod:`~benchmarks.nexmark.queries`; Kafka Streams' in
``benchmarks/kstreams/Nexmark.java``) runs in aiostreams and in Kafka Streams 4.4.0 (one
stream thread), each in its own process - both with a record cache of Kafka Streams'
default budget, 10 MB (``cache_max_bytes`` on our side; ``--aiostreams-cache-bytes 0`` or
``--kafka-streams-cache-bytes 0`` turns one off; the first line printed says which) - and the
table says per query: input records per
second and CPU µs per input record of each, the ratio per core (Kafka Streams' CPU per
record / aiostreams'; targets >= 0.5 on q0-q2 and >= 0.25 on q3-q8) and whether the
outputs are equal. ``--check`` compares the outputs only, on both frameworks' test drivers
(no broker).

Modules: ``model`` (events, wire format), ``generator``, ``topics`` (writing inputs,
comparing outputs), ``queries``, ``contender`` (aiostreams' timed process), ``jvm`` (Kafka
Streams' process), ``drive`` (both test drivers), ``bench`` (one run), ``cli``.
"""
