"""Rough edges a new user hit on the command line, each pinned down."""

from __future__ import annotations

import subprocess
import sys

from clikit import REPO, cli, environment, error_lines


def test_tail_into_a_closed_pipe_exits_quietly_like_a_unix_tool() -> None:
    # more output than a pipe buffers, so the writer meets the closed pipe for sure
    tail = subprocess.Popen(
        [sys.executable, "-m", "aiostreams", "tail", "demo-orders", "--from-beginning",
         "--no-follow", "--app", "cli_demo:app"],
        cwd=REPO, env=environment(DEMO_RECORDS="4000"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    try:
        assert tail.stdout is not None and tail.stderr is not None
        first = tail.stdout.readline()  # what `| head -1` reads, then it exits
        tail.stdout.close()
        stderr = tail.stderr.read().decode()
        code = tail.wait(timeout=60)
    finally:
        tail.kill()
        assert tail.stderr is not None
        tail.stderr.close()
        tail.wait()
    assert first.startswith(b"demo-orders[0]@0 ")
    assert stderr == ""  # no "unexpected BrokenPipeError", no "Exception ignored"
    assert code == 141  # 128 + SIGPIPE, what a shell reports for `yes | head -1`


def test_a_metrics_port_out_of_range_is_a_usage_error() -> None:
    done = cli("run", "cli_demo:app", "--metrics-port", "99999")
    assert done.returncode == 2
    assert error_lines(done) == [
        "aiostreams: error: run: argument --metrics-port: 99999 is not a TCP port: use "
        "1-65535, or 0 for a free one (see 'aiostreams run --help')"]


def test_a_metrics_port_that_workers_would_push_past_65535_is_a_usage_error() -> None:
    done = cli("run", "cli_demo:app", "--metrics-port", "65535", "--workers", "2")
    assert done.returncode == 2
    assert "worker I serves on PORT+I, past 65535" in done.stderr
