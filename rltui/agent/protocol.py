"""Wire protocol v1 between ``rltui agent`` and the rltui that started it (docs/agent.md).

One JSON object per line, UTF-8, ``\\n``-terminated. Pure: no I/O, no subprocess, no psutil.

Agent -> rltui (the agent's stdout). Every message has ``{"v": 1, "type": T, "host": HOST,
"t": agent wall-clock seconds}``, plus per type:

    hello      agent (str), pid (int), job (str), sources ({name: interval s}, 0 = on request)
    reading    source (str), reading (rltui.serialize.reading_to_data of a model.Reading)
    heartbeat  nothing more: every --heartbeat seconds (default 2), whatever else is sent
    reply      id (str), ok (bool), message (str), data (any JSON, optional)
    error      message (str): the agent's own trouble, e.g. a request line it could not read
    bye        reason (str): the last line before a clean exit

``hello`` is the first line of an agent that started; one that cannot start (a bad config)
writes ``error`` and ``bye`` instead and exits 2.

rltui -> agent (its stdin): ``{"v": 1, "id": str, "op": "dump" | "tail" | "stop", ...}``;
``tail`` takes ``path`` (optional str) and ``lines`` (int, 1..MAX_TAIL_LINES).

Versioning: fields may be added within v1 and readers ignore the keys they do not know; a
message ``type`` a reader does not know decodes to ``Unknown`` (to be ignored, with a note).
A breaking change takes a new major ``v``; a reader given a newer ``v`` says to upgrade.

``decode`` and ``decode_request`` never raise for bad input: they return a ``ProtocolError``
whose message says what was wrong and where (a bad reading names the JSON path).

Decoding is msgspec's: the wire messages are a tagged union of msgspec Structs on ``type``, and a
``reading`` message holds the tagged union of readings (rltui.serialize), so a well-formed line
becomes its message and model values in one pass from its bytes. A line that pass does not take
as it is (any error, a newer ``v``, a time that is not finite, a reading over the limits of one
reading) is decoded again the checked way: the envelope's checks in order (length, UTF-8, JSON,
object, version), then the same Structs over the parsed data, which say which field is wrong,
and the reading cut to the limits before it is decoded.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, Union

import msgspec

from rltui import serialize
from rltui.model import Reading
from rltui.redact import scrub_text
from rltui.serialize import error_text, reading_from_data, reading_to_data

SCHEMA_VERSION = 1
MAX_LINE = 8 << 20  # bytes of one line, the newline not counted; longer lines are not parsed
MAX_TAIL_LINES = 10_000  # lines per file a tail request may ask for
MAX_TAIL_BYTES = 4 << 20  # bytes of log text in one tail reply, all files together
DEFAULT_TAIL_LINES = 200
# What one reading may carry (docs/agent.md, "Limits"): a node has far fewer of each; the excess
# of a broken or hostile agent is dropped on decoding, before it costs memory or CPU here, and
# the drop is said (ReadingMessage.dropped, a problem of the stream).
MAX_READING_PROCS = 4096  # processes in a procs reading
MAX_READING_GPUS = 64  # GPUs in a gpus reading
MAX_READING_PIDS = 4096  # foreign GPU pids in a gpus reading
MAX_READING_DUMPS = 4096  # process dumps in a stacks reading (and Flight Recorder dumps)
MAX_READING_FR_PROBLEMS = 64  # lines of Flight Recorder dumps that could not be read
MAX_READING_LOG_FILES = 512  # files in a logs reading (the log source follows as many)
MAX_READING_LOG_LINES = 8192  # log lines in a logs reading, all files together
MAX_READING_LOG_STEPS = 8192  # step records in a logs reading, all files together
MAX_READING_LOG_EVENTS = 4096  # events in a logs reading, all files together
DEFAULT_HEARTBEAT = 2.0
OPS = ("dump", "tail", "stop")
PREVIEW = 80  # characters of a bad line quoted in an error (scrubbed of secrets)

# ProtocolError kinds.
TOO_LONG = "too-long"
EMPTY = "empty"
NOT_UTF8 = "not-utf8"
NOT_JSON = "not-json"
NOT_OBJECT = "not-object"
VERSION = "version"  # v missing, not an integer, or below 1
NEWER_VERSION = "newer-version"  # the other side is newer: upgrade this one
BAD_FIELD = "field"
BAD_READING = "reading"


class ProtocolError(ValueError):
    """A line that is not a valid message. Returned by ``decode`` (raised only by ``encode``).

    ``kind`` is one of the constants above; ``id`` is the request id when a bad request still
    had a readable one (the agent then answers it with ``ok: false`` instead of an error line).
    """

    def __init__(self, kind: str, message: str, id: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.id = id

    def __repr__(self) -> str:
        return f"ProtocolError({self.kind!r}, {self.message!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ProtocolError)
                and (self.kind, self.message, self.id) == (other.kind, other.message, other.id))

    __hash__ = None  # type: ignore[assignment]


# -- messages (agent -> rltui) ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Hello:
    type: ClassVar[str] = "hello"
    host: str
    t: float
    agent: str  # "rltui X.Y.Z"
    pid: int
    job: str = ""
    sources: dict[str, float] = field(default_factory=dict)  # name -> interval s; 0: on request


@dataclass(frozen=True, slots=True)
class ReadingMessage:
    type: ClassVar[str] = "reading"
    host: str
    t: float
    reading: Reading
    dropped: str = ""  # on decoding: what was over the limits of one reading (not sent)

    @property
    def source(self) -> str:
        return self.reading.source


@dataclass(frozen=True, slots=True)
class Heartbeat:
    type: ClassVar[str] = "heartbeat"
    host: str
    t: float


@dataclass(frozen=True, slots=True)
class Reply:
    type: ClassVar[str] = "reply"
    host: str
    t: float
    id: str
    ok: bool
    message: str = ""
    data: Any = None


@dataclass(frozen=True, slots=True)
class ErrorMessage:
    type: ClassVar[str] = "error"
    host: str
    t: float
    message: str


@dataclass(frozen=True, slots=True)
class Bye:
    type: ClassVar[str] = "bye"
    host: str
    t: float
    reason: str


@dataclass(frozen=True, slots=True)
class Unknown:
    """A message of a type this rltui does not know (a newer agent): ignore it, show ``note``."""

    type: ClassVar[str] = "unknown"
    host: str
    t: float
    type_name: str
    note: str


Message = Hello | ReadingMessage | Heartbeat | Reply | ErrorMessage | Bye | Unknown


# -- requests (rltui -> agent) ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Request:
    """``op`` is any string here: an op the agent does not know gets ``ok: false``."""

    id: str
    op: str
    path: str | None = None  # tail: one file instead of all the job's logs
    lines: int | None = None  # tail: lines per file (DEFAULT_TAIL_LINES when None)


# -- encoding --------------------------------------------------------------------------------------

def _dumps(data: dict[str, Any]) -> bytes:
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # a lone surrogate (an undecodable file name): escape it
        return json.dumps(data, separators=(",", ":")).encode("ascii") + b"\n"


def to_wire(msg: Message | Request) -> dict[str, Any]:
    """The JSON object of a message or request (before it becomes a line)."""
    if isinstance(msg, Request):
        data: dict[str, Any] = {"v": SCHEMA_VERSION, "id": msg.id, "op": msg.op}
        if msg.path is not None:
            data["path"] = msg.path
        if msg.lines is not None:
            data["lines"] = msg.lines
        return data
    if isinstance(msg, Unknown):
        raise TypeError("an Unknown message is what a reader saw; it is never sent")
    data = {"v": SCHEMA_VERSION, "type": msg.type, "host": msg.host, "t": msg.t}
    if isinstance(msg, ReadingMessage):
        data["source"] = msg.reading.source
        data["reading"] = reading_to_data(msg.reading)
    elif isinstance(msg, Reply):
        data |= {"id": msg.id, "ok": msg.ok, "message": msg.message}
        if msg.data is not None:
            data["data"] = msg.data
    elif isinstance(msg, Hello):
        data |= {"agent": msg.agent, "pid": msg.pid, "job": msg.job,
                 "sources": dict(msg.sources)}
    elif isinstance(msg, ErrorMessage):
        data["message"] = msg.message
    elif isinstance(msg, Bye):
        data["reason"] = msg.reason
    elif not isinstance(msg, Heartbeat):
        raise TypeError(f"not a protocol message: {type(msg).__name__}")
    return data


def line_of(msg: Message | Request) -> bytes:
    """The line of a message, however long (``encode`` is the checked form)."""
    return _dumps(to_wire(msg))


def encode(msg: Message | Request) -> bytes:
    """One line, ``\\n``-terminated. Raises ``ProtocolError`` (kind TOO_LONG) for a message
    over MAX_LINE: a reader would refuse it, so the writer must split or shorten it."""
    line = line_of(msg)
    if len(line) - 1 > MAX_LINE:
        raise ProtocolError(TOO_LONG, f"{msg.type if not isinstance(msg, Request) else msg.op} "
                                      f"of {len(line) - 1} bytes is over the {MAX_LINE} byte "
                                      f"line limit")
    return line


# -- decoding --------------------------------------------------------------------------------------

def _preview(text: str) -> str:
    short = text[:PREVIEW] + ("..." if len(text) > PREVIEW else "")
    return repr(scrub_text(short))


def _object(line: bytes) -> dict[str, Any] | ProtocolError:
    """The checks every line gets, in order: length, UTF-8, JSON, object, version."""
    if line.endswith(b"\n"):
        line = line[:-1]
    if line.endswith(b"\r"):
        line = line[:-1]
    if len(line) > MAX_LINE:
        return ProtocolError(TOO_LONG, f"a line longer than {MAX_LINE} bytes (8 MiB) was "
                                       f"rejected unread")
    if not line.strip():
        return ProtocolError(EMPTY, "an empty line")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return ProtocolError(NOT_UTF8, f"not UTF-8 text (bad byte at offset {exc.start}): "
                                       f"{_preview(line.decode('utf-8', 'replace'))}")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        return ProtocolError(NOT_JSON, f"not JSON ({why}): {_preview(text)}")
    if not isinstance(data, dict):
        return ProtocolError(NOT_OBJECT, f"a JSON {type(data).__name__}, not an object: "
                                         f"{_preview(text)}")
    v = data.get("v")
    if "v" not in data:
        return ProtocolError(VERSION, "no protocol version (v) in the message")
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        return ProtocolError(VERSION, f"unknown protocol version v={v!r:.40}")
    if v > SCHEMA_VERSION:
        return ProtocolError(NEWER_VERSION, f"the other side speaks protocol v{v}, this rltui "
                                            f"speaks v{SCHEMA_VERSION}: upgrade rltui here "
                                            f"(pip install -U rltui)")
    return data


class _Bad(Exception):
    """A field of the wrong type, raised inside decode and turned into a ProtocolError."""


# -- the wire Structs ------------------------------------------------------------------------------
# One Struct per message type, tagged on "type". Built twice: for the one pass over a line's
# bytes (a reading typed as the union of readings, hello's sources as numbers) and for the
# checked decoding of parsed data (the reading and the sources kept as JSON data, to be bounded
# and checked after).

class _Wire(NamedTuple):
    readings: Any  # the rltui.serialize readings the Structs were built for
    decoder: msgspec.json.Decoder  # the one pass
    union: Any  # the checked decoding
    kinds: dict[type, str]  # Struct -> message type


_wire_cache: list[_Wire] = []


def _structs(name: str, reading: Any, sources: Any, envelope: list) -> list[type]:
    def struct(tag: str, fields: list) -> type:
        return msgspec.defstruct(f"{name}_{tag}", [*envelope, ("host", str), ("t", float),
                                                   *fields],
                                 tag_field="type", tag=tag, frozen=True)
    return [
        struct("hello", [("agent", str), ("pid", int), ("job", str, ""),
                         ("sources", sources, msgspec.field(default_factory=dict))]),
        struct("reading", [("source", str), ("reading", reading, None)]),
        struct("heartbeat", []),
        struct("reply", [("id", str), ("ok", bool), ("message", str), ("data", Any, None)]),
        struct("error", [("message", str)]),
        struct("bye", [("reason", str)]),
    ]


def _wire() -> _Wire:
    readings = serialize._readings()
    if _wire_cache and _wire_cache[0].readings is readings:
        return _wire_cache[0]
    fast = _structs("Line", readings.union, dict[str, float], [("v", int)])
    checked = _structs("Checked", Any, dict[str, Any], [])
    kinds = {c: c.__struct_config__.tag for c in (*fast, *checked)}
    # typing's Union over a tuple built at run time (no | form for that)
    built = _Wire(readings, msgspec.json.Decoder(Union[tuple(fast)]), Union[tuple(checked)],  # noqa: UP007
                  kinds)
    _wire_cache[:] = [built]
    return built


class _Envelope(msgspec.Struct):
    """What a message of a type this rltui does not know must still have."""

    host: str
    t: float


class _RequestWire(msgspec.Struct):
    id: str
    op: str
    path: str | None = None
    lines: int | None = None


def _within_limits(reading: Reading) -> bool:
    """Whether ``bound_reading`` would cut nothing of this (decoded) reading."""
    payload, source = reading.payload, reading.source
    if payload is None:
        return True
    if source == "logs":
        files = payload.files
        return (len(files) <= MAX_READING_LOG_FILES
                and sum(len(f.lines) for f in files) <= MAX_READING_LOG_LINES
                and sum(len(f.steps) for f in files) <= MAX_READING_LOG_STEPS
                and sum(len(f.events) for f in files) <= MAX_READING_LOG_EVENTS)
    if source == "procs":
        return len(payload.procs) <= MAX_READING_PROCS
    if source == "gpus":
        return (len(payload.gpus) <= MAX_READING_GPUS
                and len(payload.foreign_pids) <= MAX_READING_PIDS)
    if source == "stacks":
        return len(payload.dumps) <= MAX_READING_DUMPS
    if source == "flight_recorder":
        return (len(payload.dumps) <= MAX_READING_DUMPS
                and len(payload.problems) <= MAX_READING_FR_PROBLEMS)
    return True


def _one_pass(line: bytes) -> Message | None:
    """The message of a well-formed line, straight from its bytes; None for anything the
    checked decoding must look at."""
    wire = _wire()
    try:
        msg = wire.decoder.decode(line)
    except (msgspec.MsgspecError, RecursionError):
        return None
    if msg.v != SCHEMA_VERSION or not math.isfinite(msg.t):
        return None
    kind = wire.kinds[type(msg)]
    if kind == "reading":
        if msg.reading is None:
            return None
        reading = serialize._reading(msg.reading, wire.readings.source_of)
        if (reading.source != msg.source or not math.isfinite(reading.timestamp)
                or not _within_limits(reading)):
            return None
        return ReadingMessage(msg.host, msg.t, reading)
    return _public(kind, msg)


def _public(kind: str, msg: Any) -> Message:
    """The message of a decoded Struct of any type but reading."""
    if kind == "heartbeat":
        return Heartbeat(msg.host, msg.t)
    if kind == "reply":
        return Reply(msg.host, msg.t, msg.id, msg.ok, msg.message, msg.data)
    if kind == "hello":
        return Hello(msg.host, msg.t, msg.agent, msg.pid, msg.job, msg.sources)
    if kind == "error":
        return ErrorMessage(msg.host, msg.t, msg.message)
    return Bye(msg.host, msg.t, msg.reason)


def _finite_time(t: float, where: str) -> float:
    if not math.isfinite(t):
        raise _Bad(f"{where}.t: not a finite number")
    return t


def _sources(value: Any, where: str) -> dict[str, float]:
    out = {}
    for name, interval in value.items():
        if isinstance(interval, bool) or not isinstance(interval, (int, float)):
            raise _Bad(f"{where}.sources.{name}: expected a number, got {interval!r:.40}")
        try:
            out[name] = float(interval)
        except OverflowError:
            raise _Bad(f"{where}.sources.{name}: not a finite number") from None
    return out


def _cut(container: dict, key: str, limit: int) -> int:
    """Shortens ``container[key]`` (a list) to ``limit`` items; the number dropped."""
    items = container.get(key)
    if type(items) is not list or len(items) <= limit:
        return 0
    container[key] = items[:limit]
    return len(items) - limit


def bound_reading(data: Any) -> tuple[Any, str]:
    """The raw reading (JSON data) cut to what one reading may carry, and a note of what was
    dropped ("" when nothing was). Shallow copies: the caller's data is not changed."""
    if type(data) is not dict or type(data.get("payload")) is not dict:
        return data, ""
    payload = dict(data["payload"])
    source = data.get("source")
    dropped: list[str] = []

    def cut(container: dict, key: str, limit: int, what: str) -> int:
        n = _cut(container, key, limit)
        if n:
            dropped.append(f"{n} {what} over {limit}")
        return n

    if source == "procs":
        cut(payload, "procs", MAX_READING_PROCS, "processes")
    elif source == "gpus":
        cut(payload, "gpus", MAX_READING_GPUS, "GPUs")
        cut(payload, "foreign_pids", MAX_READING_PIDS, "foreign GPU pids")
    elif source == "stacks":
        cut(payload, "dumps", MAX_READING_DUMPS, "process dumps")
    elif source == "flight_recorder":
        cut(payload, "dumps", MAX_READING_DUMPS, "Flight Recorder dumps")
        cut(payload, "problems", MAX_READING_FR_PROBLEMS, "Flight Recorder problems")
    elif source == "logs":
        cut(payload, "files", MAX_READING_LOG_FILES, "log files")
        left = {"lines": MAX_READING_LOG_LINES, "steps": MAX_READING_LOG_STEPS,
                "events": MAX_READING_LOG_EVENTS}
        over = dict.fromkeys(left, 0)
        files = payload.get("files")
        if type(files) is list:
            kept = []
            for f in files:
                if type(f) is dict:
                    f = dict(f)
                    for key in left:
                        items = f.get(key)
                        if type(items) is list:
                            n = _cut(f, key, left[key])
                            over[key] += n
                            left[key] -= len(items) - n
                kept.append(f)
            payload["files"] = kept
        limits = {"lines": MAX_READING_LOG_LINES, "steps": MAX_READING_LOG_STEPS,
                  "events": MAX_READING_LOG_EVENTS}
        dropped += [f"{n} log {key} over {limits[key]}" for key, n in over.items() if n]
    if not dropped:
        return data, ""
    return (dict(data, payload=payload),
            f"a {source} reading over the limits of one reading: dropped "
            f"{', '.join(dropped)} (docs/agent.md, Limits)")


