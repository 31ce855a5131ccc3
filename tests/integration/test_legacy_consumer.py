"""LegacyConsumer against a real ZooKeeper (legacy-zk-protocol.md §1, §3, §5)."""

import json
import re
import time

import pytest
from kazoo.client import KazooClient
from legacy_support import Recorder, member, prepare_cluster

from zkcoord.assign.legacy import legacy_assignment
from zkcoord.errors import CommitFailedError, ConfigError, ConsumerRebalanceFailedError
from zkcoord.model import TopicPartition
from zkcoord.testing.legacy import converged
from zkcoord.testing.zookeeper import drop_connection, expire_session, wait_until
from zkcoord.zk import admin, layout


def _ids(members):
    return [m.consumer_id for m in members]


def _close_all(members):
    for m in members:
        m.close()


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_ten_members_with_mixed_streams_converge_to_the_pure_assignment(zk, zk_connect, strategy):
    prepare_cluster(zk, {"t1": 17, "t2": 9})
    streams = [1, 2, 3, 1, 2, 1, 3, 1, 2, 1]
    members = []
    try:
        for i, n in enumerate(streams):
            # roundrobin needs every member on the same topic set (§4.2); range also gets a member on t1 only
            topics = {"t1": n} if strategy == "range" and i == 3 else {"t1": n, "t2": n}
            members.append(
                member(
                    zk_connect,
                    f"m{i}",
                    subscription={"topics": topics},
                    partition_assignment_strategy=strategy,
                    rebalance_max_retries=10,
                ).start()
            )
        snapshot = wait_until(lambda: converged(zk, "g", strategy, _ids(members)), what="convergence")
        believed = {tp: thread for m in members for thread, tps in m.assignment().items() for tp in tps}
        assert believed == snapshot.owners
        assert len(snapshot.owners) == 17 + 9
    finally:
        _close_all(members)


def test_registration_is_byte_compatible_with_0_8_2(zk, zk_connect):
    """§1.4: exact key order, no spaces, string timestamp; ephemeral; persistent empty parents."""
    prepare_cluster(zk, {"a": 1, "b": 1})
    with member(zk_connect, "c1", subscription={"topics": {"b": 2, "a": 1}}) as consumer:
        data, stat = zk.get(layout.consumer_path("g", consumer.consumer_id))
        assert re.fullmatch(
            rb'\{"version":1,"subscription":\{"b":2,"a":1\},"pattern":"static","timestamp":"\d+"\}', data
        )
        assert stat.ephemeralOwner == consumer.zk_client.client_id[0]
        ids_data, ids_stat = zk.get(layout.ids_path("g"))
        assert ids_data == b"" and ids_stat.ephemeralOwner == 0
        owner, owner_stat = zk.get(layout.owner_path("g", "a", 0))
        assert owner == b"g_c1-0" and owner_stat.ephemeralOwner == stat.ephemeralOwner


def test_generated_consumer_id_follows_0_8_2_format(zk, zk_connect):
    prepare_cluster(zk, {"t": 1})
    consumer = member(zk_connect, None)
    assert re.fullmatch(r"g_.+-\d{13}-[0-9a-f]{1,8}", consumer.consumer_id)


def test_join_leave_and_session_expiry_each_reconverge(zk, zk_connect):
    prepare_cluster(zk, {"t": 12})
    recorder = Recorder()
    members = [member(zk_connect, f"m{i}", recorder=recorder).start() for i in range(3)]
    try:
        wait_until(lambda: converged(zk, "g", members=_ids(members)), what="initial convergence")
        members.append(member(zk_connect, "m3", recorder=recorder).start())
        wait_until(lambda: converged(zk, "g", members=_ids(members)), what="convergence after a join")
        leaving = members.pop(0)
        leaving.close()
        wait_until(lambda: converged(zk, "g", members=_ids(members)), what="convergence after a leave")
        old_session = members[0].zk_client.client_id[0]
        expire_session(members[0].zk_client)
        recorder.wait_for("legacy.session_expired", member=members[0].consumer_id)
        wait_until(lambda: converged(zk, "g", members=_ids(members)), what="convergence after expiry")
        assert members[0].zk_client.client_id[0] != old_session
        _, stat = zk.get(layout.consumer_path("g", members[0].consumer_id))
        assert stat.ephemeralOwner == members[0].zk_client.client_id[0]
    finally:
        _close_all(members)


