"""build_config and the legacy consumer's configuration (legacy-zk-protocol.md §7). Pure."""

import logging

import pytest

from zkcoord.config import build_config, kafka_names
from zkcoord.errors import ConfigError
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.log import LogConfig

ZK = "zk1:2181,zk2:2181/kafka"


def legacy(properties=None, **overrides):
    return build_config(LegacyConsumerConfig, properties, **overrides)


def test_kafka_names_map_to_fields():
    names = kafka_names(LegacyConsumerConfig)
    assert names["group.id"] == "group_id"
    assert names["rebalance.backoff.ms"] == "rebalance_backoff_ms"
    assert names["zookeeper.connect"] == "zookeeper_connect"


def test_defaults_spec_7():
    config = legacy({"group.id": "g", "zookeeper.connect": ZK})
    assert config.group_id == "g"
    assert config.zookeeper_connect == ZK
    assert config.consumer_id is None
    assert config.zookeeper_session_timeout_ms == 6000
    assert config.connection_timeout_ms == 6000
    assert config.zookeeper_sync_time_ms == 2000
    assert config.rebalance_max_retries == 4
    assert config.backoff_ms == 2000
    assert config.partition_assignment_strategy == "range"
    assert config.auto_commit_enable is True
    assert config.auto_commit_interval_ms == 60000
    assert config.exclude_internal_topics is True
    assert config.offsets_storage == "zookeeper"
    assert config.offsets_commit_max_retries == 5
    assert config.offsets_channel_backoff_ms == 1000
    assert config.effective_client_id == "g"


def test_properties_file_strings_are_coerced():
    config = legacy(
        {
            "group.id": "orders-etl",
            "zookeeper.connect": ZK,
            "rebalance.backoff.ms": "3500",
            "rebalance.max.retries": " 10 ",
            "auto.commit.enable": "false",
            "exclude.internal.topics": "FALSE",
            "auto.commit.interval.ms": "1000",
            "partition.assignment.strategy": "roundrobin",
            "consumer.id": "fixed",
            "client.id": "etl",
        }
    )
    assert config.rebalance_backoff_ms == 3500
    assert config.backoff_ms == 3500
    assert config.rebalance_max_retries == 10
    assert config.auto_commit_enable is False
    assert config.exclude_internal_topics is False
    assert config.auto_commit_interval_ms == 1000
    assert config.partition_assignment_strategy == "roundrobin"
    assert config.consumer_id == "fixed"
    assert config.effective_client_id == "etl"


def test_snake_case_aliases():
    config = legacy(group_id="g", zookeeper_connect=ZK, rebalance_backoff_ms=100, auto_commit_enable=False)
    assert (config.group_id, config.zookeeper_connect) == ("g", ZK)
    assert config.backoff_ms == 100
    assert config.auto_commit_enable is False


def test_snake_case_keys_in_the_properties_mapping():
    config = legacy({"group_id": "g", "zookeeper_connect": ZK, "zookeeper_session_timeout_ms": "9000"})
    assert config.zookeeper_session_timeout_ms == 9000


def test_keyword_overrides_win():
    config = legacy({"group.id": "from-file", "zookeeper.connect": ZK, "rebalance.max.retries": "2"}, group_id="kw")
    assert config.group_id == "kw"
    assert config.rebalance_max_retries == 2


def test_rebalance_backoff_defaults_to_sync_time_spec_7():
    config = legacy({"group.id": "g", "zookeeper.connect": ZK, "zookeeper.sync.time.ms": "750"})
    assert config.backoff_ms == 750


def test_explicit_rebalance_backoff_beats_sync_time_spec_7():
    config = legacy(
        {"group.id": "g", "zookeeper.connect": ZK, "zookeeper.sync.time.ms": "750", "rebalance.backoff.ms": "0"}
    )
    assert config.backoff_ms == 0


def test_connection_timeout_defaults_to_session_timeout_spec_7():
    config = legacy({"group.id": "g", "zookeeper.connect": ZK, "zookeeper.session.timeout.ms": "12000"})
    assert config.connection_timeout_ms == 12000
    explicit = legacy(
        {
            "group.id": "g",
            "zookeeper.connect": ZK,
            "zookeeper.session.timeout.ms": "12000",
            "zookeeper.connection.timeout.ms": "3000",
        }
    )
    assert explicit.connection_timeout_ms == 3000


def test_offsets_storage_is_lower_cased_spec_7():
    assert legacy({"group.id": "g", "zookeeper.connect": ZK, "offsets.storage": "ZooKeeper"}).offsets_storage == (
        "zookeeper"
    )


@pytest.mark.parametrize("storage", ["redis", "kafka2", ""])
def test_offsets_storage_other_than_zookeeper_or_kafka_is_refused(storage):
    # anything but zookeeper or kafka is rejected as in CC (§7)
    with pytest.raises(ConfigError, match="offsets.storage"):
        legacy({"group.id": "g", "zookeeper.connect": ZK, "offsets.storage": storage})


def test_missing_group_id():
    with pytest.raises(ConfigError, match="group.id"):
        legacy({"zookeeper.connect": ZK})


@pytest.mark.parametrize("group", ["", "my group", "a/b", "grüppe", ".", "..", "g" * 256])
def test_illegal_group_id_spec_7(group):
    with pytest.raises(ConfigError, match="group.id"):
        legacy({"group.id": group, "zookeeper.connect": ZK})


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("rebalance.backoff.ms", "2s"),
        ("rebalance.max.retries", "4.0"),
        ("zookeeper.session.timeout.ms", ""),
        ("auto.commit.interval.ms", "sixty"),
    ],
)
def test_non_integer_values_are_config_errors(name, value):
    with pytest.raises(ConfigError, match=name):
        legacy({"group.id": "g", "zookeeper.connect": ZK, name: value})


