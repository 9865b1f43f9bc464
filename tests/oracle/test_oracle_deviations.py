"""Each deviation kept on purpose (tests/oracle/deviations.py) is real and is the only
difference: Kafka Streams with its default setting differs from aiostreams on the
deviation's case, and with the oracle's setting agrees byte for byte. A deviation with no
setting (a race Kafka's driver never produces) agrees byte for byte processed serially,
and raced ends at the same table."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from deviations import DEVIATIONS, Deviation
from oracle_check import prepare
from oracle_jvm import OracleJVM
from oracle_spec import run_aiostreams

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(600)]


@pytest.mark.parametrize("deviation", [d for d in DEVIATIONS if d.kafka_default is not None],
                         ids=lambda d: d.name)
def test_deviation_is_the_only_difference_from_kafka_streams(
        oracle: OracleJVM, deviation: Deviation) -> None:
    case = prepare(deviation.case)
    default, configured = oracle.ask([{**case, "config": deviation.kafka_default},
                                      {**case, "config": deviation.oracle_config}])
    assert default["ok"] and configured["ok"]
    ours = asyncio.run(run_aiostreams(case, max_in_flight=64, ordering="key", seed=1))
    assert ours == configured["outputs"]
    assert ours != default["outputs"]


def last_values(records: list[dict[str, Any]]) -> dict[str, str]:
    """An output as a table: the last value per key, a tombstone for absent."""
    table: dict[str, str] = {}
    for record in records:
        if record["v"] is None:
            table.pop(record["k"], None)
        else:
            table[record["k"]] = record["v"]
    return table


@pytest.mark.parametrize("deviation", [d for d in DEVIATIONS if d.kafka_default is None],
                         ids=lambda d: d.name)
def test_a_race_deviation_agrees_serially_and_converges_raced(
        oracle: OracleJVM, deviation: Deviation) -> None:
    raced = prepare(deviation.case)
    assert any(r.get("racing") for r in raced["inputs"])
    serial = {**raced, "inputs": [{k: v for k, v in r.items() if k != "racing"}
                                  for r in raced["inputs"]]}
    (kafka,) = oracle.ask([serial])
    assert kafka["ok"]
    ours = asyncio.run(run_aiostreams(serial, max_in_flight=64, ordering="key", seed=1))
    assert ours == kafka["outputs"]
    ours_raced = asyncio.run(run_aiostreams(raced, max_in_flight=64, ordering="key", seed=1))
    for topic in raced["outputs"]:
        assert ours_raced[topic][:1] == kafka["outputs"][topic][:1]  # the result to retract
        assert last_values(ours_raced[topic]) == last_values(kafka["outputs"][topic])
