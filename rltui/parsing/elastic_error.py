"""Read torchelastic's error file (``error.json``, the path in TORCHELASTIC_ERROR_FILE).

A child wrapped by ``@record`` writes what it raised (pytorch/pytorch
``torch/distributed/elastic/multiprocessing/errors/error_handler.py``, ``record_exception``)::

    {"message": {"message": "FloatingPointError: loss is nan at step 17",
                 "extraInfo": {"py_callstack": "Traceback (most recent call last): ...",
                               "timestamp": "1747841836"}}}

The agent's copy for its parent (``dump_error_file``) adds ``"errorCode"`` to the inner object
when the child died by a signal. Older releases stored ``py_callstack`` as a list of
``traceback.format_stack()`` strings, and a "new format" file holds ``"message"`` as a plain
string. The report's ``error_file`` field names this file; this module reads its text. Pure: the
caller reads the file.
"""

from __future__ import annotations

import json

from rltui.model import LogEvent
from rltui.parsing import distfail
from rltui.parsing import tracebacks as tb

Fields = list[tuple[str, str | int | float | None]]

MAX_TEXT = 4 * 1024 * 1024  # an error file is a few KB; a bigger one is not an error file


def _int(value: object) -> int | None:
    try:
        return int(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    except ValueError:
        return None


def _callstack(value: object) -> str:
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return value if isinstance(value, str) else ""


def _last_frame(stack: str) -> tuple[str | None, int]:
    """("file:line in function", number of frames) of a formatted Python traceback."""
    block = tb.Block(None, 0, 0.0, None, "", 0)
    for line in stack.splitlines():
        if line.lstrip().startswith("File "):
            block.frame(line)
    return block.last_frame, block.frames


def parse_error_file(text: str) -> Fields | None:
    """Fields of an error.json: error, exc_type, exc_message, timestamp, error_code, last_frame,
    frames; None when ``text`` is not one."""
    if not text or len(text) > MAX_TEXT:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or "message" not in data:
        return None
    outer = data["message"]
    info: dict = {}
    if isinstance(outer, dict):
        message = outer.get("message")
        info = outer.get("extraInfo") if isinstance(outer.get("extraInfo"), dict) else {}
        code = _int(outer.get("errorCode"))
    else:
        message, code = outer, None
    if not isinstance(message, str):
        return None
    message = message[:500]
    exc = tb.exception_line(message.split("\n", 1)[0])
    frame, frames = _last_frame(_callstack(info.get("py_callstack")))
    return [
        ("error", message.split("\n", 1)[0]),
        ("exc_type", exc[0] if exc else None),
        ("exc_message", exc[1] if exc else message.split("\n", 1)[0]),
        ("timestamp", _int(info.get("timestamp"))),
        ("error_code", code),
        ("signal", distfail.signal_name(code)),
        ("last_frame", frame),
        ("frames", frames),
    ]


def error_file_event(text: str, arrival: float = 0.0) -> LogEvent | None:
    """The error file as a child-failed event (form error-file): what the child raised."""
    fields = parse_error_file(text)
    if fields is None:
        return None
    found = dict(fields)
    summary = f"torchrun child error file: {found['error']}"
    if found.get("signal"):
        summary += f" (killed by {found['signal']})"
    return LogEvent(kind="child-failed", line_no=1, end_line=max(1, text.count("\n") + 1),
                    arrival=arrival, summary=summary[:300], text=text[:tb.MAX_TEXT],
                    time=float(found["timestamp"]) if found.get("timestamp") is not None else None,
                    fields=(*fields, ("form", "error-file")))