@pytest.mark.parametrize("value", ["yes", "1", "", "no", "f"])
def test_bad_booleans_are_config_errors(value):
    with pytest.raises(ConfigError, match="auto.commit.enable"):
        legacy({"group.id": "g", "zookeeper.connect": ZK, "auto.commit.enable": value})


def test_rebalance_max_retries_below_one_is_refused():
    with pytest.raises(ConfigError, match="rebalance.max.retries"):
        legacy({"group.id": "g", "zookeeper.connect": ZK, "rebalance.max.retries": "0"})


def test_unknown_properties_are_ignored_with_a_warning(caplog):
    caplog.set_level(logging.WARNING, logger="zkcoord.config")
    config = legacy({"group.id": "g", "zookeeper.connect": ZK, "fetch.message.max.bytes": "1048576", "bogus": "1"})
    assert config == legacy({"group.id": "g", "zookeeper.connect": ZK})
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("fetch.message.max.bytes" in message for message in warned)
    assert any("bogus" in message for message in warned)


def test_known_properties_do_not_warn(caplog):
    caplog.set_level(logging.WARNING, logger="zkcoord.config")
    legacy({"group.id": "g", "zookeeper.connect": ZK, "auto.commit.enable": "true"})
    assert not caplog.records


def test_zookeeper_connect_falls_back_to_environment(monkeypatch):
    monkeypatch.setenv("ZKCOORD_ZK_CONNECT", "envzk:2181/chroot")
    assert legacy({"group.id": "g"}).zookeeper_connect == "envzk:2181/chroot"


def test_explicit_zookeeper_connect_beats_environment(monkeypatch):
    monkeypatch.setenv("ZKCOORD_ZK_CONNECT", "envzk:2181")
    assert legacy({"group.id": "g", "zookeeper.connect": ZK}).zookeeper_connect == ZK


def test_zookeeper_connect_is_required_without_environment(monkeypatch):
    monkeypatch.delenv("ZKCOORD_ZK_CONNECT", raising=False)
    with pytest.raises(ConfigError, match="zookeeper.connect"):
        legacy({"group.id": "g"})


def test_config_is_frozen():
    config = legacy({"group.id": "g", "zookeeper.connect": ZK})
    with pytest.raises(AttributeError):
        config.group_id = "other"


@pytest.mark.parametrize("consumer_id", ["", "a/b", "tab\there"])
def test_consumer_id_must_be_a_znode_name(consumer_id):
    with pytest.raises(ConfigError, match="consumer.id"):
        build_config(LegacyConsumerConfig, {"group.id": "g", "zookeeper.connect": "h:1", "consumer.id": consumer_id})


def test_log_properties_accept_kafka_names_and_coerce_floats():
    config = build_config(
        LogConfig, {"log.flush.policy": "always", "log.cleaner.min.cleanable.ratio": "0.25", "segment_bytes": "2000000"}
    )
    assert (config.flush_policy, config.cleaner_min_cleanable_ratio, config.segment_bytes) == ("always", 0.25, 2000000)


def test_a_node_logs_a_property_it_does_not_use_and_takes_the_others(caplog):
    """One policy everywhere: a misspelt or foreign key is warned about and ignored, as Kafka's broker does."""
    from zkcoord.server.config import node_config

    with caplog.at_level(logging.WARNING, logger="zkcoord.server.config"):
        config = node_config({"group.max.size": "7", "num.network.threads": "3", "log.flush.polcy": "always"})
    assert config.coordinator.group_max_size == 7
    assert config.log.flush_policy == "group"  # the misspelt key changed nothing
    warned = [record.getMessage() for record in caplog.records]
    assert warned == [
        "property log.flush.polcy is not used by a coordinator node; ignored",
        "property num.network.threads is not used by a coordinator node; ignored",
    ]


def test_a_node_takes_kafkas_connection_limits_by_either_name_and_parses_per_ip_overrides():
    from zkcoord.server.config import node_config

    server = node_config(
        {
            "connections.max.idle.ms": "5000",
            "request_read_timeout_ms": "700",
            "max_connections_per_ip": "3",
            "max.connections.per.ip.overrides": "127.0.0.1:100, ::1:0",
        }
    ).server
    assert (server.connections_max_idle_ms, server.request_read_timeout_ms, server.max_connections_per_ip) == (
        5000,
        700,
        3,
    )
    assert server.per_ip_overrides() == {"127.0.0.1": 100, "::1": 0}
    defaults = node_config({}).server
    assert (defaults.connections_max_idle_ms, defaults.max_connections_per_ip) == (600_000, 2**31 - 1)


@pytest.mark.parametrize(
    "properties",
    [
        {"max.connections.per.ip.overrides": "127.0.0.1"},
        {"max.connections.per.ip.overrides": "127.0.0.1:x"},
        {"connections.max.idle.ms": "0"},
        {"request.read.timeout.ms": "-1"},
        {"max.connections.per.ip": "0"},
    ],
)
def test_a_node_refuses_connection_limits_that_cannot_work(properties):
    from zkcoord.server.config import node_config

    with pytest.raises(ConfigError):
        node_config(properties)
