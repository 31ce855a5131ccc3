"""ACLs written by Kafka 3.9's own kafka-acls (``kafka.admin.AclCommand`` through AclAuthorizer) are honoured by
zkcoord's store, and what ``zkcoord acls`` writes, kafka-acls lists. Three JVM runs of about 3 s each."""

from kafka_tool_support import kafka_acls

from zkcoord import cli
from zkcoord.auth.acls import Authorizer
from zkcoord.testing.zookeeper import wait_until
from zkcoord.zk.acls import AclStore


def blocks(listing: str) -> set[tuple[str, frozenset[str]]]:
    """kafka-acls' listing as (resource line, its ACL lines): both tools order them as their sets happen to."""
    found = set()
    for block in listing.strip().split("\n\n"):
        title, *acls = block.split("\n")
        found.add((title.strip(), frozenset(acl.strip() for acl in acls)))
    return found


def test_kafka_acls_and_zkcoord_acls_read_each_other(zk, zk_connect, capsys):
    store = AclStore(zk, Authorizer())
    store.start()  # before Kafka writes: what follows reaches it through the change notifications
    try:
        kafka_acls(
            zk_connect,
            *("--add", "--allow-principal", "User:alice", "--operation", "Read"),
            *("--group", "payments", "--topic", "orders", "--topic", "secret-1"),
        )
        kafka_acls(
            zk_connect,
            *("--add", "--deny-principal", "User:alice", "--operation", "Read"),
            *("--topic", "secret-", "--resource-pattern-type", "prefixed"),
        )

        def alice(operation, resource_type, name):
            return store.authorizer.authorize("User:alice", "10.1.2.3", operation, resource_type, name)

        wait_until(lambda: not alice("Read", "Topic", "secret-1"), what="kafka-acls' prefixed Deny to reach the store")
        assert alice("Read", "Group", "payments")
        assert alice("Read", "Topic", "orders") and alice("Describe", "Topic", "orders")
        assert not alice("Delete", "Group", "payments")
        assert not store.authorizer.authorize("User:bob", "10.1.2.3", "Read", "Group", "payments")
    finally:
        store.stop()

    assert cli.main(["acls", "--zookeeper", zk_connect, "--add", "--allow-principal", "User:bob", "--operation",
                     "Describe", "--group", "team-", "--resource-pattern-type", "prefixed"]) == 0  # fmt: skip
    assert cli.main(["acls", "--zookeeper", zk_connect, "--add", "--deny-principal", "User:carol", "--deny-host",
                     "10.0.0.7", "--operation", "Delete", "--group", "payments"]) == 0  # fmt: skip
    capsys.readouterr()
    assert cli.main(["acls", "--zookeeper", zk_connect, "--list"]) == 0
    ours = capsys.readouterr().out
    theirs = kafka_acls(zk_connect, "--list")
    assert blocks(theirs) == blocks(ours)
    assert (
        "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=team-, patternType=PREFIXED)`:",
        frozenset({"(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)"}),
    ) in blocks(theirs)
    assert "(principal=User:carol, host=10.0.0.7, operation=DELETE, permissionType=DENY)" in theirs
