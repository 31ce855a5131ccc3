"""Kafka's ACLs where Kafka's ZooKeeper mode keeps them, read and written as AclAuthorizer does, so that brokers
and zkcoord see each other's changes (docs/security.md "ACLs").

Layout (kafka.zk.ZkData): a literal pattern's ACLs in ``/kafka-acl/<ResourceType>/<name>``, a prefixed one's in
``/kafka-acl-extended/prefixed/<ResourceType>/<prefix>`` (``Group``, ``Topic``, ``TransactionalId``...); every
change adds a sequential ``acl_changes_`` znode naming the resource under ``/kafka-acl-changes`` (literal, data
``GROUP:name``) or ``/kafka-acl-extended-changes`` (JSON). Brokers re-read the resource a notification names and
delete notifications older than 15 minutes.

:class:`AclStore` keeps an :class:`~zkcoord.auth.acls.Authorizer` current; the writers (:func:`add_acls`,
:func:`remove_acls`) update a resource with a version-checked write and add the notification. Works with any kazoo
handler: with ``SequentialGeventHandler``, start and stop the store on the hub the client runs on. Znodes are
created with the client's default ACL. Formats are in :mod:`zkcoord.auth.acls`; this module does the IO.
"""

import contextlib
import logging
import random
from collections.abc import Callable, Iterable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent

from zkcoord.auth.acls import (
    LITERAL,
    PATTERN_TYPES,
    PREFIXED,
    RESOURCE_TYPES,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    Acl,
    Authorizer,
    ResourcePattern,
    ResourcePatternFilter,
    decode_acls,
    decode_extended_change,
    decode_literal_change,
    encode_acls,
    encode_extended_change,
    encode_literal_change,
)
from zkcoord.clock import SystemClock
from zkcoord.errors import ZkcoordError
from zkcoord.zk.nodes import DISCONNECTED, RETRY_DELAY_S

log = logging.getLogger(__name__)

STORE_ROOTS = {LITERAL: "/kafka-acl", PREFIXED: "/kafka-acl-extended/prefixed"}
CHANGE_ROOTS = {LITERAL: "/kafka-acl-changes", PREFIXED: "/kafka-acl-extended-changes"}
CHANGE_PREFIX = "acl_changes_"
CHANGE_EXPIRY_MS = 15 * 60 * 1000  # ZkNodeChangeNotificationListener's changeExpirationMs
MAX_UPDATE_RETRIES = 10  # AclAuthorizer.maxUpdateRetries, with its 100-150 ms backoff between tries
STOP_WAIT_S = 5.0

Acls = frozenset[Acl]


class AclUpdateError(ZkcoordError):
    """A resource's ACLs kept changing under a version-checked update for every retry."""


def resource_path(pattern: ResourcePattern) -> str:
    """Where ``pattern``'s ACLs are (ZkData's ``ResourceZNode.path``)."""
    return f"{STORE_ROOTS[pattern.pattern_type]}/{pattern.resource_type}/{pattern.name}"


def encode_change(pattern: ResourcePattern) -> bytes:
    return encode_literal_change(pattern) if pattern.pattern_type == LITERAL else encode_extended_change(pattern)


def decode_change(pattern_type: str, data: bytes) -> ResourcePattern:
    """The resource a notification under ``CHANGE_ROOTS[pattern_type]`` names."""
    return decode_literal_change(data) if pattern_type == LITERAL else decode_extended_change(data)


def ensure_acl_paths(zk: KazooClient) -> None:
    """The roots and per-type directories, as ``KafkaZkClient.createAclPaths`` makes them."""
    for pattern_type in PATTERN_TYPES:
        for resource_type in RESOURCE_TYPES:
            zk.ensure_path(f"{STORE_ROOTS[pattern_type]}/{resource_type}")
        zk.ensure_path(CHANGE_ROOTS[pattern_type])


def read_acls(zk: KazooClient, pattern: ResourcePattern) -> tuple[Acls, int | None]:
    """``pattern``'s ACLs and its znode's version (None: no znode); ValueError naming the path if unreadable."""
    path = resource_path(pattern)
    try:
        data, stat = zk.get(path)
    except NoNodeError:
        return frozenset(), None
    try:
        return decode_acls(data), stat.version
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None