def test_dropped_connection_keeps_session_and_ownership(zk, zk_connect):
    prepare_cluster(zk, {"t": 4})
    recorder = Recorder()
    with member(zk_connect, "m0", recorder=recorder) as consumer:
        session = consumer.zk_client.client_id[0]
        before = consumer.owned_partitions()
        drop_connection(consumer.zk_client)
        wait_until(lambda: consumer.zk_client.connected and consumer.owned_partitions() == before, what="reconnect")
        assert consumer.zk_client.client_id[0] == session
        assert not recorder.of("legacy.session_expired")


def test_conflicting_claim_rolls_back_then_retries_until_released(zk, zk_connect):
    """§3.4 step 9: on a conflict delete this attempt's owner znodes, back off, retry."""
    prepare_cluster(zk, {"t": 4})
    zk.create(layout.owner_path("g", "t", 2), b"g_gone-0", makepath=True)  # a previous owner not yet released
    recorder = Recorder()
    consumer = member(zk_connect, "m0", recorder=recorder, rebalance_backoff_ms=400, rebalance_max_retries=8)
    import threading

    starter = threading.Thread(target=consumer.start)
    starter.start()
    try:
        first = recorder.wait_for("legacy.rebalance_attempt", outcome="conflict")[0]
        assert first["conflicts"] == [["t", 2, "g_gone-0"]]
        # The roll-back left nothing of this attempt behind: only the stale node is there.
        assert zk.get_children(layout.owners_path("g", "t")) == ["2"]
        zk.delete(layout.owner_path("g", "t", 2))
        starter.join(20)
        success = recorder.wait_for("legacy.rebalance_attempt", outcome="success")[0]
        assert success["attempt"] > first["attempt"]
        assert sorted(map(tuple, success["claimed"])) == [("t", p) for p in range(4)]
        wait_until(lambda: converged(zk, "g", members=[consumer.consumer_id]), what="ownership after release")
    finally:
        consumer.close()


def test_every_attempt_failing_leaves_member_up_and_owning_nothing(zk, zk_connect):
    """§3.3: after rebalance.max.retries failures the member owns nothing until the next trigger."""
    prepare_cluster(zk, {"t": 2})
    recorder = Recorder()
    blocker = KazooClient(hosts=zk_connect)
    blocker.start()
    try:
        with member(zk_connect, "m0", recorder=recorder) as consumer:
            blocker.create(layout.owner_path("g", "t", 2), b"g_other-0", ephemeral=True, makepath=True)
            admin.alter_topic_partitions(zk, "t", 3)  # the trigger; t/2 keeps conflicting
            failed = recorder.wait_for("legacy.rebalance_failed", member=consumer.consumer_id)[0]
            assert failed["attempts"] == 4
            assert consumer.owned_partitions() == set()
            assert zk.get_children(layout.owners_path("g", "t")) == ["2"]
            assert zk.exists(layout.consumer_path("g", consumer.consumer_id))
            blocker.stop()  # the stale owner goes, but only a new trigger makes the member try again
            admin.alter_topic_partitions(zk, "t", 4)
            wait_until(lambda: converged(zk, "g", members=[consumer.consumer_id]), what="recovery")
    finally:
        blocker.stop()
        blocker.close()


