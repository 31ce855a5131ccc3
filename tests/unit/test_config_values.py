"""Every enumerated, boolean and numeric property of every typed config refuses a value it does not take, naming
the property and the values it takes (docs/configuration.md, "Values"). Pure."""

import contextlib
import dataclasses
import math
import re
import typing

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from zkcoord.client.config import ConsumerConfig
from zkcoord.config import build_config
from zkcoord.errors import ConfigError
from zkcoord.group.config import CoordinatorConfig
from zkcoord.legacy.config import LegacyConsumerConfig
from zkcoord.log.config import LogConfig
from zkcoord.security.config import SecurityConfig
from zkcoord.server.config import ServerConfig, node_config

REQUIRED = {LegacyConsumerConfig: {"group.id": "g", "zookeeper.connect": "zk:2181/kafka"}}
CONFIGS = (LegacyConsumerConfig, ConsumerConfig, CoordinatorConfig, LogConfig, ServerConfig, SecurityConfig)


def build(cls, **properties):
    return build_config(cls, {**REQUIRED.get(cls, {}), **properties})


def fields_with(key):
    return [
        pytest.param(cls, field, id=field.metadata["kafka"])
        for cls in CONFIGS
        for field in dataclasses.fields(cls)
        if field.metadata.get(key) not in (None, ())
    ]


def boolean_fields():
    return [
        pytest.param(cls, field, id=field.metadata["kafka"])
        for cls in CONFIGS
        for field in dataclasses.fields(cls)
        if "kafka" in field.metadata and typing.get_type_hints(cls)[field.name] in (bool, bool | None)
    ]


def test_a_misspelt_strategy_is_refused_naming_both_strategies():
    with pytest.raises(ConfigError) as error:
        build(LegacyConsumerConfig, **{"partition.assignment.strategy": "roundrobn"})
    assert str(error.value) == "partition.assignment.strategy=roundrobn is not valid: use range or roundrobin"


def test_both_strategies_of_0_8_2_are_taken():
    for strategy in ("range", "roundrobin"):
        config = build(LegacyConsumerConfig, **{"partition.assignment.strategy": strategy})
        assert config.partition_assignment_strategy == strategy


def test_the_0_8_2_names_are_read_case_insensitively():
    config = build(LegacyConsumerConfig, **{"offsets.storage": "Kafka", "auto.offset.reset": "SMALLEST"})
    assert (config.offsets_storage, config.auto_offset_reset) == ("kafka", "smallest")


def test_a_client_strategy_list_with_an_unknown_name_is_refused():
    with pytest.raises(ConfigError, match="partition.assignment.strategy=stiky is not valid: use a list of range, "):
        build(ConsumerConfig, **{"partition.assignment.strategy": "range,stiky"})
    assert build(ConsumerConfig, **{"partition.assignment.strategy": "cooperative-sticky, range"})


def test_a_node_properties_file_with_a_bad_value_is_refused_naming_it():
    with pytest.raises(ConfigError, match="log.flush.policy=fsync is not valid: use always, group or never"):
        node_config({"log.flush.policy": "fsync"})
    with pytest.raises(ConfigError, match="coordinator.load.max.attempts=0 is not valid: use a number >= 1"):
        node_config({"coordinator.load.max.attempts": "0"})
    with pytest.raises(ConfigError, match="ssl.client.auth=always is not valid: use none, requested or required"):
        node_config({"ssl.client.auth": "always"})


def test_a_clients_security_protocol_names_the_protocols():
    with pytest.raises(ConfigError, match="security.protocol=TLS is not valid: use PLAINTEXT, SSL, SASL_PLAINTEXT or "):
        build(ConsumerConfig, **{"security.protocol": "tls"})


@pytest.mark.parametrize(("cls", "field"), fields_with("choices"))
@given(value=st.text(max_size=12))
def test_an_enumerated_property_takes_exactly_its_choices(cls, field, value):
    name, choices = field.metadata["kafka"], field.metadata["choices"]
    for choice in choices:
        assert getattr(build(cls, **{name: choice}), field.name) == choice
    taken = value.lower() if cls is LegacyConsumerConfig and name != "partition.assignment.strategy" else value
    if taken in choices:
        return
    with pytest.raises(ConfigError) as error:
        build(cls, **{name: value})
    message = str(error.value)
    assert message.startswith(f"{name}=") and all(choice in message for choice in choices)


@pytest.mark.parametrize(("cls", "field"), fields_with("at_least"))
@given(below=st.integers(min_value=1, max_value=10**6))
def test_a_number_below_its_bound_is_refused_naming_the_bound(cls, field, below):
    name, low = field.metadata["kafka"], field.metadata["at_least"]
    with pytest.raises(ConfigError) as error:
        build(cls, **{name: str(low - below)})
    message = str(error.value)
    assert message.startswith(f"{name}=") and f"is not valid: use a number >= {low}" in message