def read_all_acls(
    zk: KazooClient,
    pattern_types: Iterable[str] = PATTERN_TYPES,
    unreadable: Callable[[ResourcePattern], None] = lambda _pattern: None,
) -> dict[ResourcePattern, Acls]:
    """Every stored pattern with ACLs; what cannot be read (unknown type, bad JSON) is logged by path and skipped,
    and a pattern whose ACLs cannot be read is handed to ``unreadable``."""
    found: dict[ResourcePattern, Acls] = {}
    for pattern_type in pattern_types:
        root = STORE_ROOTS[pattern_type]
        try:
            resource_types = zk.get_children(root)
        except NoNodeError:
            continue
        for resource_type in sorted(resource_types):
            if resource_type not in RESOURCE_TYPES:
                log.warning("ignoring unknown ACL resource type znode=%s/%s", root, resource_type)
                continue
            try:
                names = zk.get_children(f"{root}/{resource_type}")
            except NoNodeError:
                continue
            patterns = [ResourcePattern(resource_type, name, pattern_type) for name in sorted(names)]
            reads = [zk.get_async(resource_path(pattern)) for pattern in patterns]  # pipelined
            for pattern, read in zip(patterns, reads, strict=True):
                try:
                    acls = decode_acls(read.get()[0])
                except NoNodeError:
                    continue
                except ValueError as error:
                    log.warning("skipping unreadable ACLs znode=%s error=%s", resource_path(pattern), error)
                    unreadable(pattern)
                    continue
                if acls:
                    found[pattern] = acls
    return found


EVERY_PATTERN = ResourcePatternFilter()
UNREADABLE_ACLS: Acls = frozenset({Acl(WILDCARD_PRINCIPAL, WILDCARD_HOST, "All", "Deny")})


def list_acls(zk: KazooClient, pattern_filter: ResourcePatternFilter = EVERY_PATTERN) -> dict[ResourcePattern, Acls]:
    """The stored patterns ``pattern_filter`` matches, with their ACLs, sorted by pattern."""
    kind, name, pattern_type = pattern_filter.resource_type, pattern_filter.name, pattern_filter.pattern_type
    if kind is not None and name is not None and pattern_type in PATTERN_TYPES:  # one resource: read just that one
        pattern = ResourcePattern(kind, name, pattern_type)
        acls = read_acls(zk, pattern)[0]
        return {pattern: acls} if acls else {}
    return {p: acls for p, acls in sorted(read_all_acls(zk).items()) if pattern_filter.matches(p)}


def add_acls(zk: KazooClient, pattern: ResourcePattern, acls: Iterable[Acl]) -> bool:
    """Add ``acls`` to ``pattern``'s; whether that changed anything."""
    new = frozenset(acls)
    return update_acls(zk, pattern, lambda current: current | new)


def remove_acls(zk: KazooClient, pattern: ResourcePattern, acls: Iterable[Acl] | None = None) -> bool:
    """Remove ``acls`` (None: all) from ``pattern``'s, deleting its znode when none remain; whether that changed
    anything."""
    gone = None if acls is None else frozenset(acls)
    return update_acls(zk, pattern, lambda current: frozenset() if gone is None else current - gone)


