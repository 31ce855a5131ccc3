"""``zkcoord acls`` on a real ZooKeeper: kafka-acls' options, output and refusals."""

import pytest

from zkcoord import cli
from zkcoord.auth.acls import Acl, ResourcePattern
from zkcoord.zk.acls import list_acls, read_acls


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["acls", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_add_list_remove_as_kafka_acls(zk, zk_connect, capsys):
    code, out, _ = run(
        capsys,
        *("--authorizer-properties", f"zookeeper.connect={zk_connect}", "--add"),
        *("--allow-principal", "User:alice", "--operation", "read", "--operation", "Describe", "--group", "payments"),
    )
    assert code == 0
    assert out == (
        "Adding ACLs for resource `ResourcePattern(resourceType=GROUP, name=payments, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n\n"
    )
    code, _, _ = run(
        capsys,
        *("--zookeeper", zk_connect, "--add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.9"),
        *("--topic", "app-", "--resource-pattern-type", "prefixed"),
    )
    assert code == 0
    assert read_acls(zk, ResourcePattern("Topic", "app-", "PREFIXED"))[0] == {
        Acl("User:bob", "10.0.0.9", "All", "Deny")
    }

    code, out, _ = run(
        capsys, "--zookeeper", zk_connect, "--list", "--topic", "app-1", "--resource-pattern-type", "match"
    )
    assert out == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=app-, patternType=PREFIXED)`: \n"
        " \t(principal=User:bob, host=10.0.0.9, operation=ALL, permissionType=DENY) \n\n"
    )
    code, out, _ = run(capsys, "--zookeeper", zk_connect, "--list", "--principal", "User:alice")
    assert out.startswith(
        "ACLs for principal `User:alice`\nCurrent ACLs for resource `ResourcePattern(resourceType=GROUP"
    )
    assert "User:bob" not in out

    code, out, _ = run(
        capsys, "--zookeeper", zk_connect, "--remove", "--allow-principal", "User:alice", "--operation", "Read",
        "--group", "payments", "--force",
    )  # fmt: skip
    assert code == 0
    assert list_acls(zk) == {
        ResourcePattern("Group", "payments"): {Acl("User:alice", "*", "Describe", "Allow")},
        ResourcePattern("Topic", "app-", "PREFIXED"): {Acl("User:bob", "10.0.0.9", "All", "Deny")},
    }
    code, _, _ = run(
        capsys, "--zookeeper", zk_connect, "--remove", "--topic", "app-", "--resource-pattern-type", "any", "--force"
    )
    assert code == 0
    assert list(list_acls(zk)) == [ResourcePattern("Group", "payments")]


def test_consumer_role(zk, zk_connect, capsys):
    consumer = ["--consumer", "--allow-principal", "User:c", "--topic", "t", "--group", "g"]
    assert run(capsys, "--zookeeper", zk_connect, "--add", *consumer)[0] == 0
    assert list_acls(zk) == {
        ResourcePattern("Group", "g"): {Acl("User:c", "*", "Read", "Allow")},
        ResourcePattern("Topic", "t"): {Acl("User:c", "*", "Read", "Allow"), Acl("User:c", "*", "Describe", "Allow")},
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--add", "--allow-principal", "User:a", "--operation", "Raed", "--group", "g"], "unknown operation 'Raed'"),
        (["--add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g"], "GROUP only supports"),
        (["--add", "--allow-principal", "alice", "--group", "g"], "principalType:principalName"),
        (["--add", "--group", "g"], "--allow-principal, --deny-principal"),
        (["--add", "--consumer", "--allow-principal", "User:a", "--topic", "t"], "--topic and a --group"),
        (["--add", "--consumer", "--operation", "Read", "--topic", "t", "--group", "g"], "takes no --operation"),
        (["--add", "--allow-principal", "User:a"], "at least one resource"),
        (["--add", "--allow-principal", "User:a", "--group", "a/b"], "invalid resource name"),
        (["--add", "--allow-principal", "User:a", "--group", "g", "--resource-pattern-type", "match"], "not valid"),
    ],
)
def test_refusals_exit_2(zk_connect, capsys, argv, message):
    code, _, err = run(capsys, "--zookeeper", zk_connect, *argv)
    assert code == 2
    assert message in err
