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
    path = layout.user_config_path(user)
    try:
        config, _ = _read_config(zk, user)
        text = config.get(mechanism)
        return None if text is None else ScramCredential.parse(text)
    except (ZnodeDecodeError, InvalidCredentialError) as error:
        log.warning("unreadable %s credential in %s: %s", mechanism, path, error)
        return None


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
