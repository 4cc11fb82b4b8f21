"""Model value types to and from plain JSON data (recordings, ``--json`` output).

Generic over the frozen msgspec Structs in ``rltui.model``: fields are read from the type hints, so a
field added to a model type is serialised without touching this module. Decoding is tolerant of
unknown keys (a newer writer) and of missing ones (defaults), and strict about types: a value it
cannot build raises ``ValueError`` that names the field and where it is
(``line 7.payload.procs[3].rank: expected int | null, got str``).

Decoding is msgspec's: it builds the model's Structs from their type hints in C. A reading
is a tagged union on its ``source``: one msgspec Struct per registered payload type
(``PAYLOAD_TYPES``), so a reading's payload is decoded into its model type in the same pass,
straight from the JSON bytes (``reading_from_json``) or from data already parsed
(``reading_from_data``). JSON that msgspec does not parse but Python's ``json`` does (``NaN``
and ``Infinity``, which Python writes for a float that is not finite; a lone surrogate escape;
a number beyond a 64-bit float) is parsed with ``json`` and then decoded the same way.

Encoding stays Python's ``json`` over plain data, byte for byte as before: ``to_data`` walks any
value, and ``reading_to_data`` (the hot path of recording and of node agents) lets msgspec build
the same data.
"""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from typing import Any

import msgspec

from rltui import model

# Payload type per source name, for Reading.payload.
PAYLOAD_TYPES: dict[str, type] = {
    "gpus": model.GpuPoll,
    "procs": model.ProcPoll,
    "logs": model.LogPoll,
    "stacks": model.StackPoll,
    "flight_recorder": model.FrPoll,
}


def register_payload(source: str, cls: type) -> None:
    """Later sources (logs, stacks) register their payload type here."""
    PAYLOAD_TYPES[source] = cls


# -- encoding ------------------------------------------------------------------------------------

