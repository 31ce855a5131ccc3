"""Stop ZooKeeper commits: the log is the only offset store; the coordinator no longer mirrors.

Up moves the group LOG_PRIMARY → LOG_ONLY once every live member follows LOG_PRIMARY. Down moves it back
and raises every ZooKeeper offset to the log's, so ZooKeeper is a complete copy again before anyone
could read it.
"""

from zkcoord.migration.phases import Phase, members_behind

PHASE = Phase.LOG_ONLY
DOWN = (  # what undoing the step does (the first docstring line says what it does)
    "ZooKeeper commits resume: the coordinator mirrors commits again, and ZooKeeper is raised to"
    " the log's offsets."
)


def check(ctx, when):
    if when == "before_up":
        return members_behind(ctx.facts(stores=False))
    if when == "after_up":
        return ctx.phase_is(Phase.LOG_ONLY)
    if when == "after_down":
        return ctx.phase_is(Phase.LOG_PRIMARY)
    return []


def up(ctx):
    ctx.set_phase(Phase.LOG_ONLY)


def down(ctx):
    ctx.set_phase(Phase.LOG_PRIMARY)
    ctx.raise_zk_to_log()
