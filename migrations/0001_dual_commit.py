"""Dual commit: members write the log, then ZooKeeper; everyone reads the larger of the two.

Up moves the group ZK_ONLY → DUAL_WRITE (0.8.2's ``offsets.storage=kafka`` + ``dual.commit.enabled=true``).
Down moves it back to ZK_ONLY after raising every ZooKeeper offset to the log's, so ZooKeeper-only readers
lose nothing; it is refused while coordinator (new-client) members are live, since ZK_ONLY admits none.
"""

from zkcoord.migration.phases import Phase, coordinator_members_present, store_problems

PHASE = Phase.DUAL_WRITE
DOWN = (  # what undoing the step does (the first docstring line says what it does)
    "Back to ZooKeeper only: ZooKeeper's offsets are raised to the log's, then members commit to"
    " and read ZooKeeper alone."
)


def check(ctx, when):
    if when == "before_up":
        ctx.log_offsets()  # the coordinator must answer before members are told to commit to it
        return []
    if when == "after_up":
        return ctx.phase_is(Phase.DUAL_WRITE)
    facts = ctx.facts()
    if when == "before_down":
        return coordinator_members_present(
            facts, "ZooKeeper-only readers would not see their commits: move them back to the legacy consumer first"
        )
    return store_problems(Phase.ZK_ONLY, facts, "the log moved on while going down; run the command again")


def up(ctx):
    ctx.set_phase(Phase.DUAL_WRITE)


def down(ctx):
    ctx.raise_zk_to_log()  # before: a member that switches at once must find ZooKeeper complete
    ctx.set_phase(Phase.ZK_ONLY)
    ctx.raise_zk_to_log()  # after: commits that reached only the log while members switched
