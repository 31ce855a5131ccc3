"""zkcoord's Authorizer against Kafka 3.9's own AclAuthorizer: the same random ACLs in ZooKeeper (written by
zkcoord's writer, so Kafka also reads zkcoord's format), thousands of requests, the same decisions. One JVM run
(tests/data/AclDecisions.java, run from source) of about 5 s."""

import random
import subprocess
from pathlib import Path

from zkcoord import peers
from zkcoord.auth.acls import (
    OPERATIONS,
    Acl,
    Authorizer,
    ResourcePattern,
    enum_name,
    kafka_host_address,
    parse_super_users,
)
from zkcoord.peers.jvm import java_command
from zkcoord.zk.acls import add_acls, read_all_acls

DRIVER = Path(__file__).parents[1] / "data" / "AclDecisions.java"
SUPER_USERS = "User:carol"
RESOURCE_TYPES = ("Topic", "Group", "Cluster", "TransactionalId")
ACL_PRINCIPALS = ("User:alice", "User:bob", "User:*", "Service:alice")
ACL_HOSTS = ("10.0.0.1", "*", "0:0:0:0:0:0:0:1")
REQUEST_PRINCIPALS = ("User:alice", "User:bob", "User:carol", "Service:alice", "Service:bob")
REQUEST_HOSTS = ("10.0.0.1", "10.0.0.2", "::1")


def short_name(rng: random.Random) -> str:
    return "".join(rng.choice("ab*") for _ in range(rng.randint(1, 3)))


def random_table(rng: random.Random) -> dict[ResourcePattern, set[Acl]]:
    table: dict[ResourcePattern, set[Acl]] = {}
    for _ in range(80):
        pattern = ResourcePattern(rng.choice(RESOURCE_TYPES), short_name(rng), rng.choice(["LITERAL", "PREFIXED"]))
        table.setdefault(pattern, set()).update(
            Acl(
                rng.choice(ACL_PRINCIPALS), rng.choice(ACL_HOSTS), rng.choice(OPERATIONS), rng.choice(["Allow", "Deny"])
            )
            for _ in range(rng.randint(1, 3))
        )
    return table


def random_requests(rng: random.Random) -> list[tuple[str, str, str, str, str]]:
    return [
        (
            rng.choice(REQUEST_PRINCIPALS),
            rng.choice(REQUEST_HOSTS),
            rng.choice(OPERATIONS),
            rng.choice(RESOURCE_TYPES),
            "" if rng.random() < 0.03 else short_name(rng),
        )
        for _ in range(3000)
    ]


def kafka_decisions(zk_connect: str, requests) -> list[tuple[bool, bool]]:
    lines = "".join(f"{p}\t{h}\t{enum_name(op)}\t{enum_name(kind)}\t{name}\n" for p, h, op, kind, name in requests)
    command = java_command(peers.BROKER, str(DRIVER), [zk_connect, SUPER_USERS])
    done = subprocess.run(command, input=lines, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return [(line[0] == "1", line[1] == "1") for line in done.stdout.splitlines()]


def test_decisions_equal_kafkas_acl_authorizer(zk, zk_connect):
    rng = random.Random(20261126)
    for pattern, acls in random_table(rng).items():
        add_acls(zk, pattern, acls)
    requests = random_requests(rng)
    strict = Authorizer(parse_super_users(SUPER_USERS), allow_everyone_if_no_acl_found=False)
    everyone = Authorizer(parse_super_users(SUPER_USERS), allow_everyone_if_no_acl_found=True)
    for pattern, acls in read_all_acls(zk).items():
        strict.set_acls(pattern, acls)
        everyone.set_acls(pattern, acls)

    ours = [
        (
            strict.authorize(p, kafka_host_address(h), op, kind, name),
            everyone.authorize(p, kafka_host_address(h), op, kind, name),
        )
        for p, h, op, kind, name in requests
    ]
    theirs = kafka_decisions(zk_connect, requests)

    assert len(theirs) == len(requests)
    differences = [(request, o, t) for request, o, t in zip(requests, ours, theirs, strict=True) if o != t]
    assert differences == []
    allowed = sum(strict_decision for strict_decision, _ in theirs)
    assert 300 < allowed < len(requests) - 300  # both outcomes are well represented
    assert any(not s and e for s, e in theirs)  # and allow.everyone.if.no.acl.found decides some
