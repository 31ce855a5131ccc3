"""Typed configs that accept Kafka's property names ("group.id") and snake_case aliases ("group_id").

Each config is a frozen dataclass whose field metadata names the Kafka property. Unknown keys are
logged and ignored, as Kafka's VerifiableProperties does, so operators can reuse JVM config files; a value a
property does not take is refused at load, naming the values it takes (:func:`check_values`).
"""

import dataclasses
import functools
import logging
import math
import re
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from zkcoord.errors import ConfigError
from zkcoord.model import Address

log = logging.getLogger(__name__)

C = TypeVar("C")

# What Java's Integer.parseInt and Double.parseDouble take (Kafka trims first): Python's int() and float() also
# take "1_000", other scripts' digits and "inf", which a JVM reading the same file refuses.
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")


def kafka_field(
    name: str,
    default: Any = dataclasses.MISSING,
    doc: str = "",
    secret: bool = False,
    choices: Sequence[str] = (),
    at_least: float | None = None,
    at_most: float | None = None,
) -> Any:
    """A dataclass field known to operators as the Kafka property ``name``; a ``secret`` one (a password) is left
    out of the config's repr. :func:`check_values` holds its value to its type, ``choices`` and bounds."""
    metadata = {"kafka": name, "doc": doc, "choices": tuple(choices), "at_least": at_least, "at_most": at_most}
    return dataclasses.field(default=default, repr=not secret, metadata=metadata)


def invalid_value(name: str, value: Any, accepted: str) -> ConfigError:
    """The error for a value ``name`` does not take, in one wording: ``name=value is not valid: use accepted``
    (a value that would not read plainly, empty or with spaces or control characters, is quoted)."""
    plain = not isinstance(value, str) or (value.isprintable() and value and value.strip() == value)
    return ConfigError(f"{name}={value if plain else repr(value)} is not valid: use {accepted}")


def one_of(choices: Sequence[str]) -> str:
    """``a, b or c``: the accepted values, as an error message names them."""
    return " or ".join(filter(None, (", ".join(choices[:-1]), choices[-1])))


@functools.cache
def _field_types(cls: type) -> dict[str, set]:
    """Field name → the types it takes (``int | None`` takes int and NoneType), annotations resolved."""
    hints = typing.get_type_hints(cls)
    return {f.name: set(typing.get_args(hints[f.name])) | {hints[f.name]} for f in dataclasses.fields(cls)}


def _normalized(name: str, value: Any, kinds: set) -> Any:
    """``value`` as the field's type, or a ConfigError: what Python callers passed before values were checked
    still works (``1``/``0`` for a boolean, as kafka-python takes truthy values; ``6000.0`` for a whole number)."""
    if value is None and type(None) in kinds:
        return value
    if bool in kinds:
        if type(value) is bool:
            return value
        if type(value) is int and value in (0, 1):
            return bool(value)
        raise invalid_value(name, value, "true or false")
    if int in kinds and float not in kinds:
        if type(value) is float and value.is_integer():
            return int(value)
        if type(value) is not int:
            raise invalid_value(name, value, "a whole number")
    if float in kinds and (type(value) is bool or not isinstance(value, int | float) or math.isnan(value)):
        raise invalid_value(name, value, "a number")
    return value


def check_values(config: Any) -> None:
    """Refuse a Kafka-named field whose value is not of its type, not one of its ``choices`` or out of its bounds,
    with a ConfigError naming what it takes; a value of another type that says the same (``1`` for true, ``2.0``
    for 2) is stored as the field's type. None passes where the field's default is None (unset)."""
    types = _field_types(type(config))
    for field in dataclasses.fields(config):
        if "kafka" not in field.metadata:
            continue
        name, value = field.metadata["kafka"], getattr(config, field.name)
        value = _normalized(name, value, types[field.name])
        object.__setattr__(config, field.name, value)
        if value is None or type(value) is bool:
            continue
        choices = field.metadata.get("choices")
        if choices and value not in choices:
            raise invalid_value(name, value, one_of(choices))
        low, high = field.metadata.get("at_least"), field.metadata.get("at_most")
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = " and ".join(
                text for text in (low is not None and f">= {low}", high is not None and f"<= {high}") if text
            )
            raise invalid_value(name, value, f"a number {bounds}")


def kafka_names(cls: type) -> dict[str, str]:
    """Kafka property name → field name."""
    return {f.metadata["kafka"]: f.name for f in dataclasses.fields(cls) if "kafka" in f.metadata}


def coerce(cls: type, field_name: str, value: Any) -> Any:
    """A property-file value (a string) turned into the type of ``cls``'s field ``field_name``, as Java reads it;
    any other value is left to :func:`check_values`."""
    if not isinstance(value, str):
        return value
    kinds = _field_types(cls)[field_name]
    name = next(f.metadata.get("kafka", f.name) for f in dataclasses.fields(cls) if f.name == field_name)
    text = value.strip()
    if bool in kinds:
        if text.lower() not in ("true", "false"):
            raise invalid_value(name, value, "true or false")
        return text.lower() == "true"
    if int in kinds and float not in kinds:
        if not _JAVA_INT.fullmatch(text):
            raise invalid_value(name, value, "a whole number")
        return int(text)
    if float in kinds:
        if not _JAVA_DOUBLE.fullmatch(text):
            raise invalid_value(name, value, "a number")
        return float(text.rstrip("fFdD"))
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
        values[name] = coerce(cls, name, value)
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
