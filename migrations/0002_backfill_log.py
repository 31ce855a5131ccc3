"""Backfill the log from ZooKeeper: copy each ZooKeeper offset the log lacks or holds an older one of.

Stays in DUAL_WRITE. Never lowers a log offset (the coordinator applies these commits only where its
offset is smaller) unless ``--allow-rewind``, which copies ZooKeeper's offsets over the log's. Down does
nothing: extra log offsets are harmless while readers take the larger of both stores.
"""

from zkcoord.migration.phases import Phase, coordinator_members_present, members_behind, store_problems

PHASE = Phase.DUAL_WRITE
DOWN = (  # what undoing the step does (the first docstring line says what it does)
    "Backfill kept: nothing to undo, the log keeps the copied offsets while readers take the larger"
    " of both stores."
)


def check(ctx, when):
    if when == "before_up":
        if ctx.mixed() and not ctx.allow_rewind:
            # A mixed group's coordinator takes commits without a generation (its 0.8.2 members make them).
            return ctx.phase_is(Phase.DUAL_WRITE)
        return ctx.phase_is(Phase.DUAL_WRITE) + coordinator_members_present(
            ctx.facts(stores=False),
            "a backfill commits as the group's admin, which the coordinator accepts only while the group has "
            "no members (or is a mixed group, without --allow-rewind): run the backfill before moving members "
            "to the new client, or stop them for it",
        )
    if when == "after_up":
        facts = ctx.facts()
        hint = "a live member may still commit to ZooKeeper only: " + ("; ".join(members_behind(facts)) or "none")
        return store_problems(Phase.LOG_PRIMARY, facts, f"run the backfill again ({hint})")
    return []


def up(ctx):
    zk, log = ctx.zk_offsets(), ctx.log_offsets()
    if ctx.allow_rewind:
        todo = {p: o for p, o in zk.items() if log.get(p) != o}
    else:
        todo = {p: o for p, o in zk.items() if p not in log or log[p] < o}
    rewinds = sum(1 for p, o in todo.items() if p in log and log[p] > o)
    ctx.say(
        f"group {ctx.group}: backfilling {len(todo)} of {len(zk)} partition(s) into the log"
        + (f", rewinding {rewinds}" if rewinds else "")
    )
    errors = ctx.commit_to_log(todo, if_greater=not ctx.allow_rewind)
    if errors:
        shown = ", ".join(f"{t}-{p}: error {code}" for (t, p), code in sorted(errors.items())[:3])
        ctx.say(f"group {ctx.group}: {len(errors)} partition(s) were not accepted: {shown}")


def down(ctx):
    pass
