"""Copy to Kafka: the group's offsets go from zkcoord's log into a Kafka cluster's own group coordinator.

The way out for a team that ends on its own brokers (Kafka 4 has no ZooKeeper). Opt-in: run only by
``migrate up --to 0005_copy_to_kafka --target-bootstrap-server HOST:PORT``. The group stays LOG_ONLY in
zkcoord; the step changes no phase, it copies, and ``applied`` records that it did. Up writes each log offset
the Kafka group lacks or holds a smaller one of, as simple commits (what kafka-consumer-groups --reset-offsets
sends), after recording the cluster's id in the group's state. Down, only against that cluster, copies back
into the log what was committed on Kafka meanwhile (where Kafka is ahead), leaves Kafka's offsets in place
and clears the record. Both refuse while either group has members, and never lower an offset on either
side unless ``--allow-rewind``.
"""

from zkcoord.errors import error_name
from zkcoord.migration.kafka_copy import (
    KAFKA,
    ZKCOORD,
    ahead_reasons,
    busy_group_reasons,
    live_members_reasons,
    other_cluster_reasons,
    plan_copy,
)
from zkcoord.migration.phases import KafkaCopy, MigrationError, Phase

PHASE = Phase.LOG_ONLY
DOWN = (  # what undoing the step does (the first docstring line says what it does)
    "Copy back from Kafka: offsets committed on the Kafka cluster meanwhile go into zkcoord's log;"
    " the copy's record is cleared."
)
OPT_IN = True

IDLE_ON_ZKCOORD = "a member's commit after the copy would reach zkcoord only: stop the group's consumers first"
UP_AHEAD_HINT = (
    "the Kafka group has newer commits than zkcoord (it was used on Kafka before?): reset them there, or pass "
    "--allow-rewind to copy zkcoord's offsets over them"
)
DOWN_AHEAD_HINT = (
    "zkcoord's log moved on after the copy, or the Kafka group's offsets were reset back: pass --allow-rewind "
    "to copy Kafka's offsets over zkcoord's"
)


def check(ctx, when):
    kafka = ctx.kafka()
    log, copied = ctx.log_offsets(), kafka.offsets(ctx.group)
    if when == "before_up":
        plan = plan_copy(log, copied, ctx.allow_rewind)
        return (
            ctx.phase_is(Phase.LOG_ONLY)
            + other_cluster_reasons(ctx.state.kafka_copy, _cluster(kafka))
            + _idle(ctx, kafka)
            + ahead_reasons(plan, log, copied, (ZKCOORD, KAFKA), UP_AHEAD_HINT)
        )
    if when == "before_down":
        plan = plan_copy(copied, log, ctx.allow_rewind)
        return (
            other_cluster_reasons(ctx.state.kafka_copy, _cluster(kafka))
            + _idle(ctx, kafka)
            + ahead_reasons(plan, copied, log, (KAFKA, ZKCOORD), DOWN_AHEAD_HINT)
        )
    source, destination = (log, copied) if when == "after_up" else (copied, log)
    left = plan_copy(source, destination, ctx.allow_rewind).writes
    if not left:
        return []
    shown = ", ".join(f"{t}-{p}" for t, p in list(left)[:3])
    return [f"{len(left)} partition(s) not yet copied ({shown}); run the command again"]


def _cluster(kafka):
    return KafkaCopy(kafka.cluster_id(), kafka.bootstrap)


def _same_cluster(ctx, kafka):
    """The target's identity, once checked against the record: a step resumed after a stop skips its pre-check."""
    cluster = _cluster(kafka)
    reasons = other_cluster_reasons(ctx.state.kafka_copy, cluster)
    if reasons:
        raise MigrationError(f"group {ctx.group}: {reasons[0]}")
    return cluster


def _idle(ctx, kafka):
    """Both groups must be without members: a simple commit goes only to a group without members, on either side."""
    facts = ctx.facts(stores=False)
    described = kafka.describe_group(ctx.group)
    return live_members_reasons(facts, IDLE_ON_ZKCOORD) + busy_group_reasons(
        ctx.group, kafka.bootstrap, described.state, described.members
    )


def up(ctx):
    kafka = ctx.kafka()
    cluster = _same_cluster(ctx, kafka)
    if ctx.state.kafka_copy is None:  # before the first commit, so that a down knows where to copy back from
        ctx.record_kafka_copy(cluster)
    log, copied = ctx.log_offsets(), kafka.offsets(ctx.group)
    plan = plan_copy(log, copied, ctx.allow_rewind)
    ctx.say(
        f"group {ctx.group}: copying {len(plan.writes)} of {len(log)} partition(s) to Kafka at {kafka.bootstrap}"
        + (f", rewinding {len(plan.rewinds)}" if plan.rewinds else "")
    )
    refused = kafka.commit(ctx.group, plan.writes)
    hint = "create a topic or partition Kafka does not know there first; stop members that joined on Kafka meanwhile"
    _raise_for(ctx.group, refused, f"Kafka at {kafka.bootstrap}", hint)


def down(ctx):
    kafka = ctx.kafka()
    _same_cluster(ctx, kafka)
    log, copied = ctx.log_offsets(), kafka.offsets(ctx.group)
    plan = plan_copy(copied, log, ctx.allow_rewind)
    ctx.say(
        f"group {ctx.group}: copying {len(plan.writes)} partition(s) committed on Kafka back into zkcoord's log"
        + (f", rewinding {len(plan.rewinds)}" if plan.rewinds else "")
    )
    refused = ctx.commit_to_log(plan.writes, if_greater=not ctx.allow_rewind)
    _raise_for(ctx.group, {p: error_name(code) for p, code in refused.items()}, "zkcoord's coordinator", "")
    ctx.record_kafka_copy(None)


def _raise_for(group, refused, where, hint):
    if refused:
        shown = ", ".join(f"{t}-{p}: {error}" for (t, p), error in sorted(refused.items())[:3])
        raise MigrationError(
            f"group {group}: {len(refused)} partition(s) were not accepted by {where} ({shown}); "
            + (f"{hint}; " if hint else "")
            + "the step stays under way: run the command again"
        )
