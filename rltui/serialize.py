"""Model value types to and from plain JSON data (recordings, ``--json`` output).

Generic over the frozen dataclasses in ``rltui.model``: fields are read from the type hints, so a
field added to a model type is serialised without touching this module. Decoding is tolerant of
unknown keys (a newer writer) and of missing ones (defaults), and strict about types it cannot
build, raising ``ValueError`` with the path of the bad value.

Decoding runs in two tiers. A view of many nodes decodes every reading of every node agent, so
the first tier is built for speed: one function per dataclass, generated once from its fields,
that tests the JSON types inline and keeps no path. It accepts only values it can decode
exactly as the second tier would; on anything else it gives up, and the second tier, the
checked decoders, decodes the value again from the top, keeping the path of every value and
raising the errors. The checked decoders are the reference: the fast tier either returns what
they return or defers to them.
"""

from __future__ import annotations

import dataclasses
import inspect
import keyword
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
    "flight_recorder": model.FrPoll,
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
    try:
        return _fast_decoder(cls)(data)
    except Exception:  # noqa: BLE001 - whatever went wrong, the checked decoder says what
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
    try:
        return _fast_reading(data)
    except Exception:  # noqa: BLE001 - whatever went wrong, the checked decoder says what
        return _checked_reading(data, path)


def _fast_reading(data: Any) -> model.Reading:
    """``_checked_reading`` for the readings a node agent sends, without paths; raises on
    anything else (see the fast tier below)."""
    if type(data) is not dict:
        raise _Mismatch
    source = data["source"]
    if type(source) is not str:
        raise _Mismatch
    payload = data.get("payload")
    if payload is not None:
        payload_type = PAYLOAD_TYPES.get(source)
        if payload_type is not None:
            payload = _fast_decoder(payload_type)(payload)
    timestamp = data["timestamp"]
    if type(timestamp) is not float:
        if type(timestamp) is not int:
            raise _Mismatch
        timestamp = float(timestamp)
    status = data.get("status", model.OK)
    if type(status) is not str:
        raise _Mismatch
    return model.Reading(source, timestamp, status, payload,
                         str(data.get("message", "")), str(data.get("remedy", "")))


def _checked_reading(data: Any, path: str) -> model.Reading:
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a reading must be an object")
    source = data.get("source")
    if not isinstance(source, str):
        raise ValueError(f"{path}.source: missing or not a string")
    payload_type = PAYLOAD_TYPES.get(source)
    payload = data.get("payload")
    if payload is not None and payload_type is not None:
        payload = _decoder(payload_type)(payload, f"{path}.payload")
    return model.Reading(
        source=source,
        timestamp=_decoder(float)(data.get("timestamp"), f"{path}.timestamp"),
        status=_decoder(str)(data.get("status", model.OK), f"{path}.status"),
        payload=payload,
        message=str(data.get("message", "")),
        remedy=str(data.get("remedy", "")),
    )


# -- the fast tier -------------------------------------------------------------------------------
# Each fast decoder takes the value alone and returns exactly what the checked decoder for the
# same type hint returns, or raises (``_Mismatch``, a KeyError for a missing field, whatever a
# constructor raised) and leaves the value to the checked decoder. It may give up on values the
# checked decoder accepts: types are tested exactly (``type(v) is int``), so a subclass, or a
# tuple where JSON has lists, goes the checked way; JSON data has neither. What makes it fast:
# no path strings, and no function call per value: a dataclass's fields, and the tuples, lists
# and optional values in them, are tested inline in one generated function per dataclass.

class _Mismatch(Exception):
    """A value the fast tier does not decode; the checked decoder will say why."""


_NONE = type(None)
_EXACT = (int, str, bool)  # accepted as they are, and only those exact types (not bool for int)
_JSON_TYPES = (dict, list, str, int, float, bool, _NONE)
_MISSING = object()  # a key not in the data (None is a value)


def _same(value: Any) -> Any:
    return value


def _never(value: Any) -> Any:
    raise _Mismatch


def _is_union(cls: Any) -> bool:
    return typing.get_origin(cls) in (typing.Union, types.UnionType)


def _optional_of(cls: Any) -> Any:
    """X for ``X | None``, else None."""
    args = typing.get_args(cls) if _is_union(cls) else ()
    if len(args) == 2 and _NONE in args:
        return args[0] if args[1] is _NONE else args[1]
    return None


