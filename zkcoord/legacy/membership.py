"""A legacy member's presence in its group: the ids node, the sessions it lives through, its advertisement.

Spec: legacy-zk-protocol.md §1.4, §3.5. :meth:`Membership.register` writes the ids node, "expecting conflict".
The session listener drives the lifecycle (:mod:`zkcoord.legacy.states`): an expiry drops what the member
owned at once; the next session re-registers and rebalances (0.8.2's handleNewSession); a reconnection of the
same session re-arms the watches and rebalances once. The advertisement (``layout.legacy_advert_path``) tells
migration tools which offsets mode the member follows; it is written once registered and on each mode change.

Runs on the member's hub thread. IO: the kazoo client of its context. Does not import the consumer module.
"""

import logging

import gevent
import gevent.event
from kazoo.exceptions import KazooException
from kazoo.protocol.states import KazooState

from zkcoord.legacy.commits import OffsetCommits
from zkcoord.legacy.context import MemberContext, MemberPart
from zkcoord.legacy.ownership import OwnerNodes
from zkcoord.legacy.rebalance import Rebalancer
from zkcoord.legacy.states import AfterConnect
from zkcoord.migration.phases import MigrationState, MigrationStateError
from zkcoord.migration.store import advertise
from zkcoord.model import TopicPartition
from zkcoord.zk import layout
from zkcoord.zk.ephemeral import create_ephemeral

log = logging.getLogger(__name__)


class Membership(MemberPart):
    """Registers the member, follows its sessions and keeps its advertisement written."""

    def __init__(self, context: MemberContext, owners: OwnerNodes, commits: OffsetCommits, rebalancer: Rebalancer):
        super().__init__(context)
        self._owners = owners
        self._commits = commits
        self._rebalancer = rebalancer
        self._registration = context.registration
        self._own_path = layout.consumer_path(context.group, context.consumer_id)
        self._clock = context.clock
        self._lost_partitions: list[TopicPartition] = []  # owned when sessions expired; revoked on re-registering
        self._advert_wanted = gevent.event.Event()

    # ---- the ids node --------------------------------------------------------------------------------

    def register(self) -> bool:
        """Create our ids node, "expecting conflict" (§1.4): identical data is ours; other data is an old
        session's node (ZOOKEEPER-1740), so back off one session timeout and retry until it is gone.
        ZooKeeper errors (connection loss, a further expiry) are retried for as long as we run.
        False if the member closed first."""
        registration = layout.ConsumerRegistration(
            self._registration.subscription, self._registration.pattern, self._clock.now_ms()
        )
        data = layout.encode_consumer_registration(registration)
        while not self._lifecycle.closing:
            try:
                registered = self._create_registration(data)
            except KazooException as error:
                log.warning("registration failed member=%s error=%r; retrying", self._consumer_id, error)
                self._stopping.wait(self._config.backoff_ms / 1000.0)
                continue
            if registered:
                self._lifecycle.registration_written()
                self._trace.emit(
                    "legacy.registered", registration=data.decode("utf-8"), session_id=self._zk.client_id[0]
                )
                return True
            log.info(
                "ids node %s left by an earlier session; backing off %d ms until ZooKeeper deletes it",
                self._own_path,
                self._config.zookeeper_session_timeout_ms,
            )
            self._trace.emit("legacy.registration_conflict", backoff_ms=self._config.zookeeper_session_timeout_ms)
            self._stopping.wait(self._config.zookeeper_session_timeout_ms / 1000.0)
        return False

    def _create_registration(self, data: bytes) -> bool:
        """One try: True when the ids node is ours, False when an earlier session's node is in the way."""
        holder = create_ephemeral(self._zk, self._own_path, data)
        # Ours if identical (a create whose reply was lost), or if this very session wrote it.
        return holder is None or holder.data == data or holder.owner == self._zk.client_id[0]

    # ---- sessions (a kazoo listener: only updates state and spawns) ------------------------------------

    def on_session_state(self, state: str) -> None:
        after = self._lifecycle.connection_changed(state)
        if state == KazooState.LOST:
            # The session, and with it every owner znode, is gone: forget them before a new session
            # could make the old registry look owned again.
            self._lost_partitions.extend(self._ownership.registry)
            self._ownership.registry.clear()
            self._owners.forget()
        self._ownership.publish()
        if after is AfterConnect.NEW_SESSION:
            gevent.spawn(self._on_new_session)
        elif after is AfterConnect.RECONNECTED:
            # kazoo forgets every watcher when a connection drops and does not send them again.
            self._rebalancer.arm_watches()
            self._rebalancer.request("reconnected")

    def _on_new_session(self) -> None:
        """handleNewSession (§3.5): our ephemerals are gone; re-register, then rebalance."""
        self._trace.emit("legacy.session_expired")
        with self._rebalancer.lock:
            self._lifecycle.reregistration_began()
            lost, self._lost_partitions = sorted(set(self._lost_partitions)), []
            if lost:
                self._rebalancer.notify("on_partitions_revoked", lost)
            if self.register():
                self.write_advertisement()  # the advertisement died with the old session too
            self._rebalancer.arm_watches()
        self._rebalancer.synced_rebalance("session-expired")

    # ---- the advertisement ---------------------------------------------------------------------------

    def on_migration_state(self, state: MigrationState | None) -> None:
        """The group's migration state, now and on each change (a kazoo callback): the offsets mode follows it
        at once, then the advertisement says so."""
        if self._lifecycle.closing:
            return
        if self._commits.follow(state):
            self._advert_wanted.set()

    def on_unreadable_migration_state(self, error: MigrationStateError) -> None:
        """Foreign data in the group's migration znode (a kazoo callback): the member fails closed, keeping
        the mode and advertisement it has (an unknown phase is not acknowledged)."""
        if not self._lifecycle.closing:
            self._commits.keep_mode(error)

    def write_advertisement(self) -> bool:
        """Write the advertisement of the mode in force, once no commit or fetch of an older mode is under way
        (so an epoch is advertised only when the member follows it). None written while the member has no
        mode (its group's migration state was never readable). False if it could not be written now."""
        self._advert_wanted.clear()
        try:
            with self._commits.settled_mode() as mode:
                if mode is None:
                    return True
                advertise(self._zk, self._config.zkcoord_root, self._group, self._consumer_id, mode.advert())
        except KazooException as error:
            log.warning("cannot write the advertisement member=%s error=%r; retrying", self._consumer_id, error)
            self._advert_wanted.set()
            return False
        return True

    def advertise_loop(self) -> None:
        """Write the advertisement whenever it is due, once registered (the 0.8.2 registration comes first; a
        re-registration writes it again)."""
        while not self._lifecycle.closing:
            self._advert_wanted.wait()
            if not self._lifecycle.registered or not self.write_advertisement():
                self._stopping.wait(self._config.backoff_ms / 1000.0)
