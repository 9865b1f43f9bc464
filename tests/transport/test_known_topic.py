"""How the Kafka adapters read a topic's error code in a Metadata response
(``known_topic``, shared by partition counts and topic ids): 0 is a known topic, 3
(UNKNOWN_TOPIC_OR_PARTITION) an unknown one, anything else a TransportError that names what
was being read, the broker, and Kafka's error."""

from __future__ import annotations

import pytest
from aiokafka.errors import for_code
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.errors import TransportError
from aiostreams.transport.kafka_connection import known_topic

BOOTSTRAP = "127.0.0.1:9092"


def test_error_code_0_is_a_known_topic_and_3_an_unknown_one() -> None:
    assert known_topic(0, "the metadata of topic 'a'", bootstrap=BOOTSTRAP) is True
    assert known_topic(3, "the metadata of topic 'a'", bootstrap=BOOTSTRAP) is False


@given(st.integers(min_value=1, max_value=120).filter(lambda code: code != 3))
def test_any_other_error_code_raises_naming_the_read_the_broker_and_the_error(
        code: int) -> None:
    with pytest.raises(TransportError) as raised:
        known_topic(code, "the topic id of 'orders'", bootstrap=BOOTSTRAP)
    message = str(raised.value)
    assert message.startswith(f"cannot read the topic id of 'orders' from {BOOTSTRAP}: ")
    assert for_code(code).__name__ in message and f"Kafka error code {code})" in message
