"""A group with a migration state, as the admin client shows it: one group over both stores, its phase, and the store
its readers use (docs/admin.md "Migrating groups"). Pure: no IO; must not import kazoo, sockets, the CLI or the
renderer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from zkcoord.admin.model import (
    COORDINATOR,
    LEGACY,
    MIGRATING,
    MIXED,
    REBALANCING_STATES,
    UNKNOWN_STATE,
    GroupListing,
)
from zkcoord.migration.phases import LOG, MAX, RULES, ZK, Phase
from zkcoord.model import GroupState

READS_FROM = {ZK: "zookeeper", LOG: "log", MAX: "max(zookeeper,log)"}
UNKNOWN = "unknown"  # the phase, and the store readers use, of a group whose migration state could not be read
KIND_READS_FROM = {COORDINATOR: READS_FROM[LOG], LEGACY: READS_FROM[ZK]}  # a group that is not migrating


def reads_rule(phase: Phase) -> str:
    """Where a migrating group's readers read (the phase's rule; legacy and coordinator members agree)."""
    return RULES[phase].legacy_member.reads


def reads_from(phase: Phase) -> str:
    return READS_FROM[reads_rule(phase)]


def needs_coordinator(phase: Phase | None) -> bool:
    """Whether the group's offsets are (also) in the log, so that only a coordinator can tell what its readers see
    (None: an unreadable phase, which may be any)."""
    return phase != Phase.ZK_ONLY


def merged_listing(
    group_id: str,
    phase: Phase | None,
    bridged: bool,
    coordinator: GroupListing | None,
    legacy: GroupListing | None,
    coordinator_known: bool,
) -> GroupListing:
    """One listing of a migrating group from what the coordinator and ZooKeeper list of it; its state is Unknown
    when its coordinator may be one that did not answer; its phase and readers' store are UNKNOWN when its
    migration state is unreadable (``phase`` None)."""
    if not coordinator_known:
        state = UNKNOWN_STATE
    elif coordinator is not None and coordinator.state in REBALANCING_STATES:
        state = coordinator.state
    elif any(listing is not None and listing.state == GroupState.STABLE for listing in (coordinator, legacy)):
        state = GroupState.STABLE
    else:
        state = GroupState.EMPTY
    kind = MIXED if bridged else MIGRATING
    if phase is None:
        return GroupListing(group_id, kind, state, "consumer", UNKNOWN, UNKNOWN)
    return GroupListing(group_id, kind, state, "consumer", phase.name, reads_from(phase))


def with_reads_from(listing: GroupListing) -> GroupListing:
    """A group that is not migrating reads its own store."""
    return replace(listing, reads_from=KIND_READS_FROM[listing.kind])


def unknown_migration(listing: GroupListing) -> GroupListing:
    """A group that may be migrating, with no migration state to read: its phase and readers' store are unknown."""
    return replace(listing, phase=UNKNOWN, reads_from=UNKNOWN)


def merge_listings(
    coordinator: Mapping[str, GroupListing],
    legacy: Mapping[str, GroupListing],
    phases: Mapping[str, Phase | None],
    bridged: set[str],
    coordinators_answered: bool,
    states_read: bool = True,
) -> list[GroupListing]:
    """Every group once per place it is in, a migrating group (one in ``phases``; None: its state is unreadable)
    once; by id, coordinator first. Without ``states_read`` (no ZooKeeper to read migration states from) a
    coordinator group's phase and readers' store are UNKNOWN: it may be migrating."""
    listings = []
    for group_id in sorted(set(coordinator) | set(legacy) | set(phases)):
        if group_id in phases:
            phase = phases[group_id]
            known = group_id in coordinator or coordinators_answered or not needs_coordinator(phase)
            listings.append(
                merged_listing(
                    group_id, phase, group_id in bridged, coordinator.get(group_id), legacy.get(group_id), known
                )
            )
            continue
        shown = with_reads_from if states_read else unknown_migration
        listings.extend(shown(found[group_id]) for found in (coordinator, legacy) if group_id in found)
    return listings
