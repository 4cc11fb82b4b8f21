"""Model value types to and from plain JSON data (recordings, ``--json`` output).

Generic over the frozen dataclasses in ``rltui.model``: fields are read from the type hints, so a
field added to a model type is serialised without touching this module. Decoding is tolerant of
unknown keys (a newer writer) and of missing ones (defaults), and strict about types it cannot
build, raising ``ValueError`` with the path of the bad value.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Any

from rltui import model

# Payload type per source name, for Reading.payload.
PAYLOAD_TYPES: dict[str, type] = {
    "gpus": model.GpuPoll,
    "procs": model.ProcPoll,
}


def register_payload(source: str, cls: type) -> None:
    """Later sources (logs, stacks) register their payload type here."""
    PAYLOAD_TYPES[source] = cls


def to_data(value: Any) -> Any:
    """Dataclasses, tuples and dicts to JSON-ready data (dataclasses become dicts)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_data(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(to_data(v) for v in value)
    if isinstance(value, dict):
        return {str(k): to_data(v) for k, v in value.items()}
    return value


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(model) | vars(typing))


def from_data(cls: Any, data: Any, path: str = "$") -> Any:
    """Build ``cls`` (a type hint) from JSON data produced by ``to_data``."""
    if cls is Any:
        return data
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(cls)
        if data is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return from_data(arg, data, path)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError(f"{path}: no type of {cls} fits: {'; '.join(errors)}")
    if origin is tuple:
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a list, got {type(data).__name__}")
        args = typing.get_args(cls)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_data(args[0], v, f"{path}[{i}]") for i, v in enumerate(data))
        if len(args) != len(data):
            raise ValueError(f"{path}: expected {len(args)} items, got {len(data)}")
        return tuple(from_data(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, data)))
    if origin is dict:
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected an object")
        _, vt = typing.get_args(cls)
        return {k: from_data(vt, v, f"{path}.{k}") for k, v in data.items()}
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected an object for {cls.__name__}")
        hints = _hints(cls)
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name in data:
                kwargs[f.name] = from_data(hints[f.name], data[f.name], f"{path}.{f.name}")
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise ValueError(f"{path}: {exc}") from None
    if cls is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
        raise ValueError(f"{path}: expected a number, got {data!r:.60}")
    if cls in (int, str, bool):
        if isinstance(data, cls) and not (cls is int and isinstance(data, bool)):
            return data
        raise ValueError(f"{path}: expected {cls.__name__}, got {data!r:.60}")
    if cls is type(None):
        if data is None:
            return None
        raise ValueError(f"{path}: expected null")
    return data


def reading_to_data(reading: model.Reading) -> dict[str, Any]:
    return to_data(reading)


def reading_from_data(data: Any, path: str = "$") -> model.Reading:
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a reading must be an object")
    source = data.get("source")
    if not isinstance(source, str):
        raise ValueError(f"{path}.source: missing or not a string")
    payload_type = PAYLOAD_TYPES.get(source)
    payload = data.get("payload")
    if payload is not None and payload_type is not None:
        payload = from_data(payload_type, payload, f"{path}.payload")
    return model.Reading(
        source=source,
        timestamp=from_data(float, data.get("timestamp"), f"{path}.timestamp"),
        status=from_data(str, data.get("status", model.OK), f"{path}.status"),
        payload=payload,
        message=str(data.get("message", "")),
        remedy=str(data.get("remedy", "")),
    )
