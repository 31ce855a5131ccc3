"""``zkcoord groups ...`` output against golden files in tests/data/golden/admin/.

Each golden file is the command's stdout, then ``--- stderr ---`` and its stderr when there is any, then
``--- exit N ---``. Only what must vary between runs is replaced, keeping every value's width so that the
column layout is checked as printed:

- a member id's UUID (``a-<uuid4>``) → ``xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``;
- the node's port (five digits on Linux and macOS ephemeral ranges) → ``PPPPP``.

``ZKCOORD_UPDATE_GOLDEN=1 pytest tests/integration/test_admin_cli.py`` rewrites the files from the current output.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from test_admin import (
    LOG_END,
    AdminCluster,
    active_legacy_group,
    commit,
    form_group,
    legacy_group,
    running_cluster,
    stable_group_with_offsets,
    zk_offsets,
)

from zkcoord import cli

GOLDEN = Path(__file__).parents[1] / "data" / "golden" / "admin"
SOURCE = f"synthetic:rate=0,initial={LOG_END}"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture(scope="module")
def node(zk_server, tmp_path_factory):
    with running_cluster(zk_server, tmp_path_factory.mktemp("admin-cli")) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def no_default_zookeeper(monkeypatch):
    monkeypatch.delenv("ZKCOORD_ZK_CONNECT", raising=False)


def groups(capsys, node: AdminCluster, *argv: str, source: str | None = SOURCE) -> tuple[int, str, str]:
    """Run ``zkcoord groups`` in-process with this node and its ZooKeeper; (exit code, stdout, stderr)."""
    options = ["--coordinator-server", node.bootstrap, "--zookeeper", node.connect]
    if source:
        options += ["--source", source]
    code = cli.main(["groups", *options, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def normalized(text: str, port: int) -> str:
    assert len(str(port)) == 5, f"port {port}: the golden files assume five digits"
    return re.sub(rf"\b{port}\b", "PPPPP", UUID.sub("xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", text))


def check_golden(name: str, result: tuple[int, str, str], node: AdminCluster) -> None:
    code, out, err = result
    text = normalized(out, node.address[1])
    if err:
        text += "--- stderr ---\n" + normalized(err, node.address[1])
    text += f"--- exit {code} ---\n"
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("ZKCOORD_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{path.name} differs; output was:\n{text}"


# ---- list and describe ------------------------------------------------------------------------------------------


def test_list_and_describe_all_groups(capsys, zk_server, tmp_path):
    """A cluster of its own, so that the listing holds only these groups."""
    with running_cluster(zk_server, tmp_path) as fresh:
        form_group(fresh.address, "alpha", {"a1": ("orders",), "a2": ("orders",)}, {"a1": {"orders": [0, 1, 2]}})
        commit(fresh.address, "beta", {("orders", 0): 40})
        legacy_group(fresh.zk, "beta", offsets={("orders", 0): 41})
        active_legacy_group(fresh.zk, "gamma")
        check_golden("list", groups(capsys, fresh, "list"), fresh)
        check_golden("list-state", groups(capsys, fresh, "list", "--state"), fresh)
        check_golden("list-state-filter", groups(capsys, fresh, "list", "--state", "stable"), fresh)
        check_golden("list-json", groups(capsys, fresh, "--json", "list"), fresh)
        check_golden("describe-all-groups", groups(capsys, fresh, "describe", "--all-groups"), fresh)
        check_golden("describe-all-groups-state", groups(capsys, fresh, "describe", "--all-groups", "--state"), fresh)
        # Only --zookeeper: the node is discovered under the root and both kinds are listed.
        code = cli.main(["groups", "--zookeeper", fresh.connect, "list"])
        rows = [line.split()[:2] for line in capsys.readouterr().out.splitlines()]
        assert (code, rows) == (
            0,
            [
                ["GROUP", "KIND"],
                ["alpha", "coordinator"],
                ["beta", "coordinator"],
                ["beta", "legacy"],
                ["gamma", "legacy"],
            ],
        )


def test_describe_coordinator_group(capsys, node):
    stable_group_with_offsets(node.address, "shop")
    check_golden("describe-offsets", groups(capsys, node, "describe", "--group", "shop"), node)
    check_golden("describe-offsets-no-source", groups(capsys, node, "describe", "--group", "shop", source=None), node)
    check_golden("describe-members", groups(capsys, node, "describe", "--group", "shop", "--members"), node)
    check_golden(
        "describe-members-verbose", groups(capsys, node, "describe", "--group", "shop", "--members", "--verbose"), node
    )
    check_golden("describe-state", groups(capsys, node, "describe", "--group", "shop", "--state"), node)
    result = groups(capsys, node, "describe", "--group", "shop", "--json")
    json.loads(result[1])
    check_golden("describe-offsets-json", result, node)
    check_golden(
        "describe-members-json", groups(capsys, node, "describe", "--group", "shop", "--members", "--json"), node
    )
    check_golden("describe-state-json", groups(capsys, node, "describe", "--group", "shop", "--state", "--json"), node)


def test_describe_legacy_group(capsys, node):
    active_legacy_group(node.zk, "lshop")
    check_golden("legacy-describe-offsets", groups(capsys, node, "describe", "--group", "lshop"), node)
    check_golden("legacy-describe-members", groups(capsys, node, "describe", "--group", "lshop", "--members"), node)
    check_golden(
        "legacy-describe-members-verbose",
        groups(capsys, node, "describe", "--group", "lshop", "--members", "--verbose"),
        node,
    )
    check_golden("legacy-describe-state", groups(capsys, node, "describe", "--group", "lshop", "--state"), node)
    check_golden("legacy-describe-offsets-json", groups(capsys, node, "describe", "--group", "lshop", "--json"), node)


def test_describe_a_group_in_both_places(capsys, node):
    commit(node.address, "dual", {("orders", 0): 4, ("orders", 1): 5})
    legacy_group(node.zk, "dual", offsets={("orders", 0): 9})
    check_golden("describe-both-places", groups(capsys, node, "describe", "--group", "dual"), node)
    check_golden("describe-both-places-state", groups(capsys, node, "describe", "--group", "dual", "--state"), node)


# ---- reset-offsets --------------------------------------------------------------------------------------------


def test_reset_offsets(capsys, node, tmp_path):
    commit(node.address, "rst", {("orders", 0): 10, ("orders", 1): 95, ("audit", 0): 3})
    reset = ("reset-offsets", "--group", "rst")
    check_golden(
        "reset-earliest-dry-run", groups(capsys, node, *reset, "--topic", "orders", "--to-earliest", "--dry-run"), node
    )
    check_golden("reset-latest-dry-run", groups(capsys, node, *reset, "--all-topics", "--to-latest", "--dry-run"), node)
    check_golden("reset-default-dry-run", groups(capsys, node, *reset, "--all-topics", "--to-offset", "7"), node)
    check_golden(
        "reset-to-offset-execute",
        groups(capsys, node, *reset, "--topic", "orders:0,1", "--to-offset", "250", "--execute"),
        node,
    )
    check_golden(
        "reset-shift-by-execute", groups(capsys, node, *reset, "--all-topics", "--shift-by", "-60", "--execute"), node
    )
    plan = tmp_path / "plan.csv"
    plan.write_text("orders,0,42\naudit,0,1000\n\norders,2,5\n", encoding="utf-8")
    check_golden("reset-from-file-execute", groups(capsys, node, *reset, "--from-file", str(plan), "--execute"), node)
    check_golden("reset-export", groups(capsys, node, *reset, "--all-topics", "--shift-by", "1", "--export"), node)
    check_golden("reset-result", groups(capsys, node, "describe", "--group", "rst"), node)
    check_golden(
        "reset-json", groups(capsys, node, "--json", *reset, "--topic", "audit", "--to-earliest", "--dry-run"), node
    )


def test_reset_legacy_offsets(capsys, node):
    legacy_group(node.zk, "lrst", offsets={("orders", 0): 50, ("audit", 1): 2})
    result = groups(capsys, node, "reset-offsets", "--group", "lrst", "--all-topics", "--shift-by", "60", "--execute")
    check_golden("legacy-reset-shift-by-execute", result, node)
    assert zk_offsets(node.zk, "lrst") == {("orders", 0): LOG_END, ("audit", 1): 62}


# ---- delete, remove-members, delete-offsets ---------------------------------------------------------------------


def test_delete_groups(capsys, node):
    commit(node.address, "gone", {("orders", 0): 1})
    legacy_group(node.zk, "lgone", offsets={("orders", 0): 1})
    check_golden("delete", groups(capsys, node, "delete", "--group", "gone", "--group", "lgone"), node)
    stable_group_with_offsets(node.address, "stays")
    active_legacy_group(node.zk, "lstays")
    commit(node.address, "gone2", {("orders", 0): 1})
    result = groups(capsys, node, "delete", "--group", "stays", "--group", "gone2", "--group", "lstays")
    check_golden("delete-partly-refused", result, node)
    check_golden("delete-json", groups(capsys, node, "--json", "delete", "--group", "stays"), node)


def test_remove_members(capsys, node):
    form_group(
        node.address,
        "statics",
        {"s1": ("orders",), "s2": ("orders",), "s3": ("orders",)},
        {"s1": {"orders": [0]}, "s2": {"orders": [1]}, "s3": {"orders": [2]}},
    )
    check_golden(
        "remove-members", groups(capsys, node, "remove-members", "--group", "statics", "--instance-ids", "s1,s2"), node
    )
    check_golden(
        "remove-members-rebalancing", groups(capsys, node, "describe", "--group", "statics", "--members"), node
    )
    check_golden(
        "remove-members-unknown",
        groups(capsys, node, "remove-members", "--group", "statics", "--instance-ids", "s1"),
        node,
    )


def test_delete_offsets(capsys, node):
    stable_group_with_offsets(node.address, "trim")
    result = groups(capsys, node, "delete-offsets", "--group", "trim", "--topic", "audit", "--topic", "orders:1")
    check_golden("delete-offsets-subscribed", result, node)
    commit(node.address, "trim-empty", {("orders", 0): 1, ("audit", 0): 2})
    check_golden(
        "delete-offsets", groups(capsys, node, "delete-offsets", "--group", "trim-empty", "--topic", "audit"), node
    )
    active_legacy_group(node.zk, "ltrim")
    check_golden(
        "legacy-delete-offsets", groups(capsys, node, "delete-offsets", "--group", "ltrim", "--topic", "audit"), node
    )
    assert zk_offsets(node.zk, "ltrim") == {("orders", 0): 7, ("orders", 1): 8}


# ---- errors -------------------------------------------------------------------------------------------------------


def test_errors(capsys, node):
    stable_group_with_offsets(node.address, "active")
    active_legacy_group(node.zk, "lactive")
    check_golden("error-unknown-group", groups(capsys, node, "describe", "--group", "nope"), node)
    check_golden(
        "error-reset-active",
        groups(capsys, node, "reset-offsets", "--group", "active", "--all-topics", "--to-earliest", "--execute"),
        node,
    )
    check_golden(
        "error-reset-active-legacy",
        groups(capsys, node, "reset-offsets", "--group", "lactive", "--topic", "orders", "--to-latest", "--execute"),
        node,
    )
    check_golden(
        "error-unknown-topic",
        groups(capsys, node, "reset-offsets", "--group", "new", "--topic", "nosuch", "--to-earliest", "--dry-run"),
        node,
    )
    check_golden(
        "error-delete-offsets-unknown-group",
        groups(capsys, node, "delete-offsets", "--group", "nope", "--topic", "orders"),
        node,
    )
    assert cli.main(["groups", "list"]) == 2
    assert "no cluster given" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:  # argparse: both a scope and a scenario are needed
        cli.main(["groups", "--zookeeper", node.connect, "reset-offsets", "--group", "g", "--all-topics"])
    assert usage.value.code == 2
