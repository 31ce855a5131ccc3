"""SCRAM credentials in ZooKeeper (``zkcoord.zk.users``) and ``zkcoord users``, on a real ZooKeeper."""

import json
import logging

import pytest

from zkcoord import cli
from zkcoord.auth.scram import make_credential
from zkcoord.testing.zookeeper import wait_until
from zkcoord.zk import layout, users

USER = "alice smith@example.com"
ZNODE = "/config/users/alice%20smith%40example.com"


def changes(zk) -> list[dict]:
    children = sorted(zk.get_children("/config/changes")) if zk.exists("/config/changes") else []
    return [json.loads(zk.get(f"/config/changes/{child}")[0]) for child in children]


def test_a_credential_is_stored_in_kafkas_layout_beside_other_configs(zk):
    zk.create(ZNODE, b'{"version":1,"config":{"producer_byte_rate":"1024"}}', makepath=True)
    credential = make_credential("SCRAM-SHA-256", "secret", 8192)

    users.set_scram_credential(zk, USER, "SCRAM-SHA-256", credential)

    node = json.loads(zk.get(ZNODE)[0])
    assert node == {"version": 1, "config": {"producer_byte_rate": "1024", "SCRAM-SHA-256": credential.format()}}
    assert changes(zk) == [{"version": 2, "entity_path": "users/alice%20smith%40example.com"}]
    assert users.scram_credential(zk, USER, "SCRAM-SHA-256") == credential
    assert users.scram_credential(zk, USER, "SCRAM-SHA-512") is None
    assert users.scram_credential(zk, "nobody", "SCRAM-SHA-256") is None


def test_deleting_the_last_credential_removes_the_znode_unless_it_has_children(zk):
    for user in ("bob", "carol"):
        users.set_scram_credential(zk, user, "SCRAM-SHA-512", make_credential("SCRAM-SHA-512", "secret"))
    zk.create("/config/users/carol/clients/app", b'{"version":1,"config":{}}', makepath=True)

    assert users.delete_scram_credential(zk, "bob", "SCRAM-SHA-512")
    assert users.delete_scram_credential(zk, "carol", "SCRAM-SHA-512")
    assert not users.delete_scram_credential(zk, "carol", "SCRAM-SHA-512")

    assert zk.exists("/config/users/bob") is None
    assert json.loads(zk.get("/config/users/carol")[0]) == {"version": 1, "config": {}}
    assert [change["entity_path"] for change in changes(zk)] == ["users/bob", "users/carol"] * 2


@pytest.mark.parametrize(
    "data",
    [b"not json", b'{"version":1,"config":{"SCRAM-SHA-256":7}}', b'{"version":1,"config":{"SCRAM-SHA-256":"x=1"}}'],
)
def test_a_foreign_or_corrupt_znode_reads_as_no_credential_and_is_logged(zk, caplog, data):
    zk.create(ZNODE, data, makepath=True)
    with caplog.at_level(logging.WARNING, logger="zkcoord.zk.users"):
        assert users.scram_credential(zk, USER, "SCRAM-SHA-256") is None
    assert ZNODE in caplog.text


def test_describe_lists_users_with_credentials_and_their_iterations(zk):
    users.set_scram_credential(zk, USER, "SCRAM-SHA-512", make_credential("SCRAM-SHA-512", "s", 4096))
    users.set_scram_credential(zk, USER, "SCRAM-SHA-256", make_credential("SCRAM-SHA-256", "s", 8192))
    zk.create(layout.user_config_path("quota-only"), b'{"version":1,"config":{"consumer_byte_rate":"1"}}')

    assert users.describe_users(zk) == {USER: {"SCRAM-SHA-256": 8192, "SCRAM-SHA-512": 4096}}
    assert users.describe_users(zk, "quota-only") == {"quota-only": {}}


def run(capsys, zk_connect, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["users", "--zookeeper", zk_connect, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_cli_adds_describes_and_deletes_as_kafka_configs(zk, zk_connect, capsys):
    configs = "SCRAM-SHA-256=[iterations=8192,password=a,b=c],SCRAM-SHA-512=[password=alice-secret]"
    code, out, _ = run(
        capsys, zk_connect, "--alter", "--add-config", configs, "--entity-type", "users", "--entity-name", "alice"
    )
    assert (code, out) == (0, "Completed updating config for entity: user-principal 'alice'.\n")
    assert users.scram_credential(zk, "alice", "SCRAM-SHA-256") == make_credential(
        "SCRAM-SHA-256", "a,b=c", 8192, users.scram_credential(zk, "alice", "SCRAM-SHA-256").salt
    )

    code, out, _ = run(capsys, zk_connect, "--describe", "--entity-name", "alice")
    described = "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096"
    assert out == f"SCRAM credential configs for user-principal 'alice' are {described}\n"

    code, out, _ = run(capsys, zk_connect, "--alter", "--delete-config", "SCRAM-SHA-512", "--entity-name", "alice")
    assert code == 0
    code, out, _ = run(capsys, zk_connect, "--describe", "--json")
    assert (code, json.loads(out)) == (0, {"alice": {"SCRAM-SHA-256": 8192}})


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--alter", "--add-config", "SCRAM-SHA-256=[password=x]"], "--alter needs --entity-name"),
        (["--alter", "--entity-name", "a"], "needs --add-config or --delete-config"),
        (["--alter", "--add-config", "SCRAM-SHA-1=[password=x]", "--entity-name", "a"], "not a SCRAM mechanism"),
        (["--alter", "--add-config", "producer_byte_rate=1", "--entity-name", "a"], "not a SCRAM mechanism"),
        (["--alter", "--add-config", "SCRAM-SHA-256=[pass=x]", "--entity-name", "a"], "invalid credential property"),
        (["--alter", "--add-config", "SCRAM-SHA-256=[iterations=1000,password=x]", "--entity-name", "a"], "less than"),
        (["--alter", "--add-config", "SCRAM-SHA-256=[password=x", "--entity-name", "a"], "cannot read"),
        (["--alter", "--delete-config", "SCRAM-SHA-256", "--entity-name", "a"], "Invalid config"),
        (["--describe", "--entity-type", "topics"], "manages only 'users'"),
    ],
)
def test_bad_input_is_a_clear_error_and_exit_2(zk, zk_connect, capsys, argv, message):
    code, _, err = run(capsys, zk_connect, *argv)
    assert code == 2
    assert message in err
    assert zk.exists("/config") is None


def test_watched_credentials_follow_changes_without_a_read_per_login(zk):
    credentials = users.WatchedCredentials(zk)
    assert credentials("nobody", "SCRAM-SHA-256") is None  # no znode: nothing kept, nothing watched
    first = make_credential("SCRAM-SHA-256", "one")
    users.set_scram_credential(zk, "dora", "SCRAM-SHA-256", first)
    assert credentials("dora", "SCRAM-SHA-256") == first
    second = make_credential("SCRAM-SHA-256", "two")
    users.set_scram_credential(zk, "dora", "SCRAM-SHA-256", second)
    wait_until(lambda: credentials("dora", "SCRAM-SHA-256") == second, what="the changed credential")
    zk.set(layout.user_config_path("dora"), b"{not json")
    wait_until(lambda: credentials("dora", "SCRAM-SHA-256") is None, what="an unreadable credential to count as none")
    zk.delete(layout.user_config_path("dora"))
    wait_until(lambda: credentials("dora", "SCRAM-SHA-256") is None, what="the deleted user")
    users.set_scram_credential(zk, "dora", "SCRAM-SHA-256", first)
    assert credentials("dora", "SCRAM-SHA-256") == first  # watched again from its next login
