"""Comparing one case between Kafka Streams (the oracle JVM) and aiostreams.

:func:`check` runs a case on both sides and fails with both outputs, decoded, when they
differ in any key byte, value byte, timestamp (ms) or header. Every case checked is counted
per operator family in :data:`COUNTS`, which the oracle's conftest prints at the end of the
session.
"""

from __future__ import annotations

import asyncio
import os
import struct
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, settings
from oracle_jvm import KAFKA_STREAMS_VERSION, OracleJVM
from oracle_spec import Case, Out, chooser_order, run_aiostreams, stateless, task_source_order

EXAMPLES = int(os.environ.get("AIOSTREAMS_ORACLE_EXAMPLES", "300"))
"""Examples per operator family (CI: 300; a nightly-style run sets more)."""

COUNTS: Counter[str] = Counter()
"""Cases compared per operator family in this session."""

MAX_IN_FLIGHT = (1, 7, 64, 1024)

ORACLE_SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                           derandomize=EXAMPLES <= 300, database=None,
                           suppress_health_check=[HealthCheck.too_slow,
                                                  HealthCheck.data_too_large])


def prepare(case: Case) -> Case:
    """``case`` with its inputs in the order aiostreams' task processes them (the order
    Kafka's driver must be fed to see the same interleaving of several input topics)."""
    if len({r["topic"] for r in case["inputs"]}) <= 1:
        return case
    return {**case, "inputs": chooser_order(case, task_source_order(case))}


def oracle_outputs(jvm: OracleJVM, case: Case) -> dict[str, list[Out]]:
    (answer,) = jvm.ask([{**case, "mode": "run"}])
    if not answer["ok"]:
        raise AssertionError(f"Kafka Streams failed on case {case['id']}: "
                             f"{answer['error']}\nspec: {case['ops']}")
    outputs: dict[str, list[Out]] = answer["outputs"]
    return outputs


def check(jvm: OracleJVM, family: str, case: Case, *, max_in_flight: int, ordering: str,
          seed: int | None) -> None:
    """Assert aiostreams' outputs for ``case`` equal Kafka Streams' record by record."""
    if ordering == "unordered" and not stateless(case):
        ordering = "key"
    case = prepare(case)
    expected = oracle_outputs(jvm, case)
    actual = asyncio.run(run_aiostreams(case, max_in_flight=max_in_flight,
                                        ordering=ordering, seed=seed))
    COUNTS[family] += 1
    if actual != expected:
        raise AssertionError(
            f"aiostreams differs from Kafka Streams {KAFKA_STREAMS_VERSION} (family {family}, "
            f"max_in_flight={max_in_flight}, ordering={ordering}, seed={seed})\n"
            f"ops: {case['ops']}\ninputs: {describe_inputs(case)}\n"
            + "".join(f"topic {t}:\n  kafka:      {describe(expected.get(t, []))}\n"
                      f"  aiostreams: {describe(actual.get(t, []))}\n"
                      for t in case["outputs"] if expected.get(t) != actual.get(t)))


def describe_inputs(case: Case) -> str:
    return ", ".join(f"{r['topic']}:{r['key']}={r['value']}@{r['ts']}"
                     for r in case["inputs"])


def describe(records: list[Out]) -> str:
    """Output records decoded for a human: ``key=value@ts`` (windowed keys shown as the
    key and its trailing 8-byte fields)."""
    return ", ".join(f"{_key(r['k'])}={_value(r['v'])}@{r['ts']}"
                     + (f"{r['h']}" if r["h"] else "") for r in records)


def _key(hex_key: str | None) -> str:
    if hex_key is None:
        return "null"
    raw = bytes.fromhex(hex_key)
    if (len(raw) >= 8 and not raw[-8:].isascii()) or (len(raw) > 8 and raw[-8:-4] == bytes(4)):
        fields = []
        while len(raw) >= 8 and raw[-8:-4] == bytes(4):
            fields.insert(0, str(struct.unpack(">q", raw[-8:])[0]))
            raw = raw[:-8]
        return f"{raw.decode(errors='replace')}[{','.join(fields)}]"
    return raw.decode(errors="replace")


def _value(hex_value: str | None) -> Any:
    if hex_value is None:
        return "null"
    raw = bytes.fromhex(hex_value)
    return struct.unpack(">q", raw)[0] if len(raw) == 8 else hex_value
