"""Typed configs that accept Kafka's property names ("group.id") and snake_case aliases ("group_id").

Each config is a frozen dataclass whose field metadata names the Kafka property. Unknown keys are
logged and ignored, as Kafka's VerifiableProperties does, so operators can reuse JVM config files.
"""

import dataclasses
import logging
import typing
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from zkcoord.errors import ConfigError
from zkcoord.model import Address

log = logging.getLogger(__name__)

C = TypeVar("C")


def kafka_field(name: str, default: Any = dataclasses.MISSING, doc: str = "", secret: bool = False) -> Any:
    """A dataclass field known to operators as the Kafka property ``name``; a ``secret`` one (a password) is left
    out of the config's repr."""
    return dataclasses.field(default=default, repr=not secret, metadata={"kafka": name, "doc": doc})


def kafka_names(cls: type) -> dict[str, str]:
    """Kafka property name → field name."""
    return {f.metadata["kafka"]: f.name for f in dataclasses.fields(cls) if "kafka" in f.metadata}


def _coerce(field: dataclasses.Field, value: Any) -> Any:
    """Property-file values arrive as strings; turn them into the field's type."""
    if not isinstance(value, str):
        return value
    kinds = set(typing.get_args(field.type)) | {field.type}
    try:
        if bool in kinds:
            if value.strip().lower() not in ("true", "false"):
                raise ValueError(value)
            return value.strip().lower() == "true"
        if int in kinds:
            return int(value.strip())
        if float in kinds:
            return float(value.strip())
    except ValueError:
        raise ConfigError(f"{field.metadata.get('kafka', field.name)}: {value!r} is not valid here") from None
    return value


def build_config(cls: type[C], properties: Mapping[str, Any] | None = None, **overrides: Any) -> C:
    """Build ``cls`` from Kafka-named or snake_case properties; keyword overrides win."""
    by_kafka = kafka_names(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key, value in {**(properties or {}), **overrides}.items():
        name = by_kafka.get(key) or (key if key in fields else by_kafka.get(key.replace("_", ".")))
        if name is None:
            log.warning("property %s is not used by %s; ignored", key, cls.__name__)
            continue
        values[name] = _coerce(fields[name], value)
    missing = [
        f.metadata.get("kafka", f.name)
        for f in fields.values()
        if f.name not in values and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(f"missing required propert{'y' if len(missing) == 1 else 'ies'}: {', '.join(missing)}")
    return cls(**values)


def parse_bootstrap_servers(servers: str | Iterable[str]) -> list[Address]:
    """``"h1:9092,h2:9092"`` or ``["h1:9092", ...]`` → ``[("h1", 9092), ...]`` (IPv6 as ``[::1]:9092``)."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    addresses = []
    for item in (text.strip() for text in items):
        if not item:
            continue
        host, separator, port = item.rpartition(":")
        if not separator or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"bootstrap.servers: {item!r} is not host:port")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise ConfigError("bootstrap.servers: no host:port given")
    return addresses
