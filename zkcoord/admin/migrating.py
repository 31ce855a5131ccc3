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
KIND_READS_FROM = {COORDINATOR: READS_FROM[LOG], LEGACY: READS_FROM[ZK]}  # a group that is not migrating


def reads_rule(phase: Phase) -> str:
    """Where a migrating group's readers read (the phase's rule; legacy and coordinator members agree)."""
    return RULES[phase].legacy_member.reads


def reads_from(phase: Phase) -> str:
    return READS_FROM[reads_rule(phase)]


def needs_coordinator(phase: Phase) -> bool:
    """Whether the group's offsets are (also) in the log, so that only a coordinator can tell what its readers see."""
    return phase != Phase.ZK_ONLY


def merged_listing(
    group_id: str,
    phase: Phase,
    bridged: bool,
    coordinator: GroupListing | None,
    legacy: GroupListing | None,
    coordinator_known: bool,
) -> GroupListing:
    """One listing of a migrating group from what the coordinator and ZooKeeper list of it; its state is Unknown
    when its coordinator may be one that did not answer."""
    if not coordinator_known:
        state = UNKNOWN_STATE
    elif coordinator is not None and coordinator.state in REBALANCING_STATES:
        state = coordinator.state
    elif any(listing is not None and listing.state == GroupState.STABLE for listing in (coordinator, legacy)):
        state = GroupState.STABLE
    else:
        state = GroupState.EMPTY
    return GroupListing(group_id, MIXED if bridged else MIGRATING, state, "consumer", phase.name, reads_from(phase))


def with_reads_from(listing: GroupListing) -> GroupListing:
    """A group that is not migrating reads its own store."""
    return replace(listing, reads_from=KIND_READS_FROM[listing.kind])


def merge_listings(
    coordinator: Mapping[str, GroupListing],
    legacy: Mapping[str, GroupListing],
    phases: Mapping[str, Phase],
    bridged: set[str],
    coordinators_answered: bool,
) -> list[GroupListing]:
    """Every group once per place it is in, a migrating group (one with a phase) once; by id, coordinator first."""
    listings = []
    for group_id in sorted(set(coordinator) | set(legacy) | set(phases)):
        phase = phases.get(group_id)
        if phase is not None:
            known = group_id in coordinator or coordinators_answered or not needs_coordinator(phase)
            listings.append(
                merged_listing(
                    group_id, phase, group_id in bridged, coordinator.get(group_id), legacy.get(group_id), known
                )
            )
            continue
        listings.extend(with_reads_from(found[group_id]) for found in (coordinator, legacy) if group_id in found)
    return listings
