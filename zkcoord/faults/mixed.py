"""The fault campaign's mixed group: zkcoord's 0.8.2 members and coordinator members in one DUAL_WRITE group.

Before its members start, the operator's own ``zkcoord migrate up --to 0001_dual_commit`` moves the group into
DUAL_WRITE, which sets up its bridge: the node leading the group's offsets partition then registers each
coordinator member as a 0.8.2 consumer and claims owner znodes for it (docs/mixed-groups.md). The group stays there
for the whole run; the nemesis hits its members as it hits the other groups' (its legacy members have a ZooKeeper
link of their own), and the nodes that bridge it as every node.
"""

import subprocess
import sys

from zkcoord.compare.scenarios import CLIENT_MEMBER, LEGACY_MEMBER
from zkcoord.errors import ZkcoordError

MIXED = "mixed"  # the group kind, beside the member kinds that name the other groups
DUAL_COMMIT = "0001_dual_commit"  # the step that moves a group into DUAL_WRITE
STRATEGY = "range"  # 0.8.2's assignment, the coordinator members' strategy too
MIGRATE_TIMEOUT_S = 60.0


class BridgeNotSetUp(ZkcoordError):
    """``zkcoord migrate up`` did not move the mixed group into DUAL_WRITE."""


def mixed_member_names(count: int) -> dict[str, list[str]]:
    """``count`` members of each kind, by member kind: ``mixed-legacy-N`` and ``mixed-client-N``."""
    return {kind: [f"{MIXED}-{kind}-{n}" for n in range(count)] for kind in (LEGACY_MEMBER, CLIENT_MEMBER)}


def bridge_group(zookeeper_connect: str, group: str) -> None:
    """Move ``group`` (no members yet) into DUAL_WRITE with the operator's command, so its bridge exists before
    any member joins; :class:`BridgeNotSetUp` with the command's last words when it fails."""
    command = [sys.executable, "-m", "zkcoord.cli", "migrate", "up", "--group", group, "--to", DUAL_COMMIT]
    command += ["--allow-new-group"]  # nothing of the group exists yet, on purpose
    command += ["--partition-assignment-strategy", STRATEGY, "--zookeeper", zookeeper_connect, "--timeout", "10000"]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=MIGRATE_TIMEOUT_S, start_new_session=True
        )
    except subprocess.TimeoutExpired:
        raise BridgeNotSetUp(f"migrate up of {group} took over {MIGRATE_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()[-1:]
        raise BridgeNotSetUp(f"migrate up of {group} exited {done.returncode}: {' '.join(said)}")