def _passes_through(cls: Any) -> bool:
    """True for the hints whose values ``_decoder`` returns unchecked: ``Any``, and what it
    does not know (``list[int]``, a bare ``tuple``, a ``Literal``...)."""
    if cls is Any:
        return True
    return not (_is_union(cls) or typing.get_origin(cls) in (tuple, dict)
                or (isinstance(cls, type) and dataclasses.is_dataclass(cls))
                or cls in (float, int, str, bool, _NONE))


@cache
def _fast_decoder(cls: Any) -> typing.Callable[[Any], Any]:
    """The fast decoder for a type hint, built once."""
    if _passes_through(cls):
        return _same
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        return _fast_dataclass(cls)
    if _is_union(cls) and _optional_of(cls) is None:
        return _fast_union(cls)
    # A tuple, dict, scalar or optional value on its own (a tuple's items, a union's types):
    # the inline test of a field, made a function.
    namespace: dict[str, Any] = {}
    lines = ["def decode(value):",
             *_indent(_value_check("value", cls, namespace), 4),
             "    return value"]
    return _compile(lines, namespace, "value")


def _accepted_json_types(cls: Any) -> tuple[type, ...]:
    """The JSON types of which the checked decoder for ``cls`` may accept a value; of the
    others it accepts none."""
    if _passes_through(cls):
        return _JSON_TYPES
    if cls is float:
        return (int, float)
    if cls in (int, str, bool, _NONE):
        return (cls,)
    if typing.get_origin(cls) is tuple:
        return (list,)
    if _is_union(cls):  # get_args flattens unions: not met in practice
        return tuple({t for a in typing.get_args(cls) for t in _accepted_json_types(a)})
    return (dict,)  # a dataclass or a dict


def _fast_union(cls: Any) -> typing.Callable[[Any], Any]:
    """A union other than ``X | None`` (``str | int | float | None``).

    The checked union decoder tries its types in order and keeps the first that decodes the
    value. Only the types that accept the value's JSON type can, and the first of them either
    decodes it or, in the fast tier, gives up; so the fast union picks that one type by the
    value's type."""
    args = typing.get_args(cls)
    by_type: dict[type, typing.Callable[[Any], Any]] = {}
    if _NONE in args:
        by_type[_NONE] = _same  # None is None, before any type is tried
    for arg in args:
        decode = _fast_decoder(arg)
        for json_type in _accepted_json_types(arg):
            by_type.setdefault(json_type, decode)

    def union_decoder(value: Any) -> Any:
        return by_type[type(value)](value)  # KeyError: no type fits, for the checked decoder
    return union_decoder


# Generated decoders. Like ``dataclasses`` builds ``__init__``, the tests of a type's fields are
# written out as source once per type and compiled: straight-line code with local variables is
# several times faster than a loop over field descriptions calling a function per value. The
# source holds nothing from the data: field names (identifiers, checked), their repr() as dict
# keys, and generated names for the objects it uses (the class, defaults, nested decoders), which
# are passed in its namespace.

def _value_check(var: str, hint: Any, namespace: dict[str, Any]) -> list[str]:
    """Statements that test local ``var`` as a value of ``hint`` and convert it in place (an
    int for a float, a list for a tuple...), raising when the fast tier does not decode it."""
    if _passes_through(hint):
        return []
    inner = _optional_of(hint)
    if inner is not None:
        check = _value_check(var, inner, namespace)
        return [f"if {var} is not None:", *_indent(check, 4)] if check else []
    if hint in _EXACT:
        return [f"if type({var}) is not {hint.__name__}:",
                "    raise _Mismatch"]
    if hint is float:
        return [f"if type({var}) is not float:",
                f"    if type({var}) is not int:",
                "        raise _Mismatch",
                f"    {var} = float({var})"]
    if hint is _NONE:
        return [f"if {var} is not None:",
                "    raise _Mismatch"]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        lines = [f"if type({var}) is not list:",
                 "    raise _Mismatch"]
        item = args[0]
        if item in _EXACT:  # tuple[str, ...]: a loop of type tests, no call per item
            lines += [f"for item in {var}:",
                      f"    if type(item) is not {item.__name__}:",
                      "        raise _Mismatch"]
        if item in _EXACT or _passes_through(item):
            return [*lines, f"{var} = tuple({var})"]
        return [*lines, f"{var} = tuple(map({_name(namespace, _fast_decoder(item))}, {var}))"]
    if origin is tuple:  # tuple[str, float]: the length, then each item inline
        items = [f"{var}_{i}" for i in range(len(args))]
        lines = [f"if type({var}) is not list or len({var}) != {len(args)}:",
                 "    raise _Mismatch"]
        if items:
            lines.append(f"{', '.join(items)}, = {var}")
        for item_var, arg in zip(items, args):
            lines += _value_check(item_var, arg, namespace)
        return [*lines, f"{var} = ({''.join(v + ', ' for v in items)})"]
    if origin is dict:
        decoder = _name(namespace, _fast_decoder(args[1]))
        return [f"if type({var}) is not dict:",
                "    raise _Mismatch",
                f"{var} = {{k: {decoder}(x) for k, x in {var}.items()}}"]
    # a dataclass, or a union of several types: a call
    return [f"{var} = {_name(namespace, _fast_decoder(hint))}({var})"]


