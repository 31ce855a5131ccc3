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
    if dataclasses.is_dataclass(value):
        return {field.name: to_plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return [to_plain(item) for item in value]
    if isinstance(value, KioErrorCode):
        return int(value.value)
    if isinstance(value, datetime.timedelta):
        return value // _MS
    return value


@functools.cache
def _hints(cls: type) -> dict[str, object]:
    hints = typing.get_type_hints(cls)
    return {field.name: hints[field.name] for field in dataclasses.fields(cls)}


def _convert(hint: object, value: object) -> object:
    origin = typing.get_origin(hint)
    if value is None:
        # A None for a field this version cannot null is Kafka's default there ("" for names, as Kafka writes).
        return _NON_NULL_DEFAULTS.get(hint) if origin not in (typing.Union, types.UnionType) else None
    if origin in (typing.Union, types.UnionType):
        (hint,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        origin = typing.get_origin(hint)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        return tuple(_convert(item, element) for element in value)
    if dataclasses.is_dataclass(hint):
        return build(hint, value)
    if hint is KioErrorCode:
        return KioErrorCode(value)
    if isinstance(hint, type) and issubclass(hint, datetime.timedelta):
        return hint.parse(datetime.timedelta(milliseconds=value))
    return value


def build(cls: type, plain: typing.Mapping[str, object]):
    """The entity ``cls`` from ``plain``: fields it lacks take their defaults, fields ``cls`` lacks are dropped."""
    values = {}
    for name, hint in _hints(cls).items():
        if name in plain:
            values[name] = _convert(hint, plain[name])
    return cls(**values)
