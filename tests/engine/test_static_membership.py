"""The group_instance_id a worker derives from its state directory
(aiostreams/engine/static_membership.py): stable across restarts, distinct among the live
processes of one state directory, and only where static membership is safe."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiostreams.engine.static_membership import (
    TOKEN_FILE,
    InstanceClaim,
    claim_instance_id,
    derives_instance_id,
)
from aiostreams.errors import ConfigError


def test_a_restarted_worker_claims_the_id_it_had(tmp_path: Path) -> None:
    first = claim_instance_id("app", tmp_path)
    first.release()
    again = claim_instance_id("app", tmp_path)
    assert again.instance_id == first.instance_id
    assert again.instance_id.startswith("app-") and again.instance_id.endswith("-0")
    assert (tmp_path / TOKEN_FILE).read_text().strip() in again.instance_id


def test_two_state_directories_give_different_ids(tmp_path: Path) -> None:
    one = claim_instance_id("app", tmp_path / "a")
    other = claim_instance_id("app", tmp_path / "b")
    assert one.instance_id != other.instance_id


def test_a_slot_held_by_a_killed_process_is_free_again(tmp_path: Path) -> None:
    """The lock dies with its process: a worker killed with SIGKILL leaves its slot (and so
    its id) to its restart."""
    with subprocess.Popen(
            [sys.executable, "-c",
             "import sys, time; from aiostreams.engine.static_membership import "
             "claim_instance_id as c; print(c('app', sys.argv[1]).instance_id, flush=True); "
             "time.sleep(600)", str(tmp_path)],
            stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None
            held = holder.stdout.readline().strip()
            assert held.endswith("-0")
            beside = claim_instance_id("app", tmp_path)
            assert beside.instance_id.endswith("-1")
            beside.release()
        finally:
            holder.kill()
    assert claim_instance_id("app", tmp_path).instance_id == held


def test_a_token_file_that_is_not_one_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / TOKEN_FILE).write_text("not a token\n")
    with pytest.raises(ConfigError, match=r"\.instance-token holds 'not a token'.*delete it"):
        claim_instance_id("app", tmp_path)


@pytest.mark.parametrize(("static", "configured", "state_dir", "kafka", "derives"), [
    (True, None, "/s", True, True),
    (False, None, "/s", True, False),  # turned off
    (True, "pod-0", "/s", True, False),  # configured: used as it is
    (True, None, None, True, False),  # no state: dynamic (moving a task is cheap)
    (True, None, "/s", False, False),  # memory://: one process, nothing to keep
])
def test_an_id_is_derived_only_where_static_membership_is_safe(
        static: bool, configured: str | None, state_dir: str | None, kafka: bool,
        derives: bool) -> None:
    assert derives_instance_id(static_membership=static, group_instance_id=configured,
                               state_dir=state_dir, kafka=kafka) is derives


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 7)), max_size=40))
def test_live_claims_of_one_state_directory_are_distinct_and_take_the_lowest_free_slot(
        tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[bool, int]]) -> None:
    root = tmp_path_factory.mktemp("state")
    live: list[InstanceClaim] = []
    try:
        for claim, which in steps:
            if claim or not live:
                held = {c.slot for c in live}
                new = claim_instance_id("app", root)
                assert new.slot == min(set(range(len(live) + 1)) - held)
                live.append(new)
            else:
                live.pop(which % len(live)).release()
            ids = [c.instance_id for c in live]
            assert len(set(ids)) == len(ids)
    finally:
        for c in live:
            c.release()
