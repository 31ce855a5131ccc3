"""Kafka's ACLs in a real ZooKeeper (zkcoord.zk.acls): the writers' znodes and notifications, and a started
AclStore following them."""

import json
import logging

import pytest
from kazoo.client import KazooClient

from zkcoord.auth.acls import Acl, Authorizer, ResourcePattern, ResourcePatternFilter, encode_acls
from zkcoord.clock import ManualClock
from zkcoord.testing.zookeeper import expire_session, wait_until
from zkcoord.zk.acls import (
    CHANGE_EXPIRY_MS,
    AclStore,
    add_acls,
    list_acls,
    read_acls,
    remove_acls,
    resource_path,
    update_acls,
)
from zkcoord.zk.session import HubThread, make_kazoo_client

GROUP = ResourcePattern("Group", "payments")
APPS = ResourcePattern("Topic", "app-", "PREFIXED")
ALICE_READ = Acl("User:alice", "*", "Read", "Allow")
BOB_READ = Acl("User:bob", "*", "Read", "Allow")
ALICE_DENY = Acl("User:alice", "*", "Read", "Deny")


@pytest.fixture
def started_store(zk):
    store = AclStore(zk, Authorizer())
    store.start()
    try:
        yield store
    finally:
        store.stop()


def notifications(zk, root):
    return [zk.get(f"{root}/{child}")[0] for child in sorted(zk.get_children(root))]


def test_writers_store_and_notify_as_kafka(zk):
    assert add_acls(zk, GROUP, [ALICE_READ])
    assert not add_acls(zk, GROUP, [ALICE_READ])  # no change: no write, no notification
    assert add_acls(zk, APPS, [BOB_READ, ALICE_DENY])

    data, _ = zk.get("/kafka-acl/Group/payments")
    assert json.loads(data) == {
        "version": 1,
        "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}],
    }
    assert zk.exists("/kafka-acl-extended/prefixed/Topic/app-")
    assert notifications(zk, "/kafka-acl-changes") == [b"GROUP:payments"]
    assert [json.loads(n) for n in notifications(zk, "/kafka-acl-extended-changes")] == [
        {"version": 1, "resourceType": "TOPIC", "name": "app-", "patternType": "PREFIXED"}
    ]
    assert list_acls(zk) == {GROUP: {ALICE_READ}, APPS: {BOB_READ, ALICE_DENY}}
    assert list_acls(zk, ResourcePatternFilter("Topic", "app-1", "MATCH")) == {APPS: {BOB_READ, ALICE_DENY}}

    assert remove_acls(zk, APPS, [ALICE_DENY])
    assert read_acls(zk, APPS)[0] == {BOB_READ}
    assert remove_acls(zk, GROUP)
    assert zk.exists("/kafka-acl/Group/payments") is None  # the last ACL takes its znode with it
    assert not remove_acls(zk, GROUP)
    assert len(notifications(zk, "/kafka-acl-changes")) == 2


def test_a_concurrent_write_is_read_again_not_lost(zk):
    add_acls(zk, GROUP, [ALICE_READ])
    calls = []

    def add_bob_after_someone_else_wrote(current):
        if not calls:
            add_acls(zk, GROUP, [ALICE_DENY])  # lands between our read and our versioned write
        calls.append(current)
        return current | {BOB_READ}

    assert update_acls(zk, GROUP, add_bob_after_someone_else_wrote)
    assert calls == [{ALICE_READ}, {ALICE_READ, ALICE_DENY}]
    assert read_acls(zk, GROUP)[0] == {ALICE_READ, ALICE_DENY, BOB_READ}


def test_invalid_resource_names_are_refused(zk):
    with pytest.raises(ValueError, match="invalid resource name"):
        add_acls(zk, ResourcePattern("Topic", "a/b"), [ALICE_READ])


