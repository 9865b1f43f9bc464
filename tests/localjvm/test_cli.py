"""The ``run`` shape of the local servers' CLIs: start, announce, wait for Ctrl-C or SIGTERM,
stop — and stop also when starting failed — with the previous signal handlers put back."""

from __future__ import annotations

import signal

import pytest

from aiostreams.localjvm.cli import exit_code, run_until_signal


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_what_run_started_and_restores_the_handlers(
        signum: signal.Signals) -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    steps: list[str] = []

    def announce() -> None:
        steps.append("announce")
        signal.raise_signal(signum)  # as Ctrl-C (or a supervisor's SIGTERM) would

    assert run_until_signal(lambda: steps.append("start"), announce,
                            lambda: steps.append("stop")) == 0
    assert steps == ["start", "announce", "stop"]
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_start_that_fails_is_stopped_and_its_error_is_exit_1(
        capsys: pytest.CaptureFixture[str]) -> None:
    class ServerError(RuntimeError):
        pass

    before = signal.getsignal(signal.SIGINT)
    stopped: list[bool] = []

    def start() -> None:
        raise ServerError("port 1 is taken: choose another port")

    assert exit_code(lambda: run_until_signal(start, lambda: None,
                                              lambda: stopped.append(True)),
                     ServerError) == 1
    assert stopped == [True]
    assert capsys.readouterr().err == "error: port 1 is taken: choose another port\n"
    assert signal.getsignal(signal.SIGINT) is before