def _name(namespace: dict[str, Any], value: Any) -> str:
    """A name for ``value`` in generated source."""
    name = f"_{len(namespace)}"
    namespace[name] = value
    return name


def _indent(lines: list[str], depth: int) -> list[str]:
    return [" " * depth + line for line in lines]


def _compile(lines: list[str], namespace: dict[str, Any], name: str) -> typing.Callable:
    namespace.update(_Mismatch=_Mismatch, _MISSING=_MISSING)
    exec("\n".join(lines), namespace)  # noqa: S102 - see above: no data in the source
    decoder = namespace["decode"]
    decoder.__qualname__ = decoder.__name__ = f"decode_{name}"
    return decoder


def _fast_dataclass(cls: type) -> typing.Callable[[Any], Any]:
    """A dataclass: every field read into a local and tested inline, then one call of the class.

    The checked decoder passes the fields the data has and lets ``__init__`` fill in the rest.
    A call cannot leave arguments out, so a missing field is passed the default of the
    ``__init__`` parameter itself, which is the same thing (for a default_factory field, the
    marker on which ``__init__`` calls the factory). Arguments go by position where they can:
    a call with 16 keywords costs a fifth more."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]  # after self
    plain = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if any(p.kind not in plain for p in params):
        return _never  # a hand-written __init__ taking *args or **kwargs: the checked way
    params_by_name = {p.name: p for p in params}
    hints = _hints(cls)
    namespace: dict[str, Any] = {"cls": cls}
    lines = ["def decode(data):",
             "    if type(data) is not dict:",
             "        raise _Mismatch",
             "    get = data.get"]
    field_vars = {}
    for i, field in enumerate(dataclasses.fields(cls)):
        name, var = field.name, f"v{i}"
        if not name.isidentifier() or keyword.iskeyword(name):
            return _never  # cannot be written as an argument name (make_dataclass refuses)
        param = params_by_name.get(name)
        if param is None:  # not an argument (init=False): passing it would fail
            lines += [f"    if {name!r} in data:",
                      "        raise _Mismatch"]
            continue
        field_vars[name] = var
        check = _value_check(var, hints[name], namespace)
        if param.default is param.empty:
            lines.append(f"    {var} = data[{name!r}]")  # KeyError: missing, the checked way
            lines += _indent(check, 4)
        elif _keeps(hints[name], param.default):
            # the default passes the test as it is (None, "", 0, False): no test for missing
            lines.append(f"    {var} = get({name!r}, {_name(namespace, param.default)})")
            lines += _indent(check, 4)
        else:  # () for a tuple, a default_factory's marker: only a value from the data is tested
            lines += [f"    {var} = get({name!r}, _MISSING)",
                      f"    if {var} is _MISSING:",
                      f"        {var} = {_name(namespace, param.default)}"]
            if check:
                lines += ["    else:", *_indent(check, 8)]
    arguments, by_position = [], True
    for param in params:
        var = field_vars.get(param.name)
        if var is None:  # an __init__ argument that is no field: never passed, nor those after
            by_position = False  # it by position
        elif by_position and param.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
            arguments.append(var)
        else:
            arguments.append(f"{param.name}={var}")
    lines.append(f"    return cls({', '.join(arguments)})")
    return _compile(lines, namespace, cls.__name__)


def _keeps(hint: Any, default: Any) -> bool:
    """Whether the inline test of ``hint`` passes ``default`` as it is (conservative: False
    sends a missing field the longer way, which is right for every default)."""
    if _passes_through(hint):
        return True
    inner = _optional_of(hint)
    if inner is not None:
        return default is None or _keeps(inner, default)
    return hint in (int, str, bool, float, _NONE) and type(default) is hint