def _message(data: dict[str, Any]) -> Message | ProtocolError:
    """The checked decoding of a line's parsed object (its envelope checked)."""
    if "type" not in data:
        raise _Bad("$.type: missing")
    kind = data["type"]
    if type(kind) is not str:
        raise _Bad(f"$.type: expected str, got {type(kind).__name__}")
    wire = _wire()
    try:
        if kind not in wire.kinds.values():
            envelope = msgspec.convert(data, _Envelope)
            return Unknown(envelope.host, _finite_time(envelope.t, kind), kind,
                           f"ignored a message of unknown type {kind!r:.40} (a newer agent?)")
        msg = msgspec.convert(data, wire.union)
    except msgspec.ValidationError as exc:
        raise _Bad(error_text(exc, kind)) from None
    except UnicodeError:  # a lone surrogate (a JSON escape) where msgspec needs the text
        raise _Bad(f"{kind}: a string that is not valid Unicode (a lone surrogate)") from None
    t = _finite_time(msg.t, kind)
    if kind == "hello":
        return Hello(msg.host, t, msg.agent, msg.pid, msg.job, _sources(msg.sources, kind))
    if kind != "reading":
        return _public(kind, msg)
    source = msg.source
    raw, dropped = bound_reading(msg.reading)
    try:
        reading = reading_from_data(raw, "reading.reading")
    except (ValueError, TypeError, RecursionError) as exc:
        return ProtocolError(BAD_READING, f"a bad {source} reading: {exc}")
    if reading.source != source:
        raise _Bad(f"reading.source {source!r} does not match the reading's "
                   f"{reading.source!r}")
    # NaN stays allowed inside payloads (a loss of nan in a step line is news), but the
    # time every age is measured from must be a real time.
    if not math.isfinite(reading.timestamp):
        return ProtocolError(BAD_READING, f"a bad {source} reading: its timestamp is not "
                                          "a finite number")
    return ReadingMessage(msg.host, t, reading, dropped)


