"""Read from the log: members and the coordinator read the log alone; ZooKeeper is still kept up to date.

Up moves the group DUAL_WRITE → LOG_PRIMARY, ending a mixed group (the bridge goes in the same transaction). It
is refused while a mixed group has members of both kinds, while a live member may commit to ZooKeeper
only (a 0.8.2 JVM member, or a zkcoord member that has not seen the current phase) and while any
partition's ZooKeeper offset is ahead of the log's (run the backfill). The coordinator mirrors every log
commit into ZooKeeper, so down (back to DUAL_WRITE) is always safe.
"""

from zkcoord.migration.phases import Phase, both_kinds_present, members_behind, store_problems

PHASE = Phase.LOG_PRIMARY
DOWN = (  # what undoing the step does (the first docstring line says what it does)
    "Back to dual reads: members and the coordinator read the larger of ZooKeeper's and the log's"
    " offsets again."
)


def check(ctx, when):
    if when == "before_up":
        facts = ctx.facts()
        mixed = both_kinds_present(
            facts,
            "leaving DUAL_WRITE ends the mixed group, and its legacy members would claim the coordinator members' "
            "partitions: move the last legacy members to the new client (or stop them) first",
        )
        return mixed + members_behind(facts) + store_problems(Phase.LOG_PRIMARY, facts, "run 0002_backfill_log again")
    if when == "after_up":
        return ctx.phase_is(Phase.LOG_PRIMARY)
    if when == "after_down":
        return ctx.phase_is(Phase.DUAL_WRITE)
    return []


def up(ctx):
    ctx.set_phase(Phase.LOG_PRIMARY)


def down(ctx):
    ctx.set_phase(Phase.DUAL_WRITE)
