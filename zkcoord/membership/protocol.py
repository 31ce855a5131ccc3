"""The classic group protocol's requests as a consumer member writes them, and the consumer protocol inside them.

Field sets of JoinGroup, SyncGroup, Heartbeat, LeaveGroup and a commit's member identity, built from the member's
configuration and generation; and the bytes the group protocol carries for consumers
(``zkcoord.wire.consumer_protocol``): the subscription each assignor joins with, the members' subscriptions the
leader reads, the assignments it sends and the one each member receives (Kafka's ConsumerCoordinator metadata(),
onLeaderElected() and onJoinComplete()). Keys keep their order: the frames must stay byte for byte the same.

Pure: imports only zkcoord.assign.consumer, zkcoord.membership.effects, zkcoord.model and
zkcoord.wire.consumer_protocol; must not import zkcoord.membership.member (it imports this module).
"""

import logging
from collections.abc import Collection, Mapping, Sequence

from zkcoord.assign.consumer import ConsumerAssignor, MemberSubscription
from zkcoord.membership.effects import MembershipConfig
from zkcoord.model import TopicPartition
from zkcoord.wire.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from zkcoord.wire.messages import JoinGroupResponseMember

log = logging.getLogger(__name__)

PROTOCOL_TYPE = "consumer"


# ---- requests ----------------------------------------------------------------------------------------------------


def join_group(config: MembershipConfig, member_id: str, protocols: list[dict]) -> dict:
    """JoinGroup's fields; ``protocols`` from :func:`join_protocols`."""
    return {
        "group_id": config.group_id,
        "session_timeout_ms": config.session_timeout_ms,
        "rebalance_timeout_ms": config.max_poll_interval_ms,
        "member_id": member_id,
        "group_instance_id": config.group_instance_id,
        "protocol_type": PROTOCOL_TYPE,
        "protocols": protocols,
    }


def member_identity(config: MembershipConfig, generation: int, member_id: str) -> dict:
    """Who the member is in ``generation``: what a Heartbeat sends and SyncGroup and a commit start with."""
    return {
        "group_id": config.group_id,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": config.group_instance_id,
    }


def sync_group(
    config: MembershipConfig, generation: int, member_id: str, protocol_name: str | None, assignments: list[dict]
) -> dict:
    """SyncGroup's fields; ``assignments`` are the leader's (:func:`leader_assignments`), empty for the others."""
    return {
        **member_identity(config, generation, member_id),
        "protocol_type": PROTOCOL_TYPE,
        "protocol_name": protocol_name,
        "assignments": assignments,
    }


def leave_group(config: MembershipConfig, member_id: str, group_instance_id: str | None) -> dict:
    """LeaveGroup's fields for this one member."""
    return {"group_id": config.group_id, "members": [{"member_id": member_id, "group_instance_id": group_instance_id}]}


def commit_identity(config: MembershipConfig, generation: int, member_id: str) -> dict:
    """Kafka commits with the member's generation when it has one, else as a simple (-1) commit."""
    if generation >= 0:
        return member_identity(config, generation, member_id)
    return {"group_id": config.group_id, "generation_id": -1, "member_id": "", "group_instance_id": None}


# ---- the consumer protocol inside them ---------------------------------------------------------------------------


def join_protocols(
    assignors: Sequence[ConsumerAssignor], topics: Collection[str], owned: Collection[TopicPartition]
) -> list[dict]:
    """JoinGroup's ``protocols``: each assignor's name and the subscription the member joins with under it."""
    topics = tuple(sorted(topics))
    owned = tuple(sorted(owned))
    return [
        {
            "name": assignor.name,
            "metadata": encode_subscription(Subscription(topics, assignor.subscription_user_data(topics), owned)),
        }
        for assignor in assignors
    ]


def member_subscriptions(group_id: str, members: Sequence[JoinGroupResponseMember]) -> list[MemberSubscription]:
    """The leader's reading of JoinGroup's ``members``, up to the first it cannot read."""
    subscriptions = []
    try:
        for member in members:
            subscription = decode_subscription(member.metadata)
            subscriptions.append(MemberSubscription(member.member_id, member.group_instance_id, subscription))
    except ConsumerProtocolError as error:
        # The members read so far are still assigned; the unreadable one and those after it get nothing.
        log.warning("group=%s leader cannot read a member's subscription: %s", group_id, error)
    return subscriptions


def leader_assignments(
    assignor: ConsumerAssignor,
    partition_counts: Mapping[str, int],
    members: Sequence[MemberSubscription],
    generation: int,
) -> list[dict]:
    """SyncGroup's ``assignments`` from the leader: ``assignor``'s assignment of every member, by member id."""
    assignments = assignor.assign(partition_counts, members, generation)
    return [
        {"member_id": member_id, "assignment": encode_assignment(assignment)}
        for member_id, assignment in sorted(assignments.items())
    ]


def received_assignment(data: bytes | None) -> Assignment:
    """The member's assignment in SyncGroup's answer (nothing when empty); raises ConsumerProtocolError."""
    return decode_assignment(data) if data else Assignment(())