def update_acls(zk: KazooClient, pattern: ResourcePattern, change: Callable[[Acls], Acls]) -> bool:
    """Replace ``pattern``'s ACLs by ``change(current)`` with a version-checked write, read again and retried when
    someone else wrote first (AclAuthorizer's ``updateResourceAcls``); then add the change notification."""
    pattern.check_storable()
    path = resource_path(pattern)
    for attempt in range(MAX_UPDATE_RETRIES + 1):
        current, version = read_acls(zk, pattern)
        new = change(current)
        if new == current:
            return False
        try:
            if not new:
                zk.delete(path, version=version)
            elif version is None:
                zk.create(path, encode_acls(new), makepath=True)
            else:
                zk.set(path, encode_acls(new), version=version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            if attempt < MAX_UPDATE_RETRIES:
                zk.handler.sleep_func((100 + random.randrange(50)) / 1000)
            continue
        notify_change(zk, pattern)
        return True
    raise AclUpdateError(f"failed to update the ACLs of {path} after {MAX_UPDATE_RETRIES} retries")


def notify_change(zk: KazooClient, pattern: ResourcePattern) -> None:
    """Tell every broker and store to re-read ``pattern`` (``KafkaZkClient.createAclChangeNotification``)."""
    root = CHANGE_ROOTS[LITERAL if pattern.pattern_type == LITERAL else PREFIXED]
    zk.create(f"{root}/{CHANGE_PREFIX}", encode_change(pattern), sequence=True, makepath=True)


def _sequence(child: str) -> int | None:
    digits = child[len(CHANGE_PREFIX) :]
    return int(digits) if child.startswith(CHANGE_PREFIX) and digits.isdigit() else None


_STOP, _RELOAD = object(), object()


class AclStore:
    """Keeps ``authorizer`` equal to the ACLs in ZooKeeper: everything at :meth:`start`, then each resource a new
    change notification names, everything again after a lost session. One worker makes every read, so a later
    read never loses to an earlier one; watches and the session listener only enqueue. A notification or resource
    that cannot be read is logged by path and skipped; the resource keeps the ACLs it had."""

    def __init__(self, zk: KazooClient, authorizer: Authorizer, clock=None):
        self.zk = zk
        self.authorizer = authorizer
        self.clock = clock or SystemClock()
        self._events = None  # made in start(): a gevent queue belongs to the hub it is made on
        self._last_seen: dict[str, int] = {}
        self._session_lost = False
        self._worker = None

    def start(self) -> None:
        """Load every ACL (blocking), then follow the notifications."""
        ensure_acl_paths(self.zk)
        self._events = self.zk.handler.queue_impl()
        for pattern_type, root in CHANGE_ROOTS.items():
            sequences = [_sequence(child) for child in self.zk.get_children(root)]
            self._last_seen[pattern_type] = max((s for s in sequences if s is not None), default=-1)
        self._load_everything()
        self.zk.add_listener(self._on_state)
        self._worker = self.zk.handler.spawn(self._run)
        for pattern_type in CHANGE_ROOTS:
            self._events.put(pattern_type)

    def stop(self) -> None:
        self.zk.remove_listener(self._on_state)
        if self._worker is not None:
            self._events.put(_STOP)
            self._worker.join(STOP_WAIT_S)
            self._worker = None

    # -- kazoo callbacks: enqueue only --------------------------------------------------------------------------

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._session_lost = True
        elif state == KazooState.CONNECTED:
            # Watches do not outlive the connection; after a lost session, notifications may have expired too.
            if self._session_lost:
                self._session_lost = False
                self._events.put(_RELOAD)
            for pattern_type in CHANGE_ROOTS:
                self._events.put(pattern_type)

    def _on_watch(self, event: WatchedEvent) -> None:
        if event.type != EventType.NONE:
            for pattern_type, root in CHANGE_ROOTS.items():
                if event.path == root:
                    self._events.put(pattern_type)

    # -- the worker -----------------------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            item = self._events.get()
            if item is _STOP:
                return
            try:
                if item is _RELOAD:
                    self._load_everything()
                else:
                    self._follow_changes(item)
            except DISCONNECTED:
                if self.zk.connected:  # the CONNECTED that asks again came before this: ask now
                    self._events.put(item)
                elif item is _RELOAD:
                    self._session_lost = True  # so that the next CONNECTED asks for it again
            except Exception:
                log.exception("reading ACLs failed, trying again in %ss", RETRY_DELAY_S)
                self.zk.handler.sleep_func(RETRY_DELAY_S)
                self._events.put(item)

    def _load_everything(self) -> None:
        unreadable: list[ResourcePattern] = []
        loaded = read_all_acls(self.zk, unreadable=unreadable.append)
        for pattern in unreadable:
            loaded[pattern] = self._unreadable(pattern, "")
        for pattern in self.authorizer.patterns():
            if pattern not in loaded:
                self.authorizer.set_acls(pattern, ())
        for pattern, acls in loaded.items():
            self.authorizer.set_acls(pattern, acls)
        log.info("loaded ACLs patterns=%d", len(loaded))

    def _unreadable(self, pattern: ResourcePattern, error: object) -> Acls:
        """The ACLs a resource keeps while its znode cannot be read: those it had, else a Deny of everything to
        everyone but super users. Kafka's broker does not start on such a znode; dropping its ACLs instead would
        drop its Denies too, or open it under allow.everyone.if.no.acl.found."""
        previous = self.authorizer.acls(pattern)
        log.error(
            "ACLs of %s cannot be read%s; %s until the znode is fixed",
            pattern.describe(),
            f" ({error})" if error else "",
            "keeping the previous ones" if previous else "denying everything on it",
        )
        return previous or UNREADABLE_ACLS

    def _follow_changes(self, pattern_type: str) -> None:
        """Re-read the resources that notifications newer than the last seen name; purge expired notifications."""
        root = CHANGE_ROOTS[pattern_type]
        children = sorted(
            (sequence, child)
            for child in self.zk.get_children(root, watch=self._on_watch)
            if (sequence := _sequence(child)) is not None
        )
        changed: dict[ResourcePattern, None] = {}  # in notification order, each once
        last_seen = self._last_seen[pattern_type]
        for sequence, child in children:
            if sequence <= last_seen:
                continue
            try:
                data, _ = self.zk.get(f"{root}/{child}")
                changed[decode_change(pattern_type, data)] = None
            except NoNodeError:
                pass  # purged by a broker
            except ValueError as error:
                log.warning("skipping unreadable ACL change notification znode=%s/%s error=%s", root, child, error)
        for pattern in changed:
            self._reload(pattern)
        if children:
            self._last_seen[pattern_type] = max(last_seen, children[-1][0])
        self._purge_expired(root, [child for _, child in children])

    def _reload(self, pattern: ResourcePattern) -> None:
        try:
            acls, _ = read_acls(self.zk, pattern)
        except ValueError as error:
            acls = self._unreadable(pattern, error)
        self.authorizer.set_acls(pattern, acls)
        log.info("ACLs changed resource=%s acls=%d", pattern.describe(), len(acls))

    def _purge_expired(self, root: str, children: list[str]) -> None:
        now_ms = self.clock.now_ms()
        for child in children:  # oldest first: stop at the first one still fresh
            path = f"{root}/{child}"
            stat = self.zk.exists(path)
            if stat is None:
                continue
            if now_ms - stat.ctime <= CHANGE_EXPIRY_MS:
                return
            with contextlib.suppress(NoNodeError):  # a broker purged it first
                self.zk.delete(path)
