"""Reads a Delta table with Spark's Delta source in a process of its own:
``python delta_spark_reader.py CONFIG_JSON PATH`` prints ``[[partition, offset], ...]``.

Its own process, because a JVM takes ``spark.jars.packages`` only when it starts: in a test
session whose JVM started earlier without the Delta jar, an in-process reader would not find
the ``delta`` source, whichever test ran first.
"""

from __future__ import annotations

import json
import sys

from aiostreams.sinks import get_session, stop_session
from aiostreams.sinks.spark.session import SparkConfig


def main() -> None:
    config = SparkConfig.model_validate_json(sys.argv[1])
    spark = get_session(config)
    try:
        rows = spark.read.format("delta").load(sys.argv[2]).select("partition", "offset")
        print(json.dumps([[int(r[0]), int(r[1])] for r in rows.collect()]))
    finally:
        stop_session()


if __name__ == "__main__":
    main()