def to_data(value: Any) -> Any:
    """Dataclasses, tuples and dicts to JSON-ready data (dataclasses become dicts)."""
    if isinstance(value, msgspec.Struct):
        return {name: to_data(getattr(value, name)) for name in value.__struct_fields__}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_data(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(to_data(v) for v in value)
    if isinstance(value, dict):
        return {str(k): to_data(v) for k, v in value.items()}
    return value


def _unknown(value: Any) -> Any:
    raise TypeError(type(value).__name__)


# The model's Structs: their fields hold only what msgspec writes as ``to_data`` does (no sets
# to sort, no dicts with keys to turn into strings; a test holds the model to that).
MODEL_TYPES = frozenset(v for v in vars(model).values()
                        if isinstance(v, type) and issubclass(v, msgspec.Struct))


def reading_to_data(reading: model.Reading) -> dict[str, Any]:
    """``to_data(reading)``, built by msgspec (many times faster) when its payload is one of the
    model's types; any other payload (a newer source's JSON data) takes ``to_data``."""
    payload = reading.payload
    if payload is None or type(payload) in MODEL_TYPES:
        try:
            return msgspec.to_builtins(reading, enc_hook=_unknown)  # type: ignore[no-any-return]
        except TypeError:  # a value of a type the hints do not allow: written as it is
            pass
    return to_data(reading)


# -- errors --------------------------------------------------------------------------------------

_AT = re.compile(r"(.*) - at `\$(.*)`", re.DOTALL)
_MISSING_FIELD = re.compile(r"Object missing required field `(.*)`", re.DOTALL)


def error_text(exc: msgspec.ValidationError, path: str = "$") -> str:
    """msgspec's message as this project writes errors: ``PATH: what`` with ``path`` in place
    of msgspec's ``$`` (``line 7.payload.gpus[0].index: expected int, got str``), and a missing
    field named in the path (``line 7.payload.gpus[0].uuid: missing``)."""
    text, where = str(exc), ""
    at = _AT.fullmatch(text)
    if at:
        text, where = at.group(1), at.group(2)
    missing = _MISSING_FIELD.fullmatch(text)
    if missing:
        return f"{path}{where}.{missing.group(1)}: missing"
    text = text.replace("`", "")
    return f"{path}{where}: {text[:1].lower()}{text[1:]}"


def from_data(cls: Any, data: Any, path: str = "$") -> Any:
    """Build ``cls`` (a type hint) from JSON data produced by ``to_data``."""
    try:
        return msgspec.convert(data, cls)
    except msgspec.ValidationError as exc:
        raise ValueError(error_text(exc, path)) from None


# -- readings ------------------------------------------------------------------------------------
# One Struct per payload type, tagged by the reading's source; readings of a source with no
# payload type (a newer writer's) decode as _AnyReading, payload kept as JSON data.

class _AnyReading(msgspec.Struct, frozen=True):
    source: str
    timestamp: float
    status: str = model.OK
    payload: Any = None
    message: str = ""
    remedy: str = ""


class _Readings(typing.NamedTuple):
    key: tuple
    union: Any  # the tagged union of the typed readings
    decoder: msgspec.json.Decoder
    source_of: dict[type, str]


_readings_cache: list[_Readings] = []


def _readings() -> _Readings:
    """The tagged union for the payload types registered now (built again when they change)."""
    key = tuple(PAYLOAD_TYPES.items())
    if _readings_cache and _readings_cache[0].key == key:
        return _readings_cache[0]
    structs = {}
    for source, cls in key:
        if cls is None:
            continue
        structs[msgspec.defstruct(
            f"Reading_{source}",
            [("timestamp", float), ("status", str, model.OK),
             ("payload", typing.Optional[cls], None), ("message", str, ""),  # noqa: UP045
             ("remedy", str, "")],
            tag_field="source", tag=source, frozen=True)] = source
    # typing's Union over a tuple built at run time (no | form for that)
    union = typing.Union[tuple(structs)] if structs else _AnyReading  # noqa: UP007
    built = _Readings(key, union, msgspec.json.Decoder(union), structs)
    _readings_cache[:] = [built]
    return built


def _reading(struct: Any, source_of: dict[type, str]) -> model.Reading:
    return model.Reading(source_of[type(struct)], struct.timestamp, struct.status,
                         struct.payload, struct.message, struct.remedy)


def reading_from_data(data: Any, path: str = "$") -> model.Reading:
    """A reading from JSON data (``reading_to_data``'s); ``ValueError`` naming the bad field
    and its path (``path`` stands for the reading itself, e.g. ``line 7``)."""
    if type(data) is not dict:
        raise ValueError(f"{path}: a reading must be an object")
    readings = _readings()
    source = data.get("source")
    try:
        if type(source) is str and source not in readings.source_of.values():
            struct = msgspec.convert(data, _AnyReading)
            return model.Reading(struct.source, struct.timestamp, struct.status,
                                 struct.payload, struct.message, struct.remedy)
        return _reading(msgspec.convert(data, readings.union), readings.source_of)
    except msgspec.ValidationError as exc:
        raise ValueError(error_text(exc, path)) from None
    except UnicodeError:  # a lone surrogate (a JSON escape) where msgspec needs the text
        raise ValueError(f"{path}: a string that is not valid Unicode (a lone surrogate)") \
            from None


def reading_from_json(line: bytes | str, path: str = "$") -> model.Reading:
    """A reading from one line of JSON: parsed and decoded in one pass by msgspec. What it does
    not take that way (NaN, a reading of an unknown source, a bad value) goes through
    ``json.loads`` and ``reading_from_data``, which decode it or say what is wrong.

    Raises ``ValueError`` (``json.JSONDecodeError`` for what is not JSON) or ``RecursionError``
    (JSON nested too deeply)."""
    readings = _readings()
    try:
        return _reading(readings.decoder.decode(line), readings.source_of)
    except msgspec.MsgspecError:
        return reading_from_data(json.loads(line), path)