def decode(line: bytes) -> Message | ProtocolError:
    """One line of an agent's stdout -> a message, or a ProtocolError saying what was wrong."""
    if len(line) <= MAX_LINE:
        msg = _one_pass(line)
        if msg is not None:
            return msg
    return decode_checked(line)


def decode_checked(line: bytes) -> Message | ProtocolError:
    """``decode`` without the one pass: every check in order (the reference ``decode`` keeps
    to, and what it does for any line the one pass does not take)."""
    data = _object(line)
    if isinstance(data, ProtocolError):
        return data
    try:
        return _message(data)
    except _Bad as exc:
        return ProtocolError(BAD_FIELD, str(exc))


def decode_request(line: bytes) -> Request | ProtocolError:
    """One line of the agent's stdin -> a request, or a ProtocolError (with the request's id
    when it had a readable one, so that it can be answered)."""
    data = _object(line)
    if isinstance(data, ProtocolError):
        return data
    rid = data.get("id") if isinstance(data.get("id"), str) else None
    op = data.get("op") if isinstance(data.get("op"), str) else None
    try:
        request = msgspec.convert(data, _RequestWire)
    except msgspec.ValidationError as exc:
        text = error_text(exc, "$")
        if text.startswith(("$.id", "$.op")) or op is None:
            return ProtocolError(BAD_FIELD, "request" + text[1:], rid)
        return ProtocolError(BAD_FIELD, op + text[1:], rid)
    except UnicodeError:  # a lone surrogate (a JSON escape) where msgspec needs the text
        return ProtocolError(BAD_FIELD, f"{op or 'request'}: a string that is not valid Unicode "
                                        "(a lone surrogate)", rid)
    lines = request.lines
    if lines is not None and not 1 <= lines <= MAX_TAIL_LINES:
        return ProtocolError(BAD_FIELD, f"{request.op}.lines: {lines} is outside "
                                        f"1..{MAX_TAIL_LINES}", rid)
    return Request(request.id, request.op, request.path, lines)