def test_startup_raises_when_every_attempt_fails(zk, zk_connect):
    prepare_cluster(zk, {"t": 1})
    zk.create(layout.owner_path("g", "t", 0), b"g_other-0", makepath=True)
    consumer = member(zk_connect, "m0", rebalance_max_retries=2, rebalance_backoff_ms=50)
    with pytest.raises(ConsumerRebalanceFailedError, match="can't rebalance after 2 retries"):
        consumer.start()
    assert not zk.exists(layout.consumer_path("g", "g_m0"))


def test_owner_node_with_our_own_thread_id_counts_as_ours(zk, zk_connect):
    """§1.5: NodeExists with identical data is success (a retry after connection loss)."""
    prepare_cluster(zk, {"t": 2})
    zk.create(layout.owner_path("g", "t", 1), b"g_m0-0", makepath=True)
    recorder = Recorder()
    with member(zk_connect, "m0", recorder=recorder) as consumer:
        assert consumer.owned_partitions() == {TopicPartition("t", 0), TopicPartition("t", 1)}
        assert not recorder.of("legacy.rebalance_attempt", outcome="conflict")


def test_partition_count_change_triggers_rebalance(zk, zk_connect):
    prepare_cluster(zk, {"t": 2})
    members = [member(zk_connect, f"m{i}").start() for i in range(2)]
    try:
        wait_until(lambda: converged(zk, "g", members=_ids(members)), what="initial convergence")
        admin.alter_topic_partitions(zk, "t", 6)
        snapshot = wait_until(lambda: converged(zk, "g", members=_ids(members)), what="new partitions owned")
        assert len(snapshot.owners) == 6
    finally:
        _close_all(members)


def test_topic_deletion_only_warns(zk, zk_connect):
    """§3.2: deleting a subscribed topic's node triggers no rebalance."""
    prepare_cluster(zk, {"t": 2, "u": 1})
    recorder = Recorder()
    with member(zk_connect, "m0", recorder=recorder, subscription={"topics": {"t": 1, "u": 1}}):
        attempts = len(recorder.of("legacy.rebalance_attempt"))
        zk.delete(layout.topic_path("u"), recursive=True)
        zk.create("/marker")  # a later, unrelated write: events before it have been delivered
        time.sleep(0.3)
        assert len(recorder.of("legacy.rebalance_attempt")) == attempts


def test_no_brokers_claims_nothing_until_a_broker_registers(zk, zk_connect):
    """§3.4 step 2 and §3.2: zero brokers is success without claims; /brokers/ids is watched after."""
    admin.create_topic(zk, "t", 3)
    recorder = Recorder()
    with member(zk_connect, "m0", recorder=recorder) as consumer:
        assert recorder.of("legacy.rebalance_attempt", outcome="no-brokers")
        assert consumer.owned_partitions() == set()
        admin.register_broker(zk, 1, "localhost", 9092, timestamp_ms=1)
        wait_until(lambda: converged(zk, "g", members=[consumer.consumer_id]), what="claims after a broker")


def test_foreign_jvm_member_is_respected(zk, zk_connect):
    """A member written with kazoo exactly as unmodified 0.8.2 would share the group without a fight.

    The foreign member is the Python reference stand-in (:func:`_jvm_rebalance`), not a JVM: the test runs in
    about a second on the per-test chroot, whose broker is a fake registration a real connector's fetcher
    would keep failing to reach. The real 0.8.2.2 connector shares groups with zkcoord members on a real
    broker in test_jvm_interop.py.
    """
    prepare_cluster(zk, {"t": 10})
    recorder = Recorder()
    members = [member(zk_connect, f"m{i}", recorder=recorder).start() for i in range(2)]
    foreign = "g_jvm-host-1437492049839-1a2b3c4d"
    try:
        wait_until(lambda: converged(zk, "g", members=_ids(members)), what="initial convergence")
        zk.create(
            layout.consumer_path("g", foreign),
            b'{"version":1,"subscription":{"t":2},"pattern":"static","timestamp":"1437492049839"}',
            ephemeral=True,
        )
        _jvm_rebalance(zk, foreign)
        snapshot = wait_until(lambda: converged(zk, "g", members=[*_ids(members), foreign]), what="sharing")
        foreign_owned = {tp for tp, owner in snapshot.owners.items() if owner.startswith(foreign)}
        assert foreign_owned and all(
            zk.get(layout.owner_path("g", *tp))[0].startswith(foreign.encode()) for tp in foreign_owned
        )
        assert not recorder.of("legacy.rebalance_failed")
    finally:
        _close_all(members)


