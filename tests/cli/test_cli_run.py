"""``aiostreams run`` (and loading MODULE:APP) through a subprocess, as users run it.

The app is ``tests/cli/apps/cli_demo.py`` on its process's own ``memory://`` broker: it
preloads 20 orders (two of them poison, dead-lettered), and ``DEMO_STOP_AFTER`` makes it stop
itself, so a run is bounded without anyone feeding it from outside.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from clikit import Running, cli, error_lines, free_port

SUMMARY = (r"app 'cli-demo' stopped: 20 record\(s\) in, 20 out, 0 retries, 2 dead letter\(s\), "
           r"0 skipped, \d+ commit\(s\)")


def test_run_processes_until_the_app_stops_and_sums_up() -> None:
    done = cli("run", "cli_demo:app", DEMO_STOP_AFTER="20")
    assert done.returncode == 0, done.stderr
    assert "app 'cli-demo' running on memory://cli-demo" in done.stderr
    assert re.search(SUMMARY, done.stderr)
    assert "dead-lettered to demo-dlq" in done.stderr  # the app's own log lines, at INFO+
    assert "\x1b[" not in done.stderr  # not a terminal: no live status line
    assert done.stdout == ""


@pytest.mark.parametrize(("signum", "exit_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_a_signal_stops_run_gracefully_ctrl_c_exiting_130(signum: int, exit_code: int) -> None:
    running = Running("run", "cli_demo:app")
    try:
        running.expect(r"app 'cli-demo' running")
        running.signal(signum)
        running.expect(rf"{signal.Signals(signum).name}: stopping 'cli-demo'")
        code, stderr = running.finish()
    finally:
        running.kill()
    assert code == exit_code, stderr
    assert re.search(SUMMARY, stderr)


def test_a_task_failure_exits_1_with_one_error_line() -> None:
    done = cli("run", "cli_demo:app", "--set", "on_error=fail")
    assert done.returncode == 1
    last = error_lines(done)[-1]
    assert last.startswith("aiostreams: error: task 0_1: processor 'upper' failed on "
                           "demo-orders[1]@3 after 1 attempt(s): ValueError: order o7 is poison")
    assert "Traceback" not in done.stderr
    assert "app 'cli-demo' failed:" in done.stderr
    assert done.stderr.count("failed on demo-orders[1]@3") == 1  # said once, at the end


def test_debug_adds_the_traceback() -> None:
    done = cli("--debug", "run", "cli_demo:app", "--set", "on_error=fail")
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr
    assert "ValueError: order o7 is poison" in done.stderr


def test_unknown_setting_exits_2_naming_the_key() -> None:
    done = cli("run", "cli_demo:app", "--set", "nope=1")
    assert done.returncode == 2
    assert len(error_lines(done)) == 1
    assert error_lines(done)[0].startswith("aiostreams: error: invalid configuration: unknown "
                                           "setting 'nope' (known: ")


@pytest.mark.parametrize(("args", "says"), [
    (["--set", "max_in_flight=zero"], "setting 'max_in_flight': Input should be a valid "
                                      "integer"),
    (["--set", "max_in_flight"], "--set expects KEY=VALUE, got 'max_in_flight'"),
    (["--broker", "http://localhost"], "setting 'broker'"),
    (["--workers", "0"], "--workers must be at least 1"),
    (["--config", "/nonexistent/aiostreams.toml"], "config file /nonexistent/aiostreams.toml "
                                                   "does not exist"),
])
def test_bad_settings_and_arguments_exit_2_with_one_line(args: list[str], says: str) -> None:
    done = cli("run", "cli_demo:app", *args)
    assert done.returncode == 2, done.stderr
    assert len(error_lines(done)) == 1, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def test_config_file_settings_apply_and_set_wins_over_them(tmp_path: Path) -> None:
    config = tmp_path / "app.toml"
    config.write_text("[aiostreams]\nmax_in_flight = 77\nretry_attempts = 4\n")
    done = cli("describe", "cli_demo:app", "--config", str(config), "--set", "retry_attempts=9")
    assert done.returncode == 0, done.stderr
    assert "max_in_flight=77" in done.stdout and "retry_attempts=9" in done.stdout
    config.write_text("[aiostreams]\nmax_inflight = 77\n")
    bad = cli("run", "cli_demo:app", "--config", str(config))
    assert bad.returncode == 2
    assert "unknown setting 'max_inflight'" in bad.stderr


@pytest.mark.parametrize(("spec", "says"), [
    ("no_such_module:app", "cannot import 'no_such_module': there is no module named "
                           "'no_such_module'"),
    ("no_such_package.sub:app", "there is no module named 'no_such_package'"),
    ("cli_demo", "expected MODULE:APP (a module and the name of its App, e.g. "
                 "myproject.app:app), got 'cli_demo'"),
    ("cli_demo:", "expected MODULE:APP"),
    ("cli_demo:ap", "'cli_demo' has no attribute 'ap'; its App(s): app"),
    ("cli_demo:Order", "'cli_demo:Order' is the class Order, not an aiostreams App"),
    ("cli_demo:order", "'cli_demo:order' is the callable order, not an aiostreams App"),
    ("cli_demo:RECORDS", "'cli_demo:RECORDS' is a value of type int, not an aiostreams App"),
    ("cli_broken:app", "importing 'cli_broken' raised RuntimeError: the database URL is not "
                       "configured"),
])
def test_bad_module_app_exits_2_naming_what_was_wrong(spec: str, says: str) -> None:
    for command in ("run", "describe"):
        done = cli(command, spec)
        assert done.returncode == 2, done.stderr
        lines = error_lines(done)
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith("aiostreams: error: ")
        assert says in lines[0]


def test_unreachable_broker_exits_3_with_one_line_in_bounded_time() -> None:
    port = free_port()  # bound and released: nobody listens there
    started = time.monotonic()
    done = cli("run", "cli_demo:app", "--broker", f"kafka://127.0.0.1:{port}",
               "--connect-timeout", "2", timeout=30)
    elapsed = time.monotonic() - started
    assert done.returncode == 3, done.stderr
    assert elapsed < 20
    lines = error_lines(done)
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("aiostreams: error: ")
    assert f"127.0.0.1:{port}" in lines[0]
    assert "within 2 s" in lines[0]


def test_help_is_available_for_every_command() -> None:
    for command in ([], ["run"], ["describe"], ["topics"], ["topics", "list"],
                    ["topics", "create"], ["topics", "describe"], ["tail"], ["dlq"],
                    ["dlq", "show"], ["dlq", "replay"]):
        done = cli(*command, "--help")
        assert done.returncode == 0, (command, done.stderr)
        assert done.stdout.startswith(f"usage: aiostreams {' '.join(command)}".rstrip())


def test_unknown_command_or_missing_argument_exits_2_with_one_line() -> None:
    for args, says in ((["frobnicate"], "invalid choice: 'frobnicate'"),
                       (["run"], "run: the following arguments are required: MODULE:APP"),
                       (["topics", "create", "t"], "required: --partitions"),
                       ([], "the following arguments are required: COMMAND")):
        done = cli(*args)
        assert done.returncode == 2, args
        assert len(error_lines(done)) == 1, done.stderr
        assert says in done.stderr


# -- metrics and progress -------------------------------------------------------------


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_run_serves_metrics_health_and_the_status_page_on_the_given_port() -> None:
    port = free_port()
    running = Running("run", "cli_demo:app", "--metrics-port", str(port))
    try:
        said = running.expect(r"metrics on (http://127\.0\.0\.1:\d+/metrics) .*status page: "
                              r"(\S+)\)")
        url, page_url = said.group(1), said.group(2)
        assert url == f"http://127.0.0.1:{port}/metrics"
        assert page_url == f"http://127.0.0.1:{port}/"
        running.expect(r"app 'cli-demo' running")
        status, page = get(page_url)
        assert status == 200
        assert "<h1>cli-demo</h1>" in page and "<svg" in page
        status, body = get(url.removesuffix("/metrics") + "/health")
        assert status == 200
        assert json.loads(body) == {"app": "cli-demo", "state": "running", "status": "ok",
                                    "tasks": 2}
        status, text = get(url)
        assert status == 200
        assert 'aiostreams_task_records_in_total{app="cli-demo",task="0_0"}' in text
        assert 'aiostreams_app_state{app="cli-demo",state="running"} 1.0' in text
        running.signal(signal.SIGTERM)
        code, stderr = running.finish()
    finally:
        running.kill()
    assert code == 0, stderr


def test_a_taken_metrics_port_exits_2_saying_so() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli("run", "cli_demo:app", "--metrics-port", str(port))
    assert done.returncode == 2, done.stderr
    assert error_lines(done) == [
        f"aiostreams: error: cannot serve metrics on 127.0.0.1:{port}: Address already in use; "
        "choose another --metrics-port (0 picks a free one)"]


def test_progress_line_is_drawn_on_a_terminal() -> None:
    master, slave = os.openpty()
    running = Running("run", "cli_demo:app", stderr=slave)
    os.close(slave)
    seen = bytearray()
    found = threading.Event()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            seen.extend(chunk)
            if b"rec/s" in seen and b"dead letters 2" in seen:
                found.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert found.wait(timeout=30), seen.decode(errors="replace")
        running.signal()
        assert running.proc.wait(timeout=30) == 130  # Ctrl-C
    finally:
        running.kill()
        reader.join(timeout=5)
        os.close(master)
    text = seen.decode(errors="replace")
    assert "cli-demo ▸" in text and "in-flight 0" in text and "retire lag" in text
    assert "app 'cli-demo' stopped" in text


def test_no_progress_keeps_a_terminal_free_of_the_status_line() -> None:
    master, slave = pty.openpty()
    done_reading = threading.Event()
    seen = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen.extend(chunk)
        done_reading.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    running = Running("run", "cli_demo:app", "--no-progress", stderr=slave,
                      DEMO_STOP_AFTER="20")
    os.close(slave)
    try:
        assert running.proc.wait(timeout=30) == 0
    finally:
        running.kill()
    done_reading.wait(timeout=10)
    os.close(master)
    assert b"stopped: 20 record(s) in" in seen
    assert b"rec/s" not in seen


# -- --workers ------------------------------------------------------------------------


def test_workers_run_as_separate_processes_and_exit_0_when_all_do() -> None:
    done = cli("run", "cli_demo:app", "--workers", "2", DEMO_STOP_AFTER="20")
    assert done.returncode == 0, done.stderr
    assert "warning: memory://cli-demo lives inside each worker process" in done.stderr
    assert re.search(r"started 2 worker\(s\): pids \d+, \d+", done.stderr)
    for index in (0, 1):
        assert re.search(rf"aiostreams\[worker {index}\]: {SUMMARY}", done.stderr)


def test_a_worker_failing_past_its_restarts_makes_the_supervisor_exit_non_zero() -> None:
    done = cli("run", "cli_demo:app", "--workers", "2", "--max-restarts", "0",
               "--set", "on_error=fail")
    assert done.returncode == 1, done.stderr
    assert re.search(r"worker [01] \(pid \d+\) exited with code 1; not restarting it "
                     r"\(it crashed 1 times within 300s\); stopping the others", done.stderr)
    assert "processor 'upper' failed on demo-orders[1]@3" in done.stderr


def test_a_crashed_worker_is_restarted_and_the_others_keep_running(tmp_path: Path) -> None:
    done = cli("run", "cli_demo:app", "--workers", "2", DEMO_STOP_AFTER="20",
               DEMO_CRASH_ONCE=str(tmp_path / "crashed"))
    assert done.returncode == 0, done.stderr
    crashed = re.search(r"worker ([01]) \(pid \d+\) exited with code 1; restarting it in "
                        r"1s \(crash 1 of at most 6 within 300s\)", done.stderr)
    assert crashed, done.stderr
    assert re.search(rf"restarted worker {crashed[1]}: pid \d+", done.stderr)
    # both the survivor and the restarted worker finish their records and exit 0
    assert len(re.findall(SUMMARY, done.stderr)) == 2, done.stderr


def test_supervisor_forwards_sigint_and_workers_stop_gracefully() -> None:
    running = Running("run", "cli_demo:app", "--workers", "2")
    try:
        running.expect(r"started 2 worker")
        for _ in range(2):
            running.expect(r"aiostreams\[worker [01]\]: app 'cli-demo' running")
        running.signal(signal.SIGINT)  # to the supervisor only
        code, stderr = running.finish()
    finally:
        running.kill()
    assert code == 130, stderr  # interrupted, and no worker failed:
    assert "exited with code" not in stderr
    for index in (0, 1):
        assert f"aiostreams[worker {index}]: SIGINT: stopping 'cli-demo'" in stderr
        assert re.search(rf"aiostreams\[worker {index}\]: {SUMMARY}", stderr)


def test_workers_bad_module_is_reported_once_before_spawning() -> None:
    done = cli("run", "nope:app", "--workers", "3")
    assert done.returncode == 2
    assert len(error_lines(done)) == 1
    assert "started" not in done.stderr
