"""The one step every string takes on its way out of rltui. Pure: no I/O.

Two jobs, kept apart because JSON needs only the first:

* ``scrub``: secrets hidden (``rltui.redact.scrub_text``) in every string of an outgoing
  structure: dicts (keys and values), lists, tuples and frozen dataclasses (a ``Reading`` on its
  way to a recording or the agent stream), walked generically so that a field added later is
  covered without anyone remembering to add it. Thread names, command lines, log lines, event
  texts and error messages all pass the same way.
* ``printable``: control characters shown escaped (``\\x1b``, ``\\r``, ``\\x9b``) so that an
  outside string (a command line, a script name, a log path, a log line) can move no terminal
  cursor, clear no screen and set no window title, in the TUI and in the text and markdown
  outputs. JSON escapes control characters itself and keeps the string as it was.

The boundaries that call it: the diagnose document and text (``rltui.findings``), the incident
report (``rltui.incident.write_report``), the recorder (``rltui.sources.record``), the agent's
outbound lines (``rltui.agent.outbound``), the check exports (``rltui.checks.export`` and the
checks' command lines) and the screen's tables and log lines (``rltui.ui.widgets``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any

import msgspec

from rltui.model import replace
from rltui.redact import scrub_text

# C0 and C1 controls and DEL, plus the bidirectional overrides that reorder what a reader sees.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, keep_lines: bool = False) -> str:
    """``text`` with every control character written as its escape (``ESC`` as ``\\x1b``); with
    ``keep_lines``, newlines and tabs stay (a whole report, not one field)."""
    if text.isprintable():
        return text
    return (_LINES if keep_lines else _UNPRINTABLE).sub(_escape, text)


def outgoing_text(text: str) -> str:
    """A whole text or markdown document as it may be printed or written: secrets hidden and
    control characters escaped, line breaks kept."""
    return printable(scrub_text(text), keep_lines=True)


def scrub(obj: Any) -> Any:
    """``obj`` with ``scrub_text`` applied to every string inside it (see the module's doc);
    numbers, booleans and None pass as they are. Unchanged parts are returned as they were."""
    if isinstance(obj, str):
        text = scrub_text(obj)
        return obj if text == obj else text
    if isinstance(obj, dict):
        return {scrub(k): scrub(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [scrub(v) for v in obj]
    if isinstance(obj, tuple):
        items = tuple(scrub(v) for v in obj)
        if all(a is b for a, b in zip(items, obj)):
            return obj
        return type(obj)(*items) if hasattr(obj, "_fields") else items
    if isinstance(obj, msgspec.Struct):  # the model's value types
        return _scrub_fields(obj, obj.__struct_fields__)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _scrub_fields(obj, [f.name for f in dataclasses.fields(obj) if f.init])
    if isinstance(obj, (frozenset, set)):
        return type(obj)(scrub(v) for v in obj)
    return obj


def _scrub_fields(obj: Any, names: Iterable[str]) -> Any:
    changed = {}
    for name in names:
        value = getattr(obj, name)
        new = scrub(value)
        if new is not value:
            changed[name] = new
    return replace(obj, **changed) if changed else obj
