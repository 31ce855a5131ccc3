"""Every znode path and value codec of Kafka 0.8.2's ZooKeeper layout (legacy-zk-protocol.md §1),
and of zkcoord's own metadata under its root (coordinator nodes, offsets-partition leaders and epochs).

Writers produce the exact bytes 0.8.2 writes. Readers accept what any later Kafka writes (unknown
versions, extra fields) and raise :class:`ZnodeDecodeError` naming the znode for what 0.8.2 itself
could not read. Pure: must not import kazoo or gevent.
"""

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote, unquote_plus

from zkcoord.assign.java import immutable_map_order
from zkcoord.errors import ZkcoordError
from zkcoord.wire.limits import MAX_GROUP_ID_LENGTH, legal_name

BROKERS_PATH = "/brokers"  # where Kafka's brokers register and keep their topics
BROKER_IDS_PATH = "/brokers/ids"
BROKER_TOPICS_PATH = "/brokers/topics"
CONTROLLER_PATH = "/controller"  # the ephemeral of the live Kafka controller
CONSUMERS_PATH = "/consumers"

PATTERN_STATIC = "static"
PATTERN_WHITELIST = "white_list"
PATTERN_BLACKLIST = "black_list"
INTERNAL_TOPICS = frozenset({"__consumer_offsets"})

# Kafka's Config.validateChars: topic, group and client ids (0.8.2 Topic.legalChars, max 255).
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


class ZnodeDecodeError(ZkcoordError):
    """A znode holds data that Kafka 0.8.2 could not read either.

    ``not_json`` is True when the text is not JSON at all: 0.8.2's ``Json.parseFull`` then returns
    None (which some readers take as "empty"), while JSON of the wrong shape makes it throw.
    """

    def __init__(self, path: str, reason: str, data: bytes | None = None, not_json: bool = False):
        self.path = path
        self.reason = reason
        self.not_json = not_json
        preview = "" if data is None else f"; data={data[:120]!r}"
        super().__init__(f"cannot decode {path}: {reason}{preview}")


def is_legal_name(name: str) -> bool:
    """True for a topic, group or client id that 0.8.2's ``validateChars`` accepts (at most 255 characters)."""
    return legal_name(name, MAX_GROUP_ID_LENGTH)


# ---- paths ---------------------------------------------------------------------------------------


def broker_path(broker_id: int | str) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS_PATH}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS_PATH}/{topic}/partitions/{partition}/state"


def group_path(group: str) -> str:
    return f"{CONSUMERS_PATH}/{group}"


def ids_path(group: str) -> str:
    return f"{group_path(group)}/ids"


def consumer_path(group: str, consumer_id: str) -> str:
    return f"{ids_path(group)}/{consumer_id}"


def _under(base: str, topic: str | None) -> str:
    return base if topic is None else f"{base}/{topic}"


def owners_path(group: str, topic: str | None = None) -> str:
    return _under(f"{group_path(group)}/owners", topic)


def owner_path(group: str, topic: str, partition: int) -> str:
    return f"{owners_path(group, topic)}/{partition}"


def offsets_path(group: str, topic: str | None = None) -> str:
    return _under(f"{group_path(group)}/offsets", topic)


def offset_path(group: str, topic: str, partition: int) -> str:
    return f"{offsets_path(group, topic)}/{partition}"


_OFFSET_PATH = re.compile(r"/consumers/([^/]+)/offsets/([^/]+)/(\d+)")


def parse_offset_path(path: str) -> tuple[str, str, int] | None:
    """``(group, topic, partition)`` of an offsets znode path, or None if it is not one."""
    match = _OFFSET_PATH.fullmatch(path)
    return (match[1], match[2], int(match[3])) if match else None


# ---- JSON as 0.8.2 reads and writes it -----------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _timestamp(value: object) -> int:
    """Epoch ms written as a JSON string; anything else (never read by 0.8.2) counts as 0."""
    return int(value) if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value) else 0


def _reject_number(text: str):
    raise ValueError(f"number {text} is not a 32-bit integer")


