"""The cluster fixture itself: a worker that registers with its master, executors that run
jobs, a private disk the driver does not see, and nothing left running after stop."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from localcluster import LocalSparkCluster

pytestmark = [pytest.mark.spark, pytest.mark.chaos, pytest.mark.timeout(300)]


def test_a_private_disk_worker_sees_its_own_tmpfs_and_stop_leaves_no_process(
        tmp_path: Path) -> None:
    private = tmp_path / "private"
    cluster = LocalSparkCluster(private_dir=private)
    cluster.start()
    try:
        groups = cluster.alive_groups()
        assert len(groups) == 2  # the master's and the worker's
        worker_pid = groups[1]
        # the worker's mount namespace has a tmpfs at the private path; ours has none
        inside = Path(f"/proc/{_java_child(worker_pid)}/mounts").read_text()
        assert f" {private} tmpfs " in inside
        assert f" {private} " not in Path("/proc/self/mounts").read_text()
    finally:
        cluster.stop()
    assert cluster.alive_groups() == []
    assert not cluster.scratch.exists()


def _java_child(pgid: int) -> int:
    """The worker's JVM, in the worker's process group (``unshare``/``sh`` exec into it)."""
    out = subprocess.run(["pgrep", "-g", str(pgid), "java"], capture_output=True, text=True,
                         check=True).stdout
    return int(out.split()[0])
