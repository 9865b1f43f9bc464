"""The memory broker's group coordinator, driven directly (no event loop needed)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aiostreams.transport.memory_group import GroupCoordinator
from aiostreams.types import TopicPartition

TOPICS = {"a": 4, "b": 4, "c": 3}


def coordinator(topics: dict[str, int]) -> GroupCoordinator:
    return GroupCoordinator("g", topics.get)


def sync(group: GroupCoordinator, member: str) -> None:
    """What a member does inside getmany (callbacks elided): revoke, release, acquire."""
    group.release(member, group.revocations(member))
    group.acquire(member, group.acquirable(member))


def test_generation_grows_with_every_membership_change() -> None:
    group = coordinator(TOPICS)
    group.join("m1", ["a"], lambda: None)
    group.join("m2", ["a"], lambda: None)
    group.subscribe("m2", ["a"])  # unchanged: no new generation
    assert group.generation == 2
    group.leave("m1")
    assert group.generation == 3


def test_every_member_is_woken_on_a_new_generation_and_others_on_a_release() -> None:
    group = coordinator(TOPICS)
    woken: list[str] = []
    group.join("m1", ["a"], lambda: woken.append("m1"))
    sync(group, "m1")
    woken.clear()
    group.join("m2", ["a"], lambda: woken.append("m2"))
    assert sorted(woken) == ["m1", "m2"]
    woken.clear()
    sync(group, "m1")
    assert woken == ["m2"]


def test_target_held_by_the_old_owner_is_not_acquirable_until_released() -> None:
    group = coordinator({"a": 2})
    group.join("m1", ["a"], lambda: None)
    sync(group, "m1")
    group.join("m2", ["a"], lambda: None)
    assert group.target("m2") == {TopicPartition("a", 1)}
    assert group.acquirable("m2") == frozenset()
    group.release("m1", group.revocations("m1"))
    assert group.acquirable("m2") == {TopicPartition("a", 1)}


def test_committed_offsets_outlive_members_and_go_with_a_deleted_topic() -> None:
    group = coordinator(TOPICS)
    group.join("m1", ["a"], lambda: None)
    group.commit({TopicPartition("a", 0): 5, TopicPartition("b", 0): 1})
    group.leave("m1")
    assert group.committed(TopicPartition("a", 0)) == 5
    group.forget_topic("a")
    assert group.committed(TopicPartition("a", 0)) is None
    assert group.committed(TopicPartition("b", 0)) == 1


operations = st.lists(
    st.tuples(
        st.sampled_from(["join", "leave", "sync", "subscribe", "delete", "create"]),
        st.sampled_from(["m1", "m2", "m3", "m4"]),
        st.sets(st.sampled_from(sorted(TOPICS)), min_size=1),
    ),
    max_size=40,
)


@given(operations)
def test_any_history_keeps_single_ownership_and_converges_to_the_targets(
    history: list[tuple[str, str, set[str]]],
) -> None:
    topics = dict(TOPICS)
    group = coordinator(topics)
    members: set[str] = set()
    for op, member, chosen in history:
        if op == "join" and member not in members:
            group.join(member, chosen, lambda: None)
            members.add(member)
        elif op == "leave" and member in members:
            group.leave(member)
            members.discard(member)
        elif op == "sync" and member in members:
            sync(group, member)
        elif op == "subscribe" and member in members:
            group.subscribe(member, chosen)
        elif op == "delete":
            for topic in chosen:
                topics.pop(topic, None)
            group.topics_changed(chosen)
        elif op == "create":
            for topic in chosen:
                topics.setdefault(topic, TOPICS[topic])
            group.topics_changed(chosen)
        owned = [group.owned(m) for m in members]
        assert sum(map(len, owned)) == len(frozenset().union(*owned))  # never owned twice

    for _ in range(2):  # round one releases everything revoked, round two acquires it
        for member in sorted(members):
            sync(group, member)

    for member in members:
        assert group.owned(member) == group.target(member)
        assert not group.needs_sync(member)
