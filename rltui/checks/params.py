"""A check's parameters, each declared once: the spec field, its kind, default, bounds, the
command-line flag and help, and how the app's check form shows it. The argparse options, the
form's fields, the form's parsing and the spec's defaults are all derived from the one table.

Standard library only (``rltui --help`` imports the checks' CLIs, which import this).

Help texts may say ``{default}``: it is replaced by the default as people write it (``256``,
``120``, ``auto``), so a default is never written twice.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rltui.checks.forms import FormField, float_value, int_value, text_value

# Kinds of parameter: how a flag reads and what the spec holds.
TEXT = "text"    # a string (None when not given, unless a default)
INT = "int"      # a whole number, at least ``minimum`` (the form checks; the spec validates)
FLOAT = "float"  # a positive number
FLAG = "flag"    # on when the flag is given; ``negated``: the flag turns the spec field off
PATHS = "paths"  # a repeatable flag: the spec holds a tuple
JSON = "json"    # a JSON object given as text; the spec holds the dict

MORE = "more settings"  # the argparse group of the settings most runs leave alone


def shown(value: Any) -> str:
    """A default as people write it: ``120`` for 120.0, ``auto``."""
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class Form:
    """How the app's check form shows a parameter (only those that have one are in the form)."""

    label: str
    # A hint, never a value: an example says "e.g. ...", and an empty field that means a default
    # says "default: ..." ({default}: the default as people write it). None: "default: {default}".
    placeholder: str | None = None
    help: str = ""
    key: str | None = None  # the form's key for the value (default: the parameter's name)
    prefill: bool = False  # the field starts filled with the default
    secret: bool = False  # typed hidden, never echoed, never exported
    said_as: str | None = None  # the name errors use (default: the label)


@dataclass(frozen=True)
class Param:
    """One parameter. ``name`` is the spec field (and the key reports record it under);
    ``flag`` the command-line option (``--max-new-tokens``) or, without dashes, a positional
    argument. ``spec=False``: an option of the command's output only (``--json``)."""

    name: str
    flag: str
    kind: str = TEXT
    default: Any = None
    help: str = ""
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    required: bool = False
    minimum: int = 1  # INT: the least value the form accepts
    negated: bool = False  # FLAG: ``--no-probe`` sets probe_server False
    group: str | None = None  # argparse group title (MORE)
    exclusive: str | None = None  # mutually exclusive with the others of the same name
    form: Form | None = None
    spec: bool = True

    @property
    def dest(self) -> str:
        """The argparse destination: the flag without dashes, in snake case."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def help_text(self) -> str:
        return self.help.replace("{default}", shown(self.default))


def default_of(params: Iterable[Param], name: str) -> Any:
    """The declared default of the spec field ``name`` (for the spec class's field)."""
    return _by_name(params)[name].default


def _by_name(params: Iterable[Param]) -> dict[str, Param]:
    return {p.name: p for p in params}


# -- the command line --------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser, params: Sequence[Param]) -> None:
    """The parameters as argparse options, in their order, groups and exclusive groups."""
    groups: dict[str, Any] = {}
    exclusive: dict[tuple[str | None, str], Any] = {}
    for p in params:
        target: Any = parser
        if p.group is not None:
            if p.group not in groups:
                groups[p.group] = parser.add_argument_group(p.group)
            target = groups[p.group]
        if p.exclusive is not None:
            key = (p.group, p.exclusive)
            if key not in exclusive:
                exclusive[key] = target.add_mutually_exclusive_group()
            target = exclusive[key]
        target.add_argument(*_names(p), **_options(p))


def _names(p: Param) -> tuple[str, ...]:
    return (p.flag,)


def _options(p: Param) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if p.kind == FLAG:
        options["action"] = "store_true"
    elif p.kind == PATHS:
        options.update(action="append", default=[])
    else:
        if p.kind == INT:
            options["type"] = int
        elif p.kind == FLOAT:
            options["type"] = float
        if p.choices is not None:
            options["choices"] = list(p.choices)
        if p.kind == JSON:
            options["default"] = "{}" if p.default is None else p.default
        elif p.default is not None:
            options["default"] = p.default
    if p.required:
        options["required"] = True
    if p.metavar is not None:
        options["metavar"] = p.metavar
    options["help"] = p.help_text
    return options


def spec_values(params: Sequence[Param], args: argparse.Namespace,
                parse_json: Callable[[str, str], dict] | None = None) -> dict[str, Any]:
    """The spec's keyword arguments from parsed arguments (``parse_json(text, flag)`` reads a
    JSON parameter's object, raising the check's SpecError)."""
    values: dict[str, Any] = {}
    for p in params:
        if not p.spec:
            continue
        value = getattr(args, p.dest)
        if p.kind == FLAG and p.negated:
            value = not value
        elif p.kind == PATHS:
            value = tuple(value)
        elif p.kind == JSON:
            assert parse_json is not None, f"{p.flag} is JSON: spec_values needs parse_json"
            value = parse_json(value, p.flag)
        values[p.name] = value
    return values


# -- the app's check form ----------------------------------------------------------------------

def form_key(p: Param) -> str:
    assert p.form is not None
    return p.form.key or p.name


def form_fields(params: Sequence[Param], order: Sequence[str]) -> tuple[FormField, ...]:
    """The form's fields, in ``order`` (parameter names)."""
    by_name = _by_name(params)
    fields = []
    for name in order:
        p = by_name[name]
        f = p.form
        assert f is not None, f"{name} has no form"
        fields.append(FormField(
            form_key(p), f.label, placeholder(p),
            default=shown(p.default) if f.prefill else "", secret=f.secret, help=f.help))
    return tuple(fields)


def placeholder(p: Param) -> str:
    """What an empty field shows: the form's hint, else what leaving it empty gives."""
    assert p.form is not None
    text = p.form.placeholder
    if text is None:
        text = "" if p.default is None else "default: {default}"
    return text.replace("{default}", shown(p.default))


def form_values(params: Sequence[Param], values: Mapping[str, str],
                names: Sequence[str]) -> dict[str, Any]:
    """The typed values of the form fields ``names`` (text, secret, int, float), for the spec;
    an empty field gives the default. Raises ValueError with the message the form shows."""
    by_name = _by_name(params)
    out: dict[str, Any] = {}
    for name in names:
        p = by_name[name]
        assert p.form is not None, f"{name} has no form"
        key, said = form_key(p), p.form.said_as or p.form.label
        if p.kind == INT:
            out[name] = int_value(values, key, said, p.default, minimum=p.minimum)
        elif p.kind == FLOAT:
            out[name] = float_value(values, key, said, p.default)
        elif p.kind == TEXT:
            out[name] = text_value(values, key) or p.default
        else:
            raise ValueError(f"{name}: a {p.kind} parameter is read by its check's form")
    return out