def _jvm_rebalance(zk, consumer_id, attempts=8, backoff=0.3):
    """What ZKCC does for one member (§3.4), with its owner znodes written the 0.8.2 way.

    The Python reference stand-in for a JVM member, kept where a JVM's start-up is not worth it;
    test_jvm_interop.py runs the real one.
    """
    for _ in range(attempts):
        snapshot = admin.read_group(zk, "g")
        decision = legacy_assignment("range", snapshot.members, snapshot.partitions, consumer_id)
        created, conflict = [], False
        for thread, claims in decision.items():
            for topic, partition in claims:
                path = layout.owner_path("g", topic, partition)
                try:
                    zk.create(path, thread.encode(), ephemeral=True, makepath=True)
                    created.append(path)
                except Exception:
                    conflict = True
        if not conflict:
            return
        for path in created:
            zk.delete(path)
        time.sleep(backoff)
    raise AssertionError("the JVM-style member could not claim its partitions")


def test_offsets_commit_only_changed_and_hand_over(zk, zk_connect):
    """§1.6 and §5.1: next offset to consume, decimal string, only changed offsets written."""
    prepare_cluster(zk, {"t": 2})
    first = member(zk_connect, "m0").start()
    try:
        t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
        assert first.position(t0) == -1 and first.committed(t0) is None
        first.commit({t0: 42, t1: 7})
        assert zk.get(layout.offset_path("g", "t", 0))[0] == b"42"
        version = zk.get(layout.offset_path("g", "t", 1))[1].version
        first.seek(t0, 43)
        first.commit()
        assert zk.get(layout.offset_path("g", "t", 0))[0] == b"43"
        assert zk.get(layout.offset_path("g", "t", 1))[1].version == version  # unchanged: not rewritten
        with pytest.raises(CommitFailedError):
            first.commit({TopicPartition("t", 9): 1})
    finally:
        first.close()
    with member(zk_connect, "m1") as second:
        assert second.position(TopicPartition("t", 0)) == 43
        assert second.position(TopicPartition("t", 1)) == 7


def test_auto_commit_writes_positions_on_interval_and_at_close(zk, zk_connect):
    prepare_cluster(zk, {"t": 1})
    consumer = member(zk_connect, "m0", auto_commit_enable=True, auto_commit_interval_ms=100).start()
    try:
        consumer.seek(TopicPartition("t", 0), 5)
        wait_until(lambda: zk.exists(layout.offset_path("g", "t", 0)), what="auto-commit")
        consumer.seek(TopicPartition("t", 0), 9)
    finally:
        consumer.close()
    assert zk.get(layout.offset_path("g", "t", 0))[0] == b"9"


def test_rebalance_listener_sees_revocation_before_release_and_assignment_after_claim(zk, zk_connect):
    prepare_cluster(zk, {"t": 4})
    seen = []

    class Listener:
        def on_partitions_revoked(self, revoked):
            owners = {tp: zk.exists(layout.owner_path("g", *tp)) is not None for tp in revoked}
            seen.append(("revoked", sorted(revoked), all(owners.values())))

        def on_partitions_assigned(self, assigned):
            seen.append(("assigned", sorted(assigned), all(zk.exists(layout.owner_path("g", *tp)) for tp in assigned)))

    with member(zk_connect, "m0", listener=Listener()), member(zk_connect, "m1"):
        wait_until(lambda: converged(zk, "g", members=["g_m0", "g_m1"]), what="two members")
    assert seen[0] == ("assigned", [TopicPartition("t", p) for p in range(4)], True)
    assert ("revoked", [TopicPartition("t", p) for p in range(4)], True) in seen
    assert ("assigned", [TopicPartition("t", 0), TopicPartition("t", 1)], True) in seen


