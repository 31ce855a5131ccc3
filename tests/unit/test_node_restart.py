"""Telling a node's own dead session from another process: the registration verdict, the identity file, and
the identity in the registration (zkcoord/zk/nodes.py, zkcoord/server/identity.py, docs/coordinator.md)."""

import pytest

from zkcoord.errors import ConfigError
from zkcoord.server.identity import NodeIdentity, identity_path
from zkcoord.zk import layout
from zkcoord.zk.layout import ZnodeDecodeError
from zkcoord.zk.nodes import RegistrationHolder, judge_registration, previous_session_wait_s

PATH = layout.coordinator_node_path(layout.DEFAULT_ROOT, 1)


@pytest.mark.parametrize(
    ("held_identity", "held_owner", "identity", "session", "verdict"),
    [
        ("a", 7, "a", 7, RegistrationHolder.THIS_SESSION),
        ("b", 7, "a", 7, RegistrationHolder.THIS_SESSION),  # our session wrote it, whatever it says
        ("a", 6, "a", 7, RegistrationHolder.PREVIOUS_SESSION),
        ("b", 6, "a", 7, RegistrationHolder.OTHER_PROCESS),
        (None, 6, "a", 7, RegistrationHolder.OTHER_PROCESS),  # an older zkcoord's registration
        (None, 6, None, 7, RegistrationHolder.OTHER_PROCESS),  # a registry without identity waits for nobody
        ("a", 6, "a", None, RegistrationHolder.PREVIOUS_SESSION),
    ],
)
def test_registration_verdict(held_identity, held_owner, identity, session, verdict):
    assert judge_registration(held_identity, held_owner, identity, session) is verdict


def test_the_wait_covers_the_session_timeout_and_a_tick():
    assert previous_session_wait_s(18_000) == 27.0
    assert previous_session_wait_s(2_000) == 3.0


def test_registration_carries_the_identity_and_older_readers_still_read_it():
    data = layout.encode_coordinator_node("h", 9092, "abc")
    assert layout.decode_coordinator_node(PATH, data) == ("h", 9092)
    assert layout.decode_coordinator_node_identity(PATH, data) == "abc"
    assert layout.decode_coordinator_node_identity(PATH, layout.encode_coordinator_node("h", 1)) is None
    with pytest.raises(ZnodeDecodeError, match="identity must be a str"):
        layout.decode_coordinator_node_identity(PATH, b'{"version":1,"host":"h","port":1,"identity":5}')


def test_registration_carries_the_kafka_listener_and_older_readers_still_read_it():
    kafka = layout.KafkaListenerAddress("zk-a", 9192, 9193, 8)
    data = layout.encode_coordinator_node("h", 9092, "abc", kafka)
    assert layout.decode_coordinator_node(PATH, data) == ("h", 9092)
    assert layout.decode_coordinator_node_kafka(PATH, data) == kafka
    assert layout.decode_coordinator_node_kafka(PATH, layout.encode_coordinator_node("h", 1)) is None
    with pytest.raises(ZnodeDecodeError, match="kafka ports"):
        layout.decode_coordinator_node_kafka(
            PATH,
            b'{"version":1,"host":"h","port":1,"kafka_host":"k","kafka_port":70000,"kafka_gateway_port":1,'
            b'"kafka_gateway_ports":8}',
        )


def test_the_identity_is_kept_across_restarts_and_differs_between_directories(tmp_path):
    (tmp_path / "a").mkdir()
    first = NodeIdentity(tmp_path / "a", 1)
    value = first.acquire()
    first.release()
    again = NodeIdentity(tmp_path / "a", 1)
    assert again.acquire() == value
    again.release()
    assert identity_path(tmp_path / "a", 1).read_text() == f"{value}\n"
    (tmp_path / "b").mkdir()
    other = NodeIdentity(tmp_path / "b", 1)
    assert other.acquire() != value
    other.release()


def test_a_held_identity_refuses_a_second_holder_until_released(tmp_path):
    holder = NodeIdentity(tmp_path, 3)
    holder.acquire()
    with pytest.raises(ConfigError, match="node id 3 is in use on this log directory"):
        NodeIdentity(tmp_path, 3).acquire()
    other_id = NodeIdentity(tmp_path, 4)  # another node on the shared directory is not in the way
    other_id.acquire()
    other_id.release()
    holder.release()
    successor = NodeIdentity(tmp_path, 3)
    assert successor.acquire() == holder.value
    successor.release()