# -- reading lines ---------------------------------------------------------------------------------

class LineSplitter:
    """Bytes in (as ``os.read`` gives them), whole lines out, in bounded memory.

    A line longer than ``max_line`` comes out once as its first ``max_line + 1`` bytes, with no
    newline, which ``decode`` rejects as too long without parsing; the rest of it is skipped.
    """

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self.max_line = max_line
        self._buf = bytearray()
        self._skipping = False  # inside the rest of a line already reported as too long

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        start = len(buf)  # no newline before this: it was searched on an earlier feed
        buf += data
        out: list[bytes] = []
        pos = 0
        while True:
            end = buf.find(b"\n", max(pos, start))
            if end < 0:
                break
            if self._skipping:
                self._skipping = False
            elif end - pos > self.max_line:
                out.append(bytes(buf[pos:pos + self.max_line + 1]))
            else:
                out.append(bytes(buf[pos:end + 1]))
            pos = end + 1
        del buf[:pos]
        if len(buf) > self.max_line:  # no newline in sight: report it now, keep no more of it
            if not self._skipping:
                out.append(bytes(buf[:self.max_line + 1]))
            self._skipping = True
            buf.clear()
        return out

    def end(self) -> list[bytes]:
        """At end of input: a last line without its newline, if there is one."""
        rest, skipping = bytes(self._buf), self._skipping
        self._buf.clear()
        self._skipping = False
        return [rest] if rest.strip() and not skipping else []
