"""Each deviation kept on purpose (tests/oracle/deviations.py) is real and is the only
difference: Kafka Streams with its default setting differs from aiostreams on the
deviation's case, and with the oracle's setting agrees byte for byte."""

from __future__ import annotations

import asyncio

import pytest
from deviations import DEVIATIONS, Deviation
from oracle_check import prepare
from oracle_jvm import OracleJVM
from oracle_spec import run_aiostreams

pytestmark = [pytest.mark.oracle, pytest.mark.timeout(600)]


@pytest.mark.parametrize("deviation", DEVIATIONS, ids=lambda d: d.name)
def test_deviation_is_the_only_difference_from_kafka_streams(
        oracle: OracleJVM, deviation: Deviation) -> None:
    case = prepare(deviation.case)
    default, configured = oracle.ask([{**case, "config": deviation.kafka_default},
                                      {**case, "config": deviation.oracle_config}])
    assert default["ok"] and configured["ok"]
    ours = asyncio.run(run_aiostreams(case, max_in_flight=64, ordering="key", seed=1))
    assert ours == configured["outputs"]
    assert ours != default["outputs"]
