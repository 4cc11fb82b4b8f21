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
    "logs": model.LogPoll,
    "stacks": model.StackPoll,
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
    return _decoder(cls)(data, path)


Decoder = typing.Callable[[Any, str], Any]


@cache
def _decoder(cls: Any) -> Decoder:
    """A decoding function per type hint, built once: replays read thousands of readings, and
    walking the type hints for every value would dominate start-up."""
    if cls is Any:
        return lambda data, path: data
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType):
        return _union_decoder(cls)
    if origin is tuple:
        return _tuple_decoder(cls)
    if origin is dict:
        value_decoder = _decoder(typing.get_args(cls)[1])

        def dict_decoder(data: Any, path: str) -> Any:
            if not isinstance(data, dict):
                raise ValueError(f"{path}: expected an object")
            return {k: value_decoder(v, f"{path}.{k}") for k, v in data.items()}
        return dict_decoder
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        return _dataclass_decoder(cls)
    if cls is float:
        def float_decoder(data: Any, path: str) -> float:
            if isinstance(data, (int, float)) and not isinstance(data, bool):
                return float(data)
            raise ValueError(f"{path}: expected a number, got {data!r:.60}")
        return float_decoder
    if cls in (int, str, bool):
        def scalar_decoder(data: Any, path: str) -> Any:
            if isinstance(data, cls) and not (cls is int and isinstance(data, bool)):
                return data
            raise ValueError(f"{path}: expected {cls.__name__}, got {data!r:.60}")
        return scalar_decoder
    if cls is type(None):
        def none_decoder(data: Any, path: str) -> None:
            if data is not None:
                raise ValueError(f"{path}: expected null")
        return none_decoder
    return lambda data, path: data


def _union_decoder(cls: Any) -> Decoder:
    args = typing.get_args(cls)
    optional = type(None) in args
    decoders = [_decoder(a) for a in args if a is not type(None)]

    def union_decoder(data: Any, path: str) -> Any:
        if data is None and optional:
            return None
        errors = []
        for decode in decoders:
            try:
                return decode(data, path)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError(f"{path}: no type of {cls} fits: {'; '.join(errors)}")
    return union_decoder


def _tuple_decoder(cls: Any) -> Decoder:
    args = typing.get_args(cls)
    if len(args) == 2 and args[1] is Ellipsis:
        item = _decoder(args[0])

        def var_tuple_decoder(data: Any, path: str) -> tuple:
            if not isinstance(data, list):
                raise ValueError(f"{path}: expected a list, got {type(data).__name__}")
            return tuple(item(v, f"{path}[{i}]") for i, v in enumerate(data))
        return var_tuple_decoder
    items = [_decoder(a) for a in args]

    def fixed_tuple_decoder(data: Any, path: str) -> tuple:
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a list, got {type(data).__name__}")
        if len(items) != len(data):
            raise ValueError(f"{path}: expected {len(items)} items, got {len(data)}")
        return tuple(d(v, f"{path}[{i}]") for i, (d, v) in enumerate(zip(items, data)))
    return fixed_tuple_decoder


def _dataclass_decoder(cls: type) -> Decoder:
    hints = _hints(cls)
    fields = [(f.name, _decoder(hints[f.name])) for f in dataclasses.fields(cls)]

    def dataclass_decoder(data: Any, path: str) -> Any:
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected an object for {cls.__name__}")
        kwargs = {name: decode(data[name], f"{path}.{name}")
                  for name, decode in fields if name in data}
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise ValueError(f"{path}: {exc}") from None
    return dataclass_decoder


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
