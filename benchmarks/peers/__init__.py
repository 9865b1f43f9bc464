"""The peer benchmark (issue 8): aiostreams against Faust, Quix Streams and a raw aiokafka
loop on one broker, one input and one run.

Two halves, kept apart because they run in different interpreters:

* the **contenders** (:mod:`.raw_aiokafka`, :mod:`.faust_agent`, :mod:`.quix_app`,
  :mod:`.aiostreams_app`) are programs, one process each, that read their
  :class:`~benchmarks.peers.options.ContenderOptions` from the environment and process until
  stopped. Faust and Quix run in the peers venv (:mod:`.venv`), so the contenders and what
  they import (:mod:`.options`, :mod:`.workload`) use only the standard library and orjson;
* the **harness** (:mod:`.topics`, :mod:`.runner`, :mod:`.verify`, :mod:`.scenarios`,
  :mod:`.report`) runs in the project's interpreter: it creates and preloads topics, starts
  each contender, watches its output, checks it, and writes the results.

``python -m benchmarks all`` is the entry point (:mod:`benchmarks.__main__`).
"""