def test_a_started_store_follows_the_writers(zk, started_store):
    authorizer = started_store.authorizer

    def alice_reads(topic):
        return authorizer.authorize("User:alice", "10.0.0.1", "Read", "Topic", topic)

    add_acls(zk, ResourcePattern("Topic", "*"), [ALICE_READ])
    wait_until(lambda: alice_reads("app-1"), what="the literal wildcard ACL to reach the store")
    add_acls(zk, APPS, [ALICE_DENY])
    wait_until(lambda: not alice_reads("app-1"), what="the prefixed Deny to reach the store")
    assert alice_reads("other")
    remove_acls(zk, APPS)
    wait_until(lambda: alice_reads("app-1"), what="the removal to reach the store")
    assert authorizer.patterns() == [ResourcePattern("Topic", "*")]


def test_the_store_loads_what_exists_skips_foreign_data_and_denies_what_it_cannot_read(zk, caplog):
    add_acls(zk, GROUP, [ALICE_READ])
    zk.create("/kafka-acl/Group/broken", b"{not json", makepath=True)
    zk.create("/kafka-acl/Planet/earth", b'{"version":1,"acls":[]}', makepath=True)
    store = AclStore(zk, Authorizer(allow_everyone_if_no_acl_found=True))
    with caplog.at_level(logging.WARNING, logger="zkcoord.zk.acls"):
        store.start()
        try:
            broken = ResourcePattern("Group", "broken")
            assert store.authorizer.patterns() == [broken, GROUP]
            # Closed, not open to everyone as a resource without ACLs would be here.
            assert not store.authorizer.authorize("User:alice", "h", "Read", "Group", "broken")
            assert store.authorizer.authorize("User:alice", "h", "Read", "Group", "unknown")
            zk.create("/kafka-acl-changes/acl_changes_", b"no separator", sequence=True)
            zk.create("/kafka-acl-changes/acl_changes_", b"GROUP:broken", sequence=True)
            add_acls(zk, ResourcePattern("Group", "later"), [BOB_READ])  # a good change after the bad ones
            wait_until(
                lambda: store.authorizer.authorize("User:bob", "h", "Read", "Group", "later"),
                what="the change after foreign notifications",
            )
        finally:
            store.stop()
    logged = caplog.text
    assert "/kafka-acl/Group/broken" in logged and "/kafka-acl/Planet" in logged
    assert "'no separator'" in logged


def test_expired_notifications_are_purged(zk):
    add_acls(zk, GROUP, [ALICE_READ])
    clock = ManualClock(now_ms=zk.exists("/kafka-acl-changes").ctime + CHANGE_EXPIRY_MS + 60_000)
    store = AclStore(zk, Authorizer(), clock)
    store.start()
    try:
        add_acls(zk, GROUP, [BOB_READ])  # its notification is processed, then the expired ones are purged
        wait_until(lambda: zk.get_children("/kafka-acl-changes") == [], what="the expired notifications to go")
        assert store.authorizer.acls(GROUP) == {ALICE_READ, BOB_READ}
    finally:
        store.stop()


def test_the_store_runs_on_a_gevent_hub(zk, zk_connect):
    """As a node runs it: a SequentialGeventHandler client on a hub of its own, the store started there."""
    hub = HubThread("acl-store-test").start()
    try:
        client = hub.call(make_kazoo_client, zk_connect, 10_000, timeout=10)
        hub.call(client.start, 15, timeout=20)
        store = AclStore(client, Authorizer())
        hub.call(store.start, timeout=20)
        try:
            add_acls(zk, GROUP, [ALICE_READ])
            wait_until(
                lambda: store.authorizer.authorize("User:alice", "h", "Read", "Group", "payments"),
                what="the change to reach the store on the gevent hub",
            )
        finally:
            hub.call(store.stop, timeout=20)
            hub.call(client.stop, timeout=20)
            hub.call(client.close, timeout=20)
    finally:
        hub.stop()


def test_after_a_lost_session_the_store_reads_everything_again(zk, zk_connect):
    own = KazooClient(hosts=zk_connect)
    own.start(timeout=15)
    store = AclStore(own, Authorizer())
    try:
        store.start()
        # A write without a notification (or one purged while the session was lost) is seen only by a full read.
        zk.create(resource_path(GROUP), encode_acls([ALICE_READ]), makepath=True)
        expire_session(own)
        wait_until(lambda: store.authorizer.acls(GROUP) == {ALICE_READ}, what="the reload after the lost session")
    finally:
        store.stop()
        own.stop()
        own.close()