def _int32(text: str) -> int:
    """Java's ``String.toInt``: an optional sign and ASCII digits only, within 32 bits."""
    if not re.fullmatch(r"[-+]?[0-9]+", text):
        _reject_number(text)
    value = int(text)
    if not _INT32[0] <= value <= _INT32[1]:
        _reject_number(text)
    return value


def parse_kafka_json(path: str, data: bytes | None) -> object:
    """Parse JSON the way Kafka's ``Json.parseFull`` does: every number must be a 32-bit int (§1)."""
    if data is None:
        raise ZnodeDecodeError(path, "no data", not_json=True)
    text = data.decode("utf-8", "replace")  # as ZKStringSerializer's new String(bytes, "UTF-8")
    try:
        return json.loads(text, parse_int=_int32, parse_float=_reject_number, parse_constant=_reject_number)
    except json.JSONDecodeError as error:
        raise ZnodeDecodeError(path, f"not JSON ({error})", data, not_json=True) from None
    except (ValueError, RecursionError) as error:
        raise ZnodeDecodeError(
            path, f"not JSON that Kafka 0.8.2 can read ({type(error).__name__}: {error})", data
        ) from None


def json_escape_string(text: str) -> str:
    """Kafka's ``Utils.JSONEscapeString`` (used for wildcard registrations, §2.4)."""
    escapes = {
        '"': '\\"',
        "\\": "\\\\",
        "/": "\\/",
        "\b": "\\b",
        "\f": "\\f",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
    }
    out = []
    for ch in text:
        if ch in escapes:
            out.append(escapes[ch])
        elif ord(ch) <= 0x1F or 0x7F <= ord(ch) <= 0x9F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def _encode_json_value(value) -> str:
    """Kafka's ``Json.encode``: no whitespace, strings written as given (callers escape)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, Mapping):
        return "{" + ",".join(f'"{k}":{_encode_json_value(v)}' for k, v in value.items()) + "}"
    if isinstance(value, Sequence):
        return "[" + ",".join(_encode_json_value(v) for v in value) + "]"
    raise TypeError(f"cannot encode {type(value).__name__} as Kafka JSON")


def _scala_map(**fields) -> dict:
    """Fields in the iteration order of the Scala immutable Map 0.8.2 encodes them from."""
    return {key: fields[key] for key in immutable_map_order(list(fields))}


# ---- /brokers/ids/<id> ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    host: str | None
    port: int
    jmx_port: int = -1
    timestamp_ms: int = 0
    version: int = 1
    endpoints: tuple[str, ...] = ()

    @property
    def connection_string(self) -> str | None:
        """``host:port`` to reach the broker (an IPv6 host in brackets, as Kafka's ``formatAddress``); None
        when the registration names no host (a broker without a PLAINTEXT listener)."""
        if self.host is None:
            return None
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def encode_broker_registration(broker: BrokerRegistration) -> bytes:
    """The v1 (0.8.x) registration; keys in the order 0.8.2's 5-entry Scala Map iterates (§1.1)."""
    return _encode_json_value(
        _scala_map(
            version=1,
            host=broker.host,
            port=broker.port,
            jmx_port=broker.jmx_port,
            timestamp=str(broker.timestamp_ms),
        )
    ).encode("utf-8")


def decode_broker_registration(broker_id: int, data: bytes | None) -> BrokerRegistration:
    """Read any version (v1–v5); host/port fall back to the PLAINTEXT endpoint (§1.1)."""
    path = broker_path(broker_id)
    obj = parse_kafka_json(path, data)
    if not isinstance(obj, dict):
        raise ZnodeDecodeError(path, "not a JSON object", data)
    listed = obj.get("endpoints")
    endpoints = tuple(e for e in listed if isinstance(e, str)) if isinstance(listed, list) else ()
    host, port = obj.get("host"), obj.get("port", -1)
    if host is None:
        for endpoint in endpoints:
            match = re.fullmatch(r"PLAINTEXT://\[?([^\]]*)\]?:(\d+)", endpoint)
            if match:
                host, port = match[1], int(match[2])
                break
    if not (host is None or isinstance(host, str)) or not isinstance(port, int):
        raise ZnodeDecodeError(path, "host must be a string and port an int", data)
    return BrokerRegistration(
        broker_id=broker_id,
        host=host,
        port=port,
        jmx_port=obj["jmx_port"] if _is_int(obj.get("jmx_port")) else -1,
        timestamp_ms=_timestamp(obj.get("timestamp")),
        version=obj["version"] if _is_int(obj.get("version")) else -1,
        endpoints=endpoints,
    )


# ---- /brokers/topics/<t> and partition state ------------------------------------------------------


def encode_topic_registration(replicas: Mapping[int, Sequence[int]]) -> bytes:
    """``{"version":1,"partitions":{"0":[1,2],...}}`` as AdminUtils writes it (§1.2)."""
    return encode_topic_node({"version": 1, "partitions": {p: list(r) for p, r in replicas.items()}})


def decode_topic_partitions(topic: str, data: bytes | None) -> list[int]:
    """Sorted partition numbers: only the keys of ``partitions`` matter to 0.8.2 (§1.2).

    A missing node or a missing ``partitions`` field means no partitions, not an error.
    """
    if data is None:
        return []
    path = topic_path(topic)
    obj = parse_kafka_json(path, data)
    if not isinstance(obj, dict):
        raise ZnodeDecodeError(path, "not a JSON object", data)
    partitions = obj.get("partitions")
    if partitions is None:
        return []
    if not isinstance(partitions, dict):
        raise ZnodeDecodeError(path, "partitions is not an object", data)
    try:
        return sorted(_int32(key) for key in partitions)
    except ValueError:
        raise ZnodeDecodeError(path, "a partition key is not an int", data) from None


def decode_topic_node(topic: str, data: bytes | None) -> dict:
    """The whole topic node (any version) with ``partitions`` as ``{int: [replica, ...]}``, for tools
    that rewrite it and must keep fields they do not know (``topic_id``, ``adding_replicas`` ...)."""
    path = topic_path(topic)
    obj = parse_kafka_json(path, data)
    partitions = obj.get("partitions", {}) if isinstance(obj, dict) else None
    if not isinstance(partitions, dict) or not all(isinstance(r, list) for r in partitions.values()):
        raise ZnodeDecodeError(path, "partitions is not an object of replica lists", data)
    try:
        obj["partitions"] = {_int32(p): replicas for p, replicas in partitions.items()}
    except ValueError:
        raise ZnodeDecodeError(path, "a partition key is not an int", data) from None
    return obj


def encode_topic_node(node: Mapping[str, object]) -> bytes:
    """Write back a node read with :func:`decode_topic_node`, partitions in numeric order."""
    partitions = node["partitions"]
    return _encode_json_value(
        {**node, "partitions": {str(p): partitions[p] for p in sorted(partitions)}}  # type: ignore[index]
    ).encode("utf-8")


def encode_partition_state(leader: int, isr: Sequence[int], leader_epoch: int = 0, controller_epoch: int = 1) -> bytes:
    """``/brokers/topics/<t>/partitions/<p>/state`` as 0.8.2's controller writes it (§1.3)."""
    return _encode_json_value(
        _scala_map(
            controller_epoch=controller_epoch,
            leader=leader,
            version=1,
            leader_epoch=leader_epoch,
            isr=list(isr),
        )
    ).encode("utf-8")


# ---- /consumers/<g>/ids/<consumerId> --------------------------------------------------------------


@dataclass(frozen=True)
class ConsumerRegistration:
    """A member registration. ``subscription`` keeps key order (it decides round-robin ties, §4.3)."""

    subscription: Mapping[str, int]
    pattern: str = PATTERN_STATIC
    timestamp_ms: int = 0
    version: int = 1
    extra: Mapping[str, object] = field(default_factory=dict, compare=False)

    @property
    def is_wildcard(self) -> bool:
        """TC: wildcard only if the pattern says so and the subscription is not empty (§1.4)."""
        return self.pattern in (PATTERN_WHITELIST, PATTERN_BLACKLIST) and bool(self.subscription)


def encode_consumer_registration(registration: ConsumerRegistration) -> bytes:
    """Exactly ``{"version":1,"subscription":{...},"pattern":"...","timestamp":"<ms>"}`` (§1.4).

    The subscription's keys come in the order of the Scala immutable Map 0.8.2 encodes (its Java API copies
    the application's map into one): the given order up to four topics, the HashTrieMap's past that.
    """
    for topic, streams in registration.subscription.items():
        if not _is_int(streams) or streams < 1:
            raise ValueError(f"streams for {topic!r} must be an int >= 1, not {streams!r} (§2.2)")
    escape = json_escape_string if registration.pattern != PATTERN_STATIC else str
    subscription = {
        escape(key): registration.subscription[key] for key in immutable_map_order(list(registration.subscription))
    }
    return _encode_json_value(
        {
            "version": registration.version,
            "subscription": subscription,
            "pattern": registration.pattern,
            "timestamp": str(registration.timestamp_ms),
        }
    ).encode("utf-8")


def decode_consumer_registration(group: str, consumer_id: str, data: bytes | None) -> ConsumerRegistration:
    """TC ``constructTopicCount``: only ``pattern`` and ``subscription`` are read; both are required."""
    path = consumer_path(group, consumer_id)
    obj = parse_kafka_json(path, data)
    if not isinstance(obj, dict):
        raise ZnodeDecodeError(path, "not a JSON object", data)
    if "pattern" not in obj or "subscription" not in obj:
        raise ZnodeDecodeError(path, "missing pattern or subscription (KafkaException in 0.8.2)", data)
    pattern, subscription = obj["pattern"], obj["subscription"]
    if not isinstance(pattern, str) or not isinstance(subscription, dict):
        raise ZnodeDecodeError(path, "pattern must be a string and subscription an object", data)
    if not all(_is_int(n) for n in subscription.values()):
        raise ZnodeDecodeError(path, "stream counts must be integers", data)
    return ConsumerRegistration(
        subscription=subscription,
        pattern=pattern,
        timestamp_ms=_timestamp(obj.get("timestamp")),
        version=obj["version"] if _is_int(obj.get("version")) else -1,
        extra={k: v for k, v in obj.items() if k not in ("version", "subscription", "pattern", "timestamp")},
    )


# ---- owners and offsets ---------------------------------------------------------------------------


def encode_owner(thread_id: str) -> bytes:
    return thread_id.encode("utf-8")


def decode_owner(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def encode_offset(offset: int) -> bytes:
    """``Long.toString`` of the next offset to consume (§1.6)."""
    return str(int(offset)).encode("ascii")


def decode_offset(path: str, data: bytes | None) -> int:
    """``toLong``; a non-numeric value makes the read fail as in 0.8.2 (§1.6)."""
    text = (data or b"").decode("ascii", "replace")
    if not re.fullmatch(r"[-+]?\d{1,19}", text) or not _INT64[0] <= int(text) <= _INT64[1]:
        raise ZnodeDecodeError(path, "offset is not a 64-bit decimal integer", data)
    return int(text)


# ---- dynamic configs of later Kafka's ZooKeeper mode (ZkData.scala): SCRAM credentials of users -------

CONFIG_USERS_PATH = "/config/users"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
# ZkData.SensitiveRootPaths: with zookeeper.set.acl only their creator may even read them (matched by prefix).
SENSITIVE_ROOT_PATHS = (CONFIG_USERS_PATH, "/config/brokers", "/delegation_token/tokens")


def sanitize_entity_name(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: Java's URL encoding with ``*`` and spaces percent-encoded."""
    return quote(name, safe="-_.*").replace("*", "%2A").replace("~", "%7E")


def desanitize_entity_name(sanitized: str) -> str:
    """Kafka's ``Sanitizer.desanitize`` (Java's URLDecoder: '+' is a space)."""
    return unquote_plus(sanitized)


def user_config_path(user: str) -> str:
    """``ConfigEntityZNode.path("users", sanitized user)``."""
    return f"{CONFIG_USERS_PATH}/{sanitize_entity_name(user)}"


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """``ConfigEntityZNode.encode``: ``{"version":1,"config":{...}}``."""
    return json.dumps({"version": 1, "config": dict(config)}, separators=(",", ":"), ensure_ascii=False).encode()


def decode_entity_config(path: str, data: bytes | None) -> dict[str, str]:
    """``ConfigEntityZNode.decode``: the ``config`` object, every value a string; no data is an empty config."""
    if not data:
        return {}
    try:
        node = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ZnodeDecodeError(path, f"not JSON ({type(error).__name__})", not_json=True) from None
    config = node.get("config") if isinstance(node, dict) else None
    if not isinstance(config, dict):  # Kafka reads no config object as an empty config
        return {}
    if not all(isinstance(value, str) for value in config.values()):
        raise ZnodeDecodeError(path, "config values are not all strings")
    return config


def encode_user_config_change(user: str) -> bytes:
    """``ConfigEntityChangeNotificationSequenceZNode.encode`` for a user: brokers reload that user's config."""
    entity_path = f"users/{sanitize_entity_name(user)}"
    return json.dumps({"version": 2, "entity_path": entity_path}, separators=(",", ":")).encode()


# ---- zkcoord's own metadata under its root (architecture.md "ZooKeeper use") -------------------------
#
# Not part of Kafka's layout: compact JSON objects with a ``version`` field. Readers accept later
# versions and extra fields, and raise ZnodeDecodeError for anything without the fields they need.

DEFAULT_ROOT = "/zkcoord"


def _root(root: str) -> str:
    if not root.startswith("/"):
        raise ValueError(f"the zkcoord root must be an absolute znode path, not {root!r}")
    return root.rstrip("/")


def coordinator_nodes_path(root: str = DEFAULT_ROOT) -> str:
    return f"{_root(root)}/nodes"


def coordinator_node_path(root: str, node_id: int) -> str:
    """Ephemeral registration of a live coordinator node."""
    return f"{coordinator_nodes_path(root)}/{node_id}"


def offsets_config_path(root: str = DEFAULT_ROOT) -> str:
    """Persistent: the number of offsets partitions every node must agree on."""
    return f"{_root(root)}/offsets/config"


def _offsets_partition_path(root: str, partition: int) -> str:
    return f"{_root(root)}/offsets/partitions/{partition}"


def partition_leader_path(root: str, partition: int) -> str:
    """Ephemeral: the node leading an offsets partition, and its epoch."""
    return f"{_offsets_partition_path(root, partition)}/leader"


def partition_epoch_path(root: str, partition: int) -> str:
    """Persistent: the last epoch handed out for an offsets partition (only ever increases)."""
    return f"{_offsets_partition_path(root, partition)}/epoch"


def _encode_compact(fields: Mapping[str, object]) -> bytes:
    return json.dumps(dict(fields), separators=(",", ":")).encode("utf-8")


def _decode_object(path: str, data: bytes | None, fields: Mapping[str, type]) -> dict:
    """A JSON object with an int ``version`` ≥ 1 and each of ``fields`` of its type (ints are never bools)."""
    if data is None:
        raise ZnodeDecodeError(path, "no data", not_json=True)
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ZnodeDecodeError(path, f"not JSON ({type(error).__name__}: {error})", data, not_json=True) from None
    if not isinstance(obj, dict):
        raise ZnodeDecodeError(path, "not a JSON object", data)
    for name, kind in {"version": int, **fields}.items():
        value = obj.get(name)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ZnodeDecodeError(path, f"{name} must be a {kind.__name__}, not {value!r}", data)
    if obj["version"] < 1:
        raise ZnodeDecodeError(path, f"unknown version {obj['version']}", data)
    return obj


@dataclass(frozen=True)
class KafkaListenerAddress:
    """Where a node serves Kafka's protocol: its bootstrap ``host:port`` and the first port of its gateway range
    (upstream broker ``b`` is at ``gateway_port + b - lowest broker id``, docs/kafka-protocol.md)."""

    host: str
    port: int
    gateway_port: int
    gateway_ports: int  # how many: broker ids lowest .. lowest + gateway_ports - 1 are served


def encode_coordinator_node(
    host: str, port: int, identity: str | None = None, kafka: KafkaListenerAddress | None = None
) -> bytes:
    """``{"version":1,"host":"...","port":9092,"identity":"...","kafka_host":...}``; ``identity`` names the
    node's log directory copy, ``kafka_*`` its Kafka listener (readers that do not know a field ignore it)."""
    fields: dict[str, object] = {"version": 1, "host": host, "port": port}
    if identity is not None:
        fields["identity"] = identity
    if kafka is not None:
        fields.update(
            kafka_host=kafka.host,
            kafka_port=kafka.port,
            kafka_gateway_port=kafka.gateway_port,
            kafka_gateway_ports=kafka.gateway_ports,
        )
    return _encode_compact(fields)


def decode_coordinator_node_kafka(path: str, data: bytes | None) -> KafkaListenerAddress | None:
    """The Kafka listener a node registration names, or None for a node without one."""
    obj = _decode_object(path, data, {})
    if "kafka_port" not in obj:
        return None
    names = ("kafka_host", "kafka_port", "kafka_gateway_port", "kafka_gateway_ports")
    fields = {name: obj.get(name) for name in names}
    if not isinstance(fields["kafka_host"], str) or not all(
        type(fields[name]) is int and 0 < fields[name] <= 65535 for name in names[1:]
    ):
        raise ZnodeDecodeError(path, "kafka_host must be a string and kafka ports within 1..65535", data)
    return KafkaListenerAddress(*(fields[name] for name in names))


def decode_coordinator_node(path: str, data: bytes | None) -> tuple[str, int]:
    """``(host, port)`` of a node registration."""
    obj = _decode_object(path, data, {"host": str, "port": int})
    if not obj["host"] or not 0 <= obj["port"] <= 65535:
        raise ZnodeDecodeError(path, "host must not be empty and port must be within 0..65535", data)
    return obj["host"], obj["port"]


def decode_coordinator_node_identity(path: str, data: bytes | None) -> str | None:
    """The identity a node registration carries (None: written without one, by an older zkcoord)."""
    identity = _decode_object(path, data, {}).get("identity")
    if identity is not None and not isinstance(identity, str):
        raise ZnodeDecodeError(path, f"identity must be a str, not {identity!r}", data)
    return identity


def encode_offsets_config(partitions: int) -> bytes:
    """``{"version":1,"partitions":50}``"""
    return _encode_compact({"version": 1, "partitions": partitions})


def decode_offsets_config(path: str, data: bytes | None) -> int:
    """The stored ``offsets.topic.num.partitions``."""
    partitions = _decode_object(path, data, {"partitions": int})["partitions"]
    if partitions < 1:
        raise ZnodeDecodeError(path, f"partitions must be at least 1, not {partitions}", data)
    return partitions


def encode_partition_leader(node_id: int, epoch: int) -> bytes:
    """``{"version":1,"node_id":2,"epoch":7}``"""
    return _encode_compact({"version": 1, "node_id": node_id, "epoch": epoch})


def decode_partition_leader(path: str, data: bytes | None) -> tuple[int, int]:
    """``(node_id, epoch)`` of a partition's leader."""
    obj = _decode_object(path, data, {"node_id": int, "epoch": int})
    if obj["node_id"] < 0 or obj["epoch"] < 1:
        raise ZnodeDecodeError(path, "node_id must be ≥ 0 and epoch ≥ 1", data)
    return obj["node_id"], obj["epoch"]


def encode_partition_epoch(epoch: int) -> bytes:
    """``{"version":1,"epoch":7}``"""
    return _encode_compact({"version": 1, "epoch": epoch})


def decode_partition_epoch(path: str, data: bytes | None) -> int:
    """The last epoch handed out for a partition (0 before the first election)."""
    epoch = _decode_object(path, data, {"epoch": int})["epoch"]
    if epoch < 0:
        raise ZnodeDecodeError(path, f"epoch must be ≥ 0, not {epoch}", data)
    return epoch


def migration_groups_path(root: str = DEFAULT_ROOT) -> str:
    return f"{_root(root)}/migration/groups"


def migration_path(root: str, group: str) -> str:
    """Persistent: a group's offset-migration state (``zkcoord.migration.phases``), changed by version."""
    return f"{migration_groups_path(root)}/{group}"


def legacy_adverts_path(root: str, group: str) -> str:
    return f"{_root(root)}/migration/members/{group}"


def legacy_advert_path(root: str, group: str, consumer_id: str) -> str:
    """Ephemeral, beside the byte-exact 0.8.2 registration: how a zkcoord legacy member stores offsets."""
    return f"{legacy_adverts_path(root, group)}/{consumer_id}"


def encode_legacy_advert(phase: str, epoch: int, offsets_storage: str, dual_commit: bool) -> bytes:
    """``{"version":1,"phase":"DUAL_WRITE","epoch":2,"offsets_storage":"kafka","dual_commit":true}``"""
    return _encode_compact(
        {"version": 1, "phase": phase, "epoch": epoch, "offsets_storage": offsets_storage, "dual_commit": dual_commit}
    )


def decode_legacy_advert(path: str, data: bytes | None) -> tuple[str, int]:
    """``(phase name, epoch)`` the member follows (``phase`` "" and epoch -1: no migration state yet)."""
    obj = _decode_object(path, data, {"phase": str, "epoch": int})
    return obj["phase"], obj["epoch"]


def node_acks_path(root: str, group: str) -> str:
    return f"{_root(root)}/migration/nodes/{group}"


def node_ack_path(root: str, group: str, node_id: int | str) -> str:
    """Ephemeral, while a coordinator node caches the group's migration state: the epoch it has applied."""
    return f"{node_acks_path(root, group)}/{node_id}"


def encode_node_ack(epoch: int) -> bytes:
    """``{"version":1,"epoch":7}`` (epoch -1: the group had no migration state when the node read it)."""
    return _encode_compact({"version": 1, "epoch": epoch})


def decode_node_ack(path: str, data: bytes | None) -> int:
    """The migration epoch a node has applied."""
    return _decode_object(path, data, {"epoch": int})["epoch"]


# ---- mixed groups: the coordinator's members in a 0.8.2 group (docs/migration.md "Mixed groups") ------------


def bridge_groups_path(root: str = DEFAULT_ROOT) -> str:
    return f"{_root(root)}/bridge/groups"


def bridge_path(root: str, group: str) -> str:
    """Persistent while a group may be mixed: the coordinator members registered in the 0.8.2 group, the
    0.8.2 strategy they are assigned by, and the offsets-partition epoch of the node that last wrote it. Every
    registration and owner znode the bridge writes changes in one transaction with this znode's version, so
    a deposed node's write fails (docs/migration.md)."""
    return f"{bridge_groups_path(root)}/{group}"


@dataclass(frozen=True)
class BridgeMember:
    """A coordinator member registered in the 0.8.2 group under ``consumer_id`` (thread ``<consumer_id>-0``)."""

    consumer_id: str
    member_id: str
    instance_id: str | None = None
    topics: tuple[str, ...] = ()


@dataclass(frozen=True)
class BridgeState:
    strategy: str = "range"
    epoch: int = -1  # the offsets-partition leader epoch of the last writer (-1: set up, no node wrote yet)
    members: tuple[BridgeMember, ...] = ()

    @property
    def consumer_ids(self) -> frozenset[str]:
        return frozenset(member.consumer_id for member in self.members)


def encode_bridge_state(state: BridgeState) -> bytes:
    """``{"version":1,"strategy":"range","epoch":3,"members":[{"consumer_id":..,"member_id":..,"instance_id":..,
    "topics":[..]}]}``"""
    members = [
        {"consumer_id": m.consumer_id, "member_id": m.member_id, "instance_id": m.instance_id, "topics": list(m.topics)}
        for m in state.members
    ]
    return _encode_compact({"version": 1, "strategy": state.strategy, "epoch": state.epoch, "members": members})


def decode_bridge_state(path: str, data: bytes | None) -> BridgeState:
    obj = _decode_object(path, data, {"strategy": str, "epoch": int, "members": list})
    members = []
    for entry in obj["members"]:
        if (
            not isinstance(entry, dict)
            or not all(isinstance(entry.get(k), str) for k in ("consumer_id", "member_id"))
            or not isinstance(entry.get("instance_id"), str | None)
            or not isinstance(entry.get("topics", []), list)
            or not all(isinstance(t, str) for t in entry.get("topics", []))
        ):
            raise ZnodeDecodeError(path, f"not a bridge member: {entry!r}", data)
        members.append(
            BridgeMember(
                entry["consumer_id"], entry["member_id"], entry.get("instance_id"), tuple(entry.get("topics", []))
            )
        )
    return BridgeState(obj["strategy"], obj["epoch"], tuple(members))
