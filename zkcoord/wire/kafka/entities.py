"""kio entities to and from plain data, whatever the version: the one place that knows kio's value types.

kio has one frozen dataclass per API version, with enums for error codes and timedeltas for durations. The
group APIs are translated through plain dicts instead: :func:`to_plain` reads any entity into dicts, lists and
ints; :func:`build` makes the entity of a given version from a dict that may carry more fields than that
version has (the extra ones are the newer versions' and are dropped, as Kafka's generated code does).

Pure: imports only kio.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import typing

from kio.schema.errors import ErrorCode as KioErrorCode

_MS = datetime.timedelta(milliseconds=1)
_NON_NULL_DEFAULTS = {str: "", bytes: b""}


def to_plain(value: object) -> object:
    """An entity as dicts (by field name), lists, ints (error codes, milliseconds), strings and bytes."""
    names = _field_names(type(value))
    if names is not None:
        return {name: to_plain(getattr(value, name)) for name in names}
    if isinstance(value, tuple):
        return [to_plain(item) for item in value]
    if isinstance(value, KioErrorCode):
        return int(value.value)
    if isinstance(value, datetime.timedelta):
        return value // _MS
    return value


@functools.cache
def _field_names(cls: type) -> tuple[str, ...] | None:
    # Asked for every value read: dataclasses.fields() each time was most of what reading a request cost.
    return tuple(field.name for field in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) else None


@functools.cache
def _hints(cls: type) -> dict[str, object]:
    hints = typing.get_type_hints(cls)
    return {field.name: hints[field.name] for field in dataclasses.fields(cls)}


def item_class(cls: type, name: str) -> type:
    """The entity class of the items of ``cls``'s tuple field ``name`` (Metadata's brokers, say)."""
    hint = _hints(cls)[name]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        (hint,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    return typing.get_args(hint)[0]


@functools.cache
def _converter(hint: object) -> typing.Callable[[object], object]:
    """How a plain value becomes the field's value, worked out once per type hint."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        convert = _converter(inner)
        return lambda value: None if value is None else convert(value)
    # A None for a field this version cannot null is Kafka's default there ("" for names, as Kafka writes).
    default = _NON_NULL_DEFAULTS.get(hint)
    if origin is tuple:
        item = _converter(typing.get_args(hint)[0])
        return lambda value: default if value is None else tuple(item(element) for element in value)
    if dataclasses.is_dataclass(hint):
        return lambda value: default if value is None else build(hint, value)
    if hint is KioErrorCode:
        return lambda value: default if value is None else KioErrorCode(value)
    if isinstance(hint, type) and issubclass(hint, datetime.timedelta):
        return lambda value: default if value is None else hint.parse(datetime.timedelta(milliseconds=value))
    return lambda value: default if value is None else value


@functools.cache
def _builders(cls: type) -> tuple[tuple[str, typing.Callable[[object], object]], ...]:
    return tuple((name, _converter(hint)) for name, hint in _hints(cls).items())


def build(cls: type, plain: typing.Mapping[str, object]):
    """The entity ``cls`` from ``plain``: fields it lacks take their defaults, fields ``cls`` lacks are dropped."""
    return cls(**{name: convert(plain[name]) for name, convert in _builders(cls) if name in plain})