def test_wildcard_member_follows_new_topics_and_skips_internal(zk, zk_connect):
    """§2.4 and §3.1 step 3: the whitelist is re-evaluated when /brokers/topics changes."""
    prepare_cluster(zk, {"t1": 2, "x": 1, "__consumer_offsets": 3})
    with member(zk_connect, "w", subscription={"whitelist": "t.*,__consumer_offsets", "num_streams": 2}) as consumer:
        data = zk.get(layout.consumer_path("g", consumer.consumer_id))[0]
        assert json.loads(data)["pattern"] == "white_list"
        assert b'"subscription":{"t.*|__consumer_offsets":2}' in data
        wait_until(lambda: {tp.topic for tp in consumer.owned_partitions()} == {"t1"}, what="t1 owned")
        admin.create_topic(zk, "t2", 3)
        wait_until(lambda: {tp.topic for tp in consumer.owned_partitions()} == {"t1", "t2"}, what="t2 owned")
        wait_until(lambda: converged(zk, "g", members=[consumer.consumer_id]), what="wildcard convergence")


def test_own_ephemeral_left_by_an_old_session_is_waited_out(zk, zk_connect):
    """§1.4 / ZOOKEEPER-1740: other data at our ids path means back off a session timeout and retry."""
    prepare_cluster(zk, {"t": 1})
    old = KazooClient(hosts=zk_connect)
    old.start()
    old.create(
        layout.consumer_path("g", "g_m0"),
        b'{"version":1,"subscription":{"t":1},"pattern":"static","timestamp":"1"}',
        ephemeral=True,
        makepath=True,
    )
    recorder = Recorder()
    consumer = member(zk_connect, "m0", recorder=recorder, zookeeper_session_timeout_ms=600)
    import threading

    starter = threading.Thread(target=consumer.start)
    starter.start()
    try:
        recorder.wait_for("legacy.registration_conflict")
        old.stop()  # the old session ends; its node goes
        starter.join(20)
        recorder.wait_for("legacy.registered")
        data, stat = zk.get(layout.consumer_path("g", "g_m0"))
        assert b'"timestamp":"1"' not in data and stat.ephemeralOwner == consumer.zk_client.client_id[0]
        wait_until(lambda: converged(zk, "g", members=["g_m0"]), what="convergence")
    finally:
        old.close()
        consumer.close()


def test_garbage_registration_fails_attempts_but_member_stays_up(zk, zk_connect, caplog):
    """§6: 0.8.2 cannot read it either, so every member's attempt fails; nothing crashes."""
    prepare_cluster(zk, {"t": 2})
    recorder = Recorder()
    with member(zk_connect, "m0", recorder=recorder) as consumer:
        zk.create(layout.consumer_path("g", "g_pykafka"), b"t", ephemeral=True)
        failed = recorder.wait_for("legacy.rebalance_attempt", outcome="error")[0]
        assert "g_pykafka" in failed["error"]
        assert "cannot decode /consumers/g/ids/g_pykafka" in caplog.text
        recorder.wait_for("legacy.rebalance_failed")
        assert consumer.owned_partitions() == set()
        zk.delete(layout.consumer_path("g", "g_pykafka"))
        wait_until(lambda: converged(zk, "g", members=[consumer.consumer_id]), what="recovery")


def test_garbage_topic_node_means_no_partitions(zk, zk_connect, caplog):
    prepare_cluster(zk, {"t": 2})
    zk.create(layout.topic_path("junk"), b"\xff\xfenot json")
    with member(zk_connect, "m0", subscription={"topics": {"t": 1, "junk": 1}}) as consumer:
        assert consumer.owned_partitions() == {TopicPartition("t", 0), TopicPartition("t", 1)}
    assert "treating topic junk as having no partitions" in caplog.text


