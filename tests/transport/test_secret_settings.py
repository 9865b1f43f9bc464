"""Issue 24, item 6: the SASL password never shows in a repr, a log line or an error."""

from __future__ import annotations

import dataclasses
import logging
import socket
import traceback

import pytest

import aiostreams as ais
from aiostreams.errors import BrokerUnavailableError, ConfigError
from aiostreams.transport.kafka import KafkaTransport
from aiostreams.transport.kafka_connection import KafkaOptions

SECRET = "hunter2-s3cr3t"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_kafka_options_keep_the_password_secret_until_handed_to_the_client() -> None:
    options = KafkaOptions(security_protocol="SASL_PLAINTEXT", sasl_plain_username="u",
                           sasl_plain_password=SECRET)  # type: ignore[arg-type]
    assert SECRET not in repr(options) and SECRET not in str(options)
    assert options.client_kwargs("h:1", "c")["sasl_plain_password"] == SECRET


async def test_failing_start_with_sasl_settings_shows_the_password_nowhere(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    app = ais.App("secret-app", broker=f"kafka://127.0.0.1:{closed_port()}",
                  security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                  sasl_username="alice", sasl_password=SECRET)
    app.topic("in", key=str, value=str)
    app.topic("out", key=str, value=str)
    app.topology.add_source("src", "in").add_sink("sink", "out", "src")
    transport = app.transport
    assert isinstance(transport, KafkaTransport)
    transport.options = dataclasses.replace(transport.options, connect_timeout=0.5)
    with pytest.raises(BrokerUnavailableError) as failure:
        async with app:
            pass
    error = failure.value
    seen = [repr(app.settings), str(app.settings), repr(transport), repr(transport.options),
            str(transport.options), repr(error), str(error), caplog.text,
            "".join(traceback.TracebackException.from_exception(
                error, capture_locals=True).format())]
    assert SECRET in transport.options.client_kwargs("h:1", "c").values()  # it is there
    leaks = [text[max(0, text.find(SECRET) - 80):text.find(SECRET) + 20]
             for text in seen if SECRET in text]
    assert not leaks, leaks


def test_unreadable_tls_files_with_sasl_settings_show_the_password_nowhere(
        tmp_path) -> None:  # type: ignore[no-untyped-def]
    app = ais.App("secret-tls", broker=f"kafka://127.0.0.1:{closed_port()}",
                  security_protocol="SASL_SSL", sasl_mechanism="PLAIN",
                  sasl_username="alice", sasl_password=SECRET,
                  ssl_cafile=tmp_path / "missing-ca.pem")
    with pytest.raises(ConfigError) as failure:
        app.transport  # noqa: B018 - building the transport loads the TLS files
    shown = "".join(traceback.TracebackException.from_exception(
        failure.value, capture_locals=True).format())
    assert "missing-ca.pem" in shown
    assert SECRET not in shown