@pytest.mark.parametrize(("cls", "field"), fields_with("at_least"))
@given(text=st.text(min_size=1, max_size=8).filter(lambda text: not re.fullmatch(r"[+-]?[0-9]+", text.strip())))
def test_a_number_that_is_no_number_is_refused(cls, field, text):
    name = field.metadata["kafka"]
    if field.type is float:
        with contextlib.suppress(ValueError):  # "1e3", "inf" and Java's "0D" are numbers: their bounds decide
            assume(math.isnan(float(re.sub("[fFdD]$", "", text.strip()))))
    with pytest.raises(ConfigError, match=f"^{re.escape(name)}=.* is not valid: use a (whole )?number"):
        build(cls, **{name: text})


@pytest.mark.parametrize(("cls", "field"), boolean_fields())
def test_a_boolean_takes_true_and_false_in_any_case(cls, field):
    name = field.metadata["kafka"]
    for text, value in (("true", True), ("false", False), ("TRUE", True), (" False ", False)):
        assert getattr(build(cls, **{name: text}), field.name) is value


def test_every_boolean_property_is_checked():
    assert "allow.everyone.if.no.acl.found" in {param.id for param in boolean_fields()}


@pytest.mark.parametrize(("cls", "field"), boolean_fields())
@given(text=st.text(max_size=6).filter(lambda text: text.strip().lower() not in ("true", "false")))
def test_a_boolean_takes_only_true_or_false(cls, field, text):
    name = field.metadata["kafka"]
    with pytest.raises(ConfigError) as error:
        build(cls, **{name: text})
    message = str(error.value)
    assert message.startswith(f"{name}=") and message.endswith(" is not valid: use true or false")


def test_values_given_in_code_are_held_to_the_same_rules():
    with pytest.raises(ConfigError, match="auto.commit.enable=yes is not valid: use true or false"):
        LegacyConsumerConfig(group_id="g", zookeeper_connect="zk:2181", auto_commit_enable="yes")
    with pytest.raises(ConfigError, match="group.max.size=2.5 is not valid: use a whole number"):
        CoordinatorConfig(group_max_size=2.5)
    with pytest.raises(ConfigError, match="log.cleaner.min.cleanable.ratio=1.5 is not valid: use a number >= 0"):
        LogConfig(cleaner_min_cleanable_ratio=1.5)
    with pytest.raises(ConfigError, match="log.cleaner.min.cleanable.ratio=nan is not valid: use a number"):
        LogConfig(cleaner_min_cleanable_ratio=float("nan"))
    with pytest.raises(ConfigError, match="zookeeper.session.timeout.ms='' is not valid: use a whole number"):
        build(LegacyConsumerConfig, **{"zookeeper.session.timeout.ms": ""})


def test_a_listener_override_is_read_as_its_propertys_type():
    config = SecurityConfig(
        listener_security_protocol_map="CLIENT:PLAINTEXT",
        listener_overrides={"listener.name.client.allow.everyone.if.no.acl.found": "true"},
    )
    assert config.for_listener("CLIENT").config.allow_everyone_if_no_acl_found is True


@pytest.mark.parametrize("text", ["0_1", "1_000", "\u0661\u0662", "\uff11", "1.0", "0x10"])
def test_a_whole_number_is_read_as_java_reads_it(text):
    with pytest.raises(ConfigError, match="is not valid: use a whole number"):
        build(CoordinatorConfig, **{"group.max.size": text})
    assert build(CoordinatorConfig, **{"group.max.size": " +7 "}).group_max_size == 7


@pytest.mark.parametrize("text", ["1_0", "inf", "\u0661", "0.5.1", "nan", "1e"])
def test_a_number_is_read_as_java_reads_it(text):
    with pytest.raises(ConfigError, match="is not valid: use a number"):
        build(LogConfig, **{"log.cleaner.min.cleanable.ratio": text})


@pytest.mark.parametrize(("text", "value"), [("0.5", 0.5), (".5", 0.5), ("5.0E-1", 0.5), ("1", 1.0), ("0.5d", 0.5)])
def test_javas_number_forms_are_read(text, value):
    assert build(LogConfig, **{"log.cleaner.min.cleanable.ratio": text}).cleaner_min_cleanable_ratio == value


def test_values_python_callers_passed_before_are_taken_as_the_fields_type():
    config = build_config(
        ConsumerConfig,
        bootstrap_servers="h:1",
        consumer_timeout_ms=float("inf"),
        session_timeout_ms=10_000.0,
        enable_auto_commit=0,
    )
    assert (config.consumer_timeout_ms, config.session_timeout_ms, config.enable_auto_commit) == (-1, 10_000, False)
    assert type(config.session_timeout_ms) is int
    legacy = LegacyConsumerConfig(group_id="g", zookeeper_connect="zk:2181", auto_commit_enable=1)
    assert legacy.auto_commit_enable is True


@pytest.mark.parametrize(
    ("field", "value", "accepted"),
    [
        ("enable_auto_commit", 2, "true or false"),
        ("enable_auto_commit", "yes", "true or false"),
        ("max_poll_records", True, "a whole number"),
        ("session_timeout_ms", 1.5, "a whole number"),
    ],
)
def test_python_values_that_say_something_else_are_still_refused(field, value, accepted):
    with pytest.raises(ConfigError, match=f"is not valid: use {accepted}"):
        build_config(ConsumerConfig, bootstrap_servers="h:1", **{field: value})