def test_config_errors_are_clear():
    with pytest.raises(ConfigError, match="group.id"):
        member("127.0.0.1:1", "x", **{"group.id": "bad group"})
    with pytest.raises(ConfigError, match="exactly one"):
        member("127.0.0.1:1", "x", subscription={"topics": {"t": 1}, "whitelist": "t"})


def test_reconnect_on_the_same_session_rearms_watches(zk, zk_connect):
    """kazoo forgets watchers when a connection drops; a later join must still be noticed."""
    prepare_cluster(zk, {"t": 4})
    recorder = Recorder()
    with member(zk_connect, "m0", recorder=recorder) as first:
        drop_connection(first.zk_client)
        recorder.wait_for("legacy.rebalance_attempt", reason="reconnected", outcome="success")
        with member(zk_connect, "m1", recorder=recorder) as second:
            wait_until(lambda: converged(zk, "g", members=[first.consumer_id, second.consumer_id]), what="a join")
        assert not recorder.of("legacy.rebalance_failed")


def test_uncertain_owner_nodes_are_released_only_when_ours(zk, zk_connect):
    """A claim or release that died with the connection leaves an owner znode of unknown fate; the next
    attempt deletes it only if its ephemeralOwner is our session, never another member's node."""
    prepare_cluster(zk, {"t": 2, "u": 2})
    other = KazooClient(hosts=zk_connect)
    other.start()
    try:
        with member(zk_connect, "m0") as consumer:
            other.create(layout.owner_path("g", "u", 0), b"g_other-0", ephemeral=True, makepath=True)
            ours = layout.owner_path("g", "u", 1)
            consumer._io.call(lambda: consumer.zk_client.create(ours, b"g_m0-0", ephemeral=True))
            consumer._io.call(lambda: consumer._uncertain.update({TopicPartition("u", 0), TopicPartition("u", 1)}))
            admin.alter_topic_partitions(zk, "t", 3)  # a trigger
            wait_until(lambda: zk.exists(ours) is None, what="our stray owner node released")
            wait_until(
                lambda: not consumer._uncertain and len(consumer.owned_partitions()) == 3, what="a clean attempt"
            )
            assert zk.get(layout.owner_path("g", "u", 0))[0] == b"g_other-0"
    finally:
        other.stop()
        other.close()


def test_wildcard_that_python_cannot_evaluate_fails_attempts_instead_of_guessing(zk, zk_connect):
    """A JVM member's wildcard in java.util.regex syntax only; its registration is written by hand, as the
    Python reference stand-in for that member: the test is about zkcoord's refusal, not the JVM's claims."""
    prepare_cluster(zk, {"t": 2})
    recorder = Recorder()
    with member(zk_connect, "m0", recorder=recorder) as consumer:
        zk.create(
            layout.consumer_path("g", "g_jvm"),
            b'{"version":1,"subscription":{"\\\\p{Alnum}+":1},"pattern":"white_list","timestamp":"1"}',
            ephemeral=True,
        )
        failed = recorder.wait_for("legacy.rebalance_attempt", outcome="error")[0]
        assert "UnsupportedFilterError" in failed["error"]
        recorder.wait_for("legacy.rebalance_failed")
        assert consumer.owned_partitions() == set()


def test_topic_node_of_the_wrong_shape_fails_the_attempt_as_in_0_8_2(zk, zk_connect):
    prepare_cluster(zk, {"t": 2})
    zk.create(layout.topic_path("odd"), b'{"version":1,"partitions":[0,1]}')
    with pytest.raises(ConsumerRebalanceFailedError):
        member(zk_connect, "m0", subscription={"topics": {"t": 1, "odd": 1}}, rebalance_max_retries=1).start()
