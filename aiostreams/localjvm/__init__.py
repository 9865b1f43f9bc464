"""What the servers the project starts on 127.0.0.1 share: each is a Java program whose
jars come from Maven Central.

:mod:`aiostreams.localkafka` (the broker), :mod:`aiostreams.localregistry` (a schema
registry) and :mod:`aiostreams.localcatalog` (an Iceberg REST catalog) build on these
parts, one concept a module:

- :mod:`~aiostreams.localjvm.ports`: a port is taken only after it was checked free, and
  only on 127.0.0.1;
- :mod:`~aiostreams.localjvm.java`: the ``java`` executable, or an error saying what to
  install;
- :mod:`~aiostreams.localjvm.maven`: the cache dir, and a Maven run done once per input
  (a marker written last, a file lock against concurrent builds);
- :mod:`~aiostreams.localjvm.child_life`: a child that dies with its parent;
- :mod:`~aiostreams.localjvm.process`: waiting for a child to be ready with a deadline,
  ending it (SIGTERM, then SIGKILL), the tail of its log;
- :mod:`~aiostreams.localjvm.server`: the ``CREATED → RUNNING → STOPPED`` lifecycle of a
  server the registry and the catalog share;
- :mod:`~aiostreams.localjvm.cli`: the ``run`` command of their ``python -m`` CLIs.

Each function takes the error type of the package that calls it, so a user meets
``LocalRegistryError`` from the registry, ``LocalKafkaError`` from the broker.
"""
