"""Settings from code, ``AIOSTREAMS_*`` environment variables and TOML files; secrets hidden."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from aiostreams import App, ConfigError, load_settings
from aiostreams.transport.memory import MemoryBroker, MemoryTransport

REPO = Path(__file__).resolve().parent.parent
APPS = REPO / "tests" / "cli" / "apps"
SECRET = "hunter2-s3cret-Pa55"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AIOSTREAMS_"):
            monkeypatch.delenv(name)


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "aiostreams.toml"
    path.write_text(text)
    return path


# -- sources ----------------------------------------------------------------------------


def test_environment_variables_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIOSTREAMS_MAX_IN_FLIGHT", "7")
    monkeypatch.setenv("AIOSTREAMS_ORDERING", "partition")
    monkeypatch.setenv("AIOSTREAMS_BROKER", "kafka://b1:9092,b2:9092")
    settings = load_settings()
    assert (settings.max_in_flight, settings.ordering, settings.broker) == (
        7, "partition", "kafka://b1:9092,b2:9092")
    assert App("from-env").settings.max_in_flight == 7


def test_toml_file_table_is_read(tmp_path: Path) -> None:
    path = write_toml(tmp_path, '[aiostreams]\nmax_in_flight = 64\ncommit_interval_ms = 250\n'
                                'dead_letter_topic = "dlq"\n\n[other_tool]\nignored = true\n')
    settings = load_settings(None, path)
    assert (settings.max_in_flight, settings.commit_interval_ms) == (64, 250.0)
    assert settings.effective_on_error == "dead_letter"
    assert App("from-toml", config_file=path).settings.max_in_flight == 64


def test_toml_file_without_the_table_is_read_from_the_top_level(tmp_path: Path) -> None:
    assert load_settings(None, write_toml(tmp_path, "max_in_flight = 3\n")).max_in_flight == 3


def test_code_overrides_win_over_environment_and_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIOSTREAMS_MAX_IN_FLIGHT", "7")
    path = write_toml(tmp_path, "[aiostreams]\nmax_in_flight = 64\n")
    assert load_settings({"max_in_flight": 2}, path).max_in_flight == 2
    assert App("code-wins", config_file=path, max_in_flight=2).settings.max_in_flight == 2


def test_environment_wins_over_the_file(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIOSTREAMS_MAX_IN_FLIGHT", "7")
    path = write_toml(tmp_path, "[aiostreams]\nmax_in_flight = 64\n")
    assert load_settings(None, path).max_in_flight == 7


# -- rejection, naming the key ----------------------------------------------------------


def test_unknown_key_in_code_is_rejected_by_name() -> None:
    with pytest.raises(ConfigError, match=r"unknown setting 'max_inflight' \(known: .*"
                                          r"max_in_flight"):
        load_settings({"max_inflight": 10})
    with pytest.raises(ConfigError, match="unknown setting 'nope'"):
        App("typo", nope=1)


def test_unknown_key_in_the_file_is_rejected_by_name(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "[aiostreams]\ncommit_interval = 5\n")
    with pytest.raises(ConfigError, match="unknown setting 'commit_interval'"):
        load_settings(None, path)


@pytest.mark.parametrize(("key", "value", "says"), [
    ("max_in_flight", 0, "greater than or equal to 1"),
    ("ordering", "random", "'key', 'partition' or 'unordered'"),
    ("broker", "http://x", "use memory://"),
    ("commit_interval_ms", -5, "greater than 0"),
    ("processing_guarantee", "maybe", "at_least_once"),
])
def test_bad_value_in_code_is_rejected_naming_the_key(key: str, value: object,
                                                      says: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_settings({key: value})
    message = str(error.value)
    assert f"setting {key!r}" in message
    assert says in message
    assert repr(value) in message  # what was given


def test_bad_value_in_the_environment_is_rejected_naming_the_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIOSTREAMS_MAX_IN_FLIGHT", "lots")
    with pytest.raises(ConfigError, match=r"setting 'max_in_flight': .*integer.*'lots'"):
        load_settings()


def test_bad_value_in_the_file_is_rejected_naming_the_key(tmp_path: Path) -> None:
    path = write_toml(tmp_path, '[aiostreams]\nretry_attempts = "several"\n')
    with pytest.raises(ConfigError, match="setting 'retry_attempts'"):
        load_settings(None, path)


def test_missing_or_malformed_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(None, tmp_path / "absent.toml")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_settings(None, write_toml(tmp_path, "[aiostreams\nx = 1\n"))


# -- secrets ----------------------------------------------------------------------------


def test_secret_never_appears_in_repr_str_or_dumps() -> None:
    settings = load_settings({"sasl_password": SECRET, "ssl_key_password": SECRET,
                              "sasl_username": "bob"})
    assert settings.sasl_password is not None
    assert settings.sasl_password.get_secret_value() == SECRET  # still usable
    for shown in (repr(settings), str(settings), settings.model_dump_json(),
                  repr(settings.model_dump()), f"{settings}"):
        assert SECRET not in shown
    assert "bob" in repr(settings)


def test_secret_from_environment_or_file_stays_hidden(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIOSTREAMS_SASL_PASSWORD", SECRET)
    assert SECRET not in repr(load_settings())
    monkeypatch.delenv("AIOSTREAMS_SASL_PASSWORD")
    path = write_toml(tmp_path, f'[aiostreams]\nsasl_password = "{SECRET}"\n')
    assert SECRET not in repr(load_settings(None, path))


def test_errors_never_quote_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError) as bad_secret:
        load_settings({"sasl_password": 12345678})  # a bad value *of* the secret
    assert "12345678" not in str(bad_secret.value)
    assert "setting 'sasl_password'" in str(bad_secret.value)
    monkeypatch.setenv("AIOSTREAMS_SASL_PASSWORD", SECRET)
    with pytest.raises(ConfigError) as other:  # another key is wrong; the secret is set
        load_settings({"nope": 1, "max_in_flight": -1})
    assert SECRET not in str(other.value)
    assert SECRET not in repr(other.value)


async def test_secret_never_appears_in_logs_of_a_running_app(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    broker = MemoryBroker()
    broker.create_topic("in", 1)
    app = App("secretive", transport=MemoryTransport(broker), sasl_password=SECRET,
              sasl_username="bob")
    app.topic("in", key=str, value=str)
    app.topology.add_source("src", "in").add_sink("sink", "out", "src")
    async with app:
        logging.getLogger("test").debug("settings: %r / %s", app.settings, app.settings)
    assert caplog.records  # the app logged (assignment, the line above)
    assert SECRET not in caplog.text
    assert SECRET not in app.describe()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(APPS), **env}
    return subprocess.run([sys.executable, "-m", "aiostreams", *args], cwd=REPO, env=full_env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_secret_never_appears_in_cli_output_describe_or_errors() -> None:
    env = {"AIOSTREAMS_SASL_PASSWORD": SECRET, "AIOSTREAMS_SASL_USERNAME": "bob",
           "AIOSTREAMS_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
           "AIOSTREAMS_SASL_MECHANISM": "PLAIN"}
    described = cli("describe", "cli_demo:app", env=env)
    assert described.returncode == 0, described.stderr
    assert "sasl_password=**********" in described.stdout
    # --debug: DEBUG logs of aiostreams and aiokafka, and the traceback of the failure
    unreachable = cli("--debug", "run", "cli_demo:app", "--broker",
                      f"kafka://127.0.0.1:{free_port()}", "--connect-timeout", "1", env=env)
    assert unreachable.returncode == 3
    assert "DEBUG" in unreachable.stderr and "Traceback" in unreachable.stderr
    bad_key = cli("run", "cli_demo:app", "--set", "nope=1", env=env)
    assert bad_key.returncode == 2
    for done in (described, unreachable, bad_key):
        assert SECRET not in done.stdout + done.stderr


def test_tls_and_sasl_settings_become_kafka_client_options() -> None:
    app = App("secure", broker="kafka://127.0.0.1:9093", security_protocol="SASL_SSL",
              sasl_mechanism="SCRAM-SHA-512", sasl_username="svc",
              sasl_password="s3cret-value")
    options = app.transport.options  # type: ignore[attr-defined]
    assert options.security_protocol == "SASL_SSL"
    assert options.sasl_mechanism == "SCRAM-SHA-512"
    assert options.sasl_plain_username == "svc"
    assert options.sasl_plain_password.get_secret_value() == "s3cret-value"
    assert "s3cret-value" not in repr(options)
    assert options.ssl_context is not None


def test_unreadable_tls_files_are_a_config_error_naming_them(tmp_path: Path) -> None:
    missing = tmp_path / "nope-ca.pem"
    app = App("tls", broker="kafka://127.0.0.1:9093", security_protocol="SSL",
              ssl_cafile=missing)
    with pytest.raises(ConfigError, match=r"cannot load the TLS files .*nope-ca\.pem"):
        _ = app.transport
