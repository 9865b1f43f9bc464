"""``AIOSTREAMS_*`` environment variables: settings, the tools' own, and nothing else."""

from __future__ import annotations

import os

import pytest

from aiostreams import App, ConfigError, load_settings
from aiostreams.settings.config import TOOL_VARIABLES, check_environment


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("AIOSTREAMS_"):
            monkeypatch.delenv(name)


def test_a_misspelled_setting_variable_is_a_config_error_naming_the_right_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIOSTREAMS_MAX_INFLIGHT", "5")
    with pytest.raises(ConfigError) as raised:
        App("typo")
    message = str(raised.value)
    assert "AIOSTREAMS_MAX_INFLIGHT (did you mean AIOSTREAMS_MAX_IN_FLIGHT?)" in message
    assert "max_in_flight" in message and "AIOSTREAMS_KAFKA" in message  # the known ones


def test_the_projects_tool_variables_and_every_setting_are_accepted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in TOOL_VARIABLES:
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("AIOSTREAMS_MAX_IN_FLIGHT", "5")
    monkeypatch.setenv("aiostreams_ordering", "partition")  # read case-insensitively
    settings = load_settings()
    assert (settings.max_in_flight, settings.ordering) == (5, "partition")


def test_variables_the_test_suite_and_benchmarks_read_are_tool_variables() -> None:
    # AIOSTREAMS_KAFKA points the suite at a running broker: an app must still start
    check_environment({"AIOSTREAMS_KAFKA": "127.0.0.1:9092",
                       "AIOSTREAMS_CACHE_DIR": "/tmp/x", "OTHER": "y"})
    with pytest.raises(ConfigError, match="AIOSTREAMS_NOPE"):
        check_environment({"AIOSTREAMS_NOPE": "1"})


def test_the_broker_comes_from_the_environment_when_the_code_does_not_set_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIOSTREAMS_BROKER", "kafka://127.0.0.1:9092")
    assert App("from-env").settings.broker == "kafka://127.0.0.1:9092"
    assert App("code-wins", broker="memory://").settings.broker == "memory://"
