"""SCRAM credentials of users where Kafka's ZooKeeper mode keeps them, read and written as ``kafka-configs`` does.

A user's credentials are entries of its config znode, ``/config/users/<sanitized name>``, beside whatever else
Kafka keeps there (quotas), which every write here leaves as it was. Each write adds the change notification
brokers watch (``/config/changes/config_change_<seq>``), so a running Kafka broker picks the change up too.
"""

import logging
from collections.abc import Callable, Iterable, Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from zkcoord.auth.scram import HASHES, InvalidCredentialError, ScramCredential, check_mechanism
from zkcoord.errors import ConfigError, ZkcoordError
from zkcoord.zk import layout
from zkcoord.zk.layout import ZnodeDecodeError

log = logging.getLogger(__name__)

# Concurrent writers are told apart by the znode's version: a lost race reads again, a few times at most.
WRITE_ATTEMPTS = 5


class UserConfigConflictError(ZkcoordError):
    """A user's config znode kept changing under a write (another tool writing the same user)."""


def _read_config(zk: KazooClient, user: str) -> tuple[dict[str, str], int | None]:
    """The user's config and its znode version (None when there is no znode)."""
    path = layout.user_config_path(user)
    try:
        data, stat = zk.get(path)
    except NoNodeError:
        return {}, None
    return layout.decode_entity_config(path, data), stat.version


def scram_credential(zk: KazooClient, user: str, mechanism: str) -> ScramCredential | None:
    """``user``'s credential for ``mechanism``; None when there is none or it cannot be read (logged)."""
    try:
        config, _ = _read_config(zk, user)
    except ZnodeDecodeError as error:
        log.warning("unreadable %s credential in %s: %s", mechanism, layout.user_config_path(user), error)
        return None
    return _credential(config, user, mechanism)


def _credential(config: Mapping[str, str], user: str, mechanism: str) -> ScramCredential | None:
    text = config.get(mechanism)
    try:
        return None if text is None else ScramCredential.parse(text)
    except InvalidCredentialError as error:
        log.warning("unreadable %s credential in %s: %s", mechanism, layout.user_config_path(user), error)
        return None


class WatchedCredentials:
    """SCRAM credentials as a node serves logins, kept in memory as Kafka's brokers keep them: a user's config is
    read at its first login, then kept current by a watch on its znode, so a login reads no ZooKeeper and a changed
    or deleted credential applies from the next login. A name without a znode is not kept (a made-up name costs a
    read and holds no watch). Call it as ``credentials(user, mechanism)``."""

    def __init__(self, zk: KazooClient):
        self._zk = zk
        self._configs: dict[str, Mapping[str, str]] = {}

    def __call__(self, user: str, mechanism: str) -> ScramCredential | None:
        config = self._configs.get(user)
        if config is None:
            config = self._watch(user)
        return None if config is None else _credential(config, user, mechanism)

    def _watch(self, user: str) -> Mapping[str, str] | None:
        path = layout.user_config_path(user)
        if self._zk.exists(path) is None:
            return None

        def on_change(data: bytes | None, _stat) -> bool | None:
            if data is None:  # deleted: forget the user and stop watching
                self._configs.pop(user, None)
                return False
            try:
                self._configs[user] = layout.decode_entity_config(path, data)
            except ZnodeDecodeError as error:
                log.warning("unreadable credentials in %s: %s", path, error)
                self._configs[user] = {}
            return None

        self._zk.DataWatch(path, on_change)
        return self._configs.get(user)


def describe_users(zk: KazooClient, user: str | None = None) -> dict[str, dict[str, int]]:
    """Each user's SCRAM mechanisms and their iterations, by user name: ``user`` alone, or every user with one.

    A credential that cannot be read is left out (logged).
    """
    if user is not None:
        names = [user]
    else:
        try:
            names = sorted(layout.desanitize_entity_name(child) for child in zk.get_children(layout.CONFIG_USERS_PATH))
        except NoNodeError:
            names = []
    described = {}
    for name in names:
        mechanisms = {}
        for mechanism in HASHES:
            credential = scram_credential(zk, name, mechanism)
            if credential is not None:
                mechanisms[mechanism] = credential.iterations
        if mechanisms or user is not None:
            described[name] = mechanisms
    return described


def alter_scram_credentials(
    zk: KazooClient, user: str, upserts: Mapping[str, ScramCredential], deletions: Iterable[str] = ()
) -> None:
    """Store ``upserts`` and remove ``deletions`` (mechanism names) of ``user`` in one write, and notify the
    brokers. Removing a credential the user does not have is a ConfigError and writes nothing (as kafka-configs)."""
    deletions = {check_mechanism(mechanism) for mechanism in deletions}
    for mechanism in upserts:
        check_mechanism(mechanism)

    def change(config: dict[str, str]) -> dict[str, str]:
        missing = sorted(deletions - set(config))
        if missing:
            raise ConfigError(f"Invalid config(s): {','.join(missing)} (user {user!r} has no such credential)")
        kept = {key: value for key, value in config.items() if key not in deletions}
        return {**kept, **{mechanism: credential.format() for mechanism, credential in upserts.items()}}

    _update_config(zk, user, change)


def set_scram_credential(zk: KazooClient, user: str, mechanism: str, credential: ScramCredential) -> None:
    """Store ``credential`` as ``user``'s for ``mechanism``, replacing any, and notify the brokers."""
    alter_scram_credentials(zk, user, {mechanism: credential})


def delete_scram_credential(zk: KazooClient, user: str, mechanism: str) -> bool:
    """Remove ``user``'s ``mechanism`` credential and notify the brokers; False (nothing written) when there was
    none."""
    check_mechanism(mechanism)
    try:
        alter_scram_credentials(zk, user, {}, [mechanism])
    except ConfigError:
        return False
    return True


def _update_config(zk: KazooClient, user: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
    """Write ``change(config)`` as the user's config, as Kafka's ``AdminZkClient.changeEntityConfig`` does: a
    config left empty deletes the znode when it has no children (Kafka's clean-up of quota nodes)."""
    path = layout.user_config_path(user)
    for _ in range(WRITE_ATTEMPTS):
        config, version = _read_config(zk, user)
        new_config = change(config)
        try:
            if version is None:
                zk.create(path, layout.encode_entity_config(new_config), makepath=True)
            elif new_config or not _try_delete(zk, path, version):
                zk.set(path, layout.encode_entity_config(new_config), version=version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue
        _notify_change(zk, user)
        return
    raise UserConfigConflictError(f"{path} kept changing during {WRITE_ATTEMPTS} attempts to write it")


def _try_delete(zk: KazooClient, path: str, version: int) -> bool:
    try:
        zk.delete(path, version=version)
    except NotEmptyError:  # <user>/clients quotas live below it: keep the node, with an empty config
        return False
    return True


def _notify_change(zk: KazooClient, user: str) -> None:
    zk.ensure_path(layout.CONFIG_CHANGES_PATH)
    zk.create(
        f"{layout.CONFIG_CHANGES_PATH}/{layout.CONFIG_CHANGE_PREFIX}",
        layout.encode_user_config_change(user),
        sequence=True,
    )
