"""``zkcoord migrate`` as an operator runs it, against one coordinator node process on a test chroot."""

import contextlib
from collections.abc import Iterator

from cluster_support import Cluster
from legacy_support import prepare_cluster

from zkcoord.cli import main
from zkcoord.migration import store
from zkcoord.migration.phases import MigrationState
from zkcoord.zk import layout

NODE_OVERRIDES = {
    "offsets.topic.num.partitions": 2,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 10,
    "zookeeper.session.timeout.ms": 4000,
}


@contextlib.contextmanager
def one_node(zk, zk_connect: str, tmp_path, topics: dict[str, int]) -> Iterator[Cluster]:
    """``topics`` in the 0.8 layout and one coordinator node that leads every offsets partition."""
    prepare_cluster(zk, topics)
    with Cluster(zk_connect, tmp_path / "log", tmp_path, NODE_OVERRIDES) as nodes:
        nodes.start([1])
        nodes.wait_balanced(zk)
        yield nodes


def confirmed(args: tuple[str, ...]) -> list[str]:
    """``args`` of ``migrate up``/``down`` with ``--yes``: a test has no terminal to confirm several steps on."""
    return [*args, "--yes"] if args and args[0] in ("up", "down") else list(args)


def run_migrate(capsys, zk_connect: str, *args: str) -> tuple[int, str, str]:
    """``zkcoord migrate ARGS --zookeeper zk_connect`` in process (``up``/``down`` confirmed with ``--yes``): exit
    code, stdout, stderr."""
    code = main(["migrate", *confirmed(args), "--zookeeper", zk_connect])
    out, err = capsys.readouterr()
    return code, out, err


def state_of(zk, group: str = "g") -> MigrationState | None:
    return store.read_state(zk, layout.DEFAULT_ROOT, group)[0]
