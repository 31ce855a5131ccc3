"""Kafka's ZooKeeper ACLs on the znodes zkcoord creates, and the kazoo client every zkcoord process builds.

With ``zookeeper.set.acl=true`` each znode gets the ACL Kafka's ``ZkData.defaultAcls`` gives its path: all rights
for its creator (the SASL identity, ``sasl:<user>``) and read for the world; creator only under Kafka's sensitive
roots (SCRAM credentials, broker configs, delegation tokens). ``/consumers`` stays open, as in Kafka, and so does
everything under it, because unauthenticated 0.8.2 members create their ids, owners and offsets there. The ACL
is chosen per path at creation, parents included, so no call site can forget it.
"""

from collections.abc import Iterator

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import AuthFailedError, NoNodeError
from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from zkcoord.errors import ConfigError
from zkcoord.zk import layout
from zkcoord.zk.credentials import UNSECURED, ZooKeeperSecurity

SECURE_ACL = [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]


def default_acls(path: str) -> list[ACL]:
    """The ACL a znode at ``path`` (chroot-relative) gets with ``zookeeper.set.acl=true``."""
    if path == layout.CONSUMERS_PATH or path.startswith(layout.CONSUMERS_PATH + "/"):
        return list(OPEN_ACL_UNSAFE)
    if path.startswith(layout.SENSITIVE_ROOT_PATHS):
        return list(CREATOR_ALL_ACL)
    return list(SECURE_ACL)


class _PathAcl(list):
    """An ACL picked for one path, not by the caller: the parents ``makepath`` creates get their own."""


class PathAclClient(KazooClient):
    """A kazoo client whose creates without an explicit ACL take :func:`default_acls` of their path."""

    def create_async(self, path, value=b"", acl=None, *args, **kwargs):
        if acl is None:
            acl = _PathAcl(default_acls(path))
        return super().create_async(path, value, acl, *args, **kwargs)

    def ensure_path_async(self, path, acl=None):
        return super().ensure_path_async(path, None if isinstance(acl, _PathAcl) else acl)

    def transaction(self) -> TransactionRequest:
        return _PathAclTransaction(self)


class _PathAclTransaction(TransactionRequest):
    def create(self, path, value=b"", acl=None, ephemeral=False, sequence=False):
        return super().create(path, value, acl or default_acls(path), ephemeral, sequence)


def kazoo_client(hosts: str, security: ZooKeeperSecurity = UNSECURED, **options) -> KazooClient:
    """A kazoo client on ``hosts`` that logs in with ``security``'s credentials and, when it sets ACLs, creates
    znodes with Kafka's; ``options`` are KazooClient's own."""
    cls = PathAclClient if security.set_acl else KazooClient
    return cls(hosts=hosts, sasl_options=security.sasl_options(), **options)


def start_logged_in(client: KazooClient, security: ZooKeeperSecurity, timeout: float) -> None:
    """Start ``client``; when ZooKeeper refuses its SASL login, close it and raise a ConfigError naming the user and
    the JAAS file (kazoo itself fails the next request with an empty AuthFailedError)."""
    try:
        client.start(timeout=timeout)
        if security.credentials is not None:
            client.exists("/")  # the login is answered before this request
    except AuthFailedError:
        client.stop()
        client.close()
        credentials = security.credentials
        raise ConfigError(
            f"ZooKeeper refused the SASL login of user {credentials.username!r} (JAAS file {credentials.source}): "
            "wrong username or password, or a ZooKeeper without SASL"
        ) from None


def set_tree_acls(client: KazooClient, path: str, secure: bool) -> int:
    """Set :func:`default_acls` (or, when not ``secure``, open ACLs) on ``path`` and every znode below it, as
    Kafka's ``ZkSecurityMigrator`` does for Kafka's own roots; returns how many znodes were set."""
    count = 0
    for node in _walk(client, path):
        try:
            client.set_acls(node, default_acls(node) if secure else list(OPEN_ACL_UNSAFE))
            count += 1
        except NoNodeError:  # deleted meanwhile: nothing left to secure
            pass
    return count


def _walk(client: KazooClient, path: str) -> Iterator[str]:
    yield path
    try:
        children = client.get_children(path)
    except NoNodeError:
        return
    for child in sorted(children):
        yield from _walk(client, f"{path.rstrip('/')}/{child}")
