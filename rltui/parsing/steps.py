"""Training steps from log lines: auto-detection, per-line feeding and a fast history scan.

``StepReader.feed`` takes one CLEANED line (``noise.strip_noise``) at a time: the live path.
``StepReader.scan`` / ``scan_steps`` take a raw block of many lines (a file's history) and
only clean and parse the lines that contain a cheap marker of the file's format, so catching
up on a multi-GB log costs little more than reading it. User-defined regex parsers from the
config come in as ``CustomParser`` (``compile_custom``, ``parsers_from_config``).

HF Trainer / TRL dicts carry no step number: the reader counts logging steps 1, 2, 3...
in the order it sees them (from the first line it read, which may be a window of the file).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from rltui.frameworks import step_formats
from rltui.model import LOG_FORMATS, TRIAGE_METRICS, StepRecord
from rltui.parsing import frameworks as fw
from rltui.parsing.noise import strip_noise

# Formats and their parsers come from the framework registry (rltui.frameworks), in its
# auto-detection order. A format printed in several shapes (OpenRLHF's log line and its
# progress bar) lists several parsers; the first one that has matched in a file silences the
# others there, so one step is not read twice from two shapes.
_FORMATS = step_formats()
FRAMEWORKS = tuple(dict.fromkeys(f.name for f in _FORMATS))  # auto-detection order
_PARSERS: dict[str, tuple[str, ...]] = {
    name: tuple(f.parser for f in _FORMATS if f.name == name) for name in FRAMEWORKS}

# Substrings that every step line (or AReaL table line) of a format contains, raw or cleaned.
# The scan only looks at lines holding one of them; a format's first marker is also what
# auto-detection looks for.
_MARKERS: dict[str, tuple[str, ...]] = {
    name: tuple(dict.fromkeys(m for f in _FORMATS if f.name == name for m in f.markers))
    for name in FRAMEWORKS}
_ANY_MARKERS = tuple(dict.fromkeys(f.markers[0] for f in _FORMATS))
_DETECT = tuple((f.name, f.parser, f.markers[0]) for f in _FORMATS)
# Formats whose " - "-joined item line, hard-wrapped by a terminal copy, is joined again.
_WRAPS: dict[str, str] = {f.name: f.parser for f in _FORMATS if f.joins_wraps}

# The same step number again among the last few is one step printed twice: by every rank of
# a torchrun job (torchtitan's "[rank3]:[titan] ... step: 5"), or by a progress bar redrawn
# without moving. A run restarted from a checkpoint resumes below these and is read again.
_RECENT_STEPS = 8
# A step line hard-wrapped by a terminal copy: the cut line waits for at most this many
# continuation lines (64 KB of them) before it is read as it is.
_WRAP_LINES = 64
_WRAP_CHARS = 65536

# A user's regex sees at most the first CUSTOM_SCAN characters of a line (docs/configuration.md).
# Its time is not ours to make linear: "(?P<step>\d+)/(?P<total>\d+)" on a 64 KB digit run
# took 35 s a line; cut to 4 KB a quadratic regex costs a fraction of a second at worst.
CUSTOM_SCAN = 4096
_AREAL_PATIENCE = 64  # lines without table progress before a pending AReaL step is given up


class CustomParser(msgspec.Struct, frozen=True):
    """A user regex with named groups: ``step`` (required), ``total``, ``time``, metrics."""

    name: str
    pattern: str
    regex: re.Pattern[str]
    metrics: tuple[tuple[str, str], ...]  # (group name, TRIAGE_METRICS name)

    def match(self, text: str, line_no: int, arrival: float) -> StepRecord | None:
        m = self.regex.search(text[:CUSTOM_SCAN])
        if not m:
            return None
        raw = m.group("step")
        if not raw or not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
            return None
        groups = self.regex.groupindex
        total = m.group("total") if "total" in groups else None
        total_n = int(total) if total and total.isascii() and total.isdigit() and len(total) < 19 else None
        stamp = _custom_time(m.group("time")) if "time" in groups else None
        values: dict[str, float] = {}
        for group, metric in self.metrics:
            value = fw.to_float(m.group(group) or "")
            if value is not None and metric not in values:
                values[metric] = value
        metrics = tuple((name, values[name]) for name in TRIAGE_METRICS if name in values)
        return StepRecord(int(raw), line_no, arrival, stamp, total_n, metrics)


def _custom_time(raw: str | None) -> float | None:
    if not raw:
        return None
    value = fw.to_float(raw)  # POSIX seconds
    if value is not None and value > 1e8:
        return value
    return fw.stamp_time(raw)


_RESERVED = ("step", "total", "time")


def compile_custom(name: str, pattern: str, metrics: Mapping[str, str] | None = None) -> CustomParser:
    """Compile one user parser; ValueError names the parser, the regex and what is wrong."""
    where = f"log parser {name!r} (regex {pattern!r})"
    try:
        regex = re.compile(pattern)
    except (re.error, TypeError, RecursionError, OverflowError) as exc:
        raise ValueError(f"{where}: the regex does not compile: {exc}") from None
    groups = regex.groupindex
    if "step" not in groups:
        raise ValueError(f"{where}: the regex has no (?P<step>...) group for the step number")
    renames = dict(metrics or {})
    for group, metric in renames.items():
        if group not in groups:
            raise ValueError(f"{where}: metrics names group {group!r}, which the regex lacks")
        if group in _RESERVED:
            raise ValueError(f"{where}: group {group!r} is the {group}, not a metric")
        if metric not in TRIAGE_METRICS:
            raise ValueError(f"{where}: {metric!r} is not a metric rltui knows "
                             f"(one of {', '.join(TRIAGE_METRICS)})")
    pairs = []
    for group in groups:
        if group in _RESERVED:
            continue
        metric = renames.get(group, group)
        if metric not in TRIAGE_METRICS:
            raise ValueError(f"{where}: group {group!r} is not a metric name "
                             f"({', '.join(TRIAGE_METRICS)}); rename it under metrics")
        pairs.append((group, metric))
    return CustomParser(name, pattern, regex, tuple(pairs))


def parsers_from_config(items: list[dict[str, Any]]) -> list[CustomParser]:
    """Validate ``logs.parsers`` entries ``{name, regex, metrics}`` and compile them."""
    if not isinstance(items, list):
        raise ValueError("logs.parsers must be a list of {name, regex, metrics} entries")
    parsers: list[CustomParser] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        label = f"logs.parsers[{index}]"
        if not isinstance(item, dict):
            raise ValueError(f"{label} must be a mapping with name, regex and metrics")
        name = item.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"{label}: name must be a non-empty string")
        label = f"log parser {name!r}"
        unknown = sorted(set(item) - {"name", "regex", "metrics"})
        if unknown:
            raise ValueError(f"{label}: unknown key(s) {', '.join(map(str, unknown))}; "
                             "allowed: name, regex, metrics")
        if name in seen:
            raise ValueError(f"{label}: defined twice")
        seen.add(name)
        regex = item.get("regex")
        if not isinstance(regex, str) or not regex:
            raise ValueError(f"{label}: regex must be a non-empty string")
        metrics = item.get("metrics") or {}
        if not isinstance(metrics, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metrics.items()):
            raise ValueError(f"{label}: metrics must map regex group names to metric names")
        parsers.append(compile_custom(name, regex, metrics))
    return parsers


def _record(parsed: fw.Parsed, line_no: int, arrival: float) -> StepRecord:
    return StepRecord(parsed.step, line_no, arrival, parsed.time, parsed.total, parsed.metrics)


class StepReader:
    """Turns one file's lines into StepRecords; keeps the little state a format needs.

    ``fmt`` is "auto" (or "unknown") to detect the format from the first step line, or one of
    rltui.model.LOG_FORMATS to fix it. ``format`` says what the file turned out to be.
    """

    def __init__(self, fmt: str = "auto", custom: Sequence[CustomParser] = ()):
        if fmt != "auto" and fmt not in LOG_FORMATS:
            raise ValueError(f"unknown log format {fmt!r}; one of auto, {', '.join(LOG_FORMATS)}")
        self.format = "unknown" if fmt == "auto" else fmt
        self._custom = tuple(custom)
        self._hf_count = 0
        # AReaL: the step whose header was read and whose table is still to come.
        self._pending: StepRecord | None = None
        self._pairs: list[tuple[str, str]] = []
        self._idle = 0
        self._recent: deque[int] = deque(maxlen=_RECENT_STEPS)
        self._hf_recent: deque[str] = deque(maxlen=_RECENT_STEPS)  # the last dicts counted
        # (id, function) of the format's parsers; narrowed to the one that matched first
        self._parsers: tuple | None = None
        self._parsers_for = ""
        # a step line cut mid-item, waiting for its continuation (text, line, arrival, n)
        self._wrap: tuple[str, int, float, int] | None = None

    # -- live path -----------------------------------------------------------------------------

    def feed(self, text: str, line_no: int, arrival: float) -> list[StepRecord]:
        """Parse one cleaned line; returns the steps it completes (usually none or one)."""
        if self._wrap is not None:
            consumed, done = self._join_wrap(text)
            if consumed:  # the line continued the cut step line
                return self._fresh(done)
            return self._fresh(done) + self.feed(text, line_no, arrival)
        if self.format == "unknown" and not self._detect(text):
            return []
        fmt = self.format
        if fmt == "areal":
            return self._fresh(self._feed_areal(text, line_no, arrival))
        if fmt == "custom":
            for parser in self._custom:
                record = parser.match(text, line_no, arrival)
                if record is not None:
                    return self._fresh([record])
            return []
        if fmt == "hf":
            return self._feed_hf(text, line_no, arrival)
        parsers = self._parsers
        if parsers is None or self._parsers_for != fmt:
            parsers = self._use_parsers(fmt)
        for name, parse in parsers:
            parsed = parse(text, arrival)
            if parsed is None:
                continue
            if len(parsers) > 1:  # the shape that matched first silences the others here
                self._parsers = ((name, parse),)
            if fmt in _WRAPS:
                # Inline fast path of _cut: a whole line ends in a value after a colon.
                colon = text.rfind(":")
                if not (text.rfind(" - ") < colon < len(text) - 1) and _cut(text):
                    self._wrap = (text, line_no, arrival, 0)
                    return []
            step = parsed.step
            if step in self._recent:  # another rank's copy, a redraw (see _fresh)
                return []
            self._recent.append(step)
            return [StepRecord(step, line_no, arrival, parsed.time, parsed.total,
                               parsed.metrics)]
        return []

    def _use_parsers(self, fmt: str):
        self._parsers_for = fmt
        self._parsers = tuple((name, fw.PARSERS[name]) for name in _PARSERS.get(fmt, ())
                              if name in fw.PARSERS)
        return self._parsers

    def flush(self) -> list[StepRecord]:
        """Emit a step still waiting for more lines (an AReaL step whose table is open, a cut
        step line whose continuation never came)."""
        out: list[StepRecord] = []
        if self._wrap is not None:
            text, line_no, arrival, _ = self._wrap
            self._wrap = None
            out = self._fresh(self._whole(text, line_no, arrival))
        return out + self._fresh(self._take_pending())

    def _fresh(self, records: list[StepRecord]) -> list[StepRecord]:
        """Drop a step number seen among the last few (another rank's copy, a redraw)."""
        if not records:
            return records
        if len(records) == 1:
            step = records[0].step
            if step in self._recent:
                return []
            self._recent.append(step)
            return records
        out = []
        for record in records:
            if record.step in self._recent:
                continue
            self._recent.append(record.step)
            out.append(record)
        return out

    def _feed_hf(self, text: str, line_no: int, arrival: float) -> list[StepRecord]:
        items = fw.hf_items(text)
        if items is None:
            return []
        step, total, step_time = fw.hf_step(items)
        metrics = fw.collect(items)
        if step_time is not None and not any(name == "step_time" for name, _ in metrics):
            metrics = fw.with_metric(metrics, "step_time", step_time)
        if step is None:
            # HF's dict has no step number: count logging steps. The same dict again within a
            # few lines is a copy (every node of a pdsh or multi-node launch prints it), not a
            # step: real steps differ at least in their epoch fraction.
            key = text.strip()
            if key in self._hf_recent:
                return []
            self._hf_recent.append(key)
            self._hf_count += 1
            return [StepRecord(self._hf_count, line_no, arrival, metrics=metrics)]
        self._hf_count = step
        return self._fresh([StepRecord(step, line_no, arrival, None, total, metrics)])

    def _whole(self, text: str, line_no: int, arrival: float) -> list[StepRecord]:
        """The step of a (re)joined line, by the format's wrap-joining parser."""
        parsed = fw.PARSERS[_WRAPS[self.format]](text, arrival)
        return [] if parsed is None else [_record(parsed, line_no, arrival)]

    def _join_wrap(self, text: str) -> tuple[bool, list[StepRecord]]:
        """(consumed, steps): ``text`` joined to the cut step line when it continues it (no
        step yet while the joined line is still cut); else the cut line's step as it is, and
        ``text`` is a line of its own (not consumed)."""
        head, line_no, arrival, count = self._wrap or ("", 0, 0.0, 0)
        self._wrap = None
        if not _continues(text):
            return False, self._whole(head, line_no, arrival)
        joined = head + text
        if _cut(joined) and count + 1 < _WRAP_LINES and len(joined) < _WRAP_CHARS:
            self._wrap = (joined, line_no, arrival, count + 1)
            return True, []
        return True, self._whole(joined, line_no, arrival)

    def _detect(self, text: str) -> bool:
        """Fix ``format`` from the first line that is a step in some format."""
        for parser in self._custom:
            if parser.regex.search(text[:CUSTOM_SCAN]):
                self.format = "custom"
                return True
        for name, parser, marker in _DETECT:
            if marker in text and fw.DETECTORS[parser](text):
                self.format = name
                return True
        return False

    def _take_pending(self) -> list[StepRecord]:
        pending, self._pending = self._pending, None
        if pending is None:
            return []
        metrics = fw.collect(self._pairs)
        self._pairs = []
        return [StepRecord(pending.step, pending.line_no, pending.arrival, pending.time,
                           pending.total, metrics)]

    def _feed_areal(self, text: str, line_no: int, arrival: float) -> list[StepRecord]:
        header = fw.parse_areal_header(text)
        if header is not None:
            done = self._take_pending()
            self._pending = _record(header, line_no, arrival)
            self._idle = 0
            return done
        if self._pending is None:
            return []
        if fw.areal_table_end(text):
            return self._take_pending()
        row = fw.areal_row(text)
        if row:
            self._pairs.extend(row)
            self._idle = 0
            return []
        # Other lines ("Stats (1/1):", the table's top border, other roles' lines in a
        # merged log) are waited through, but not forever: a table that never closes (a
        # crash mid-print) must not hold the step back.
        self._idle += 1
        if self._idle > _AREAL_PATIENCE:
            return self._take_pending()
        return []

    # -- catch-up path -------------------------------------------------------------------------

    def _markers(self) -> tuple[str, ...]:
        if self._wrap is not None:
            return ()  # the line after a cut step line may continue it, marker or not
        if self.format == "unknown":
            return () if self._custom else _ANY_MARKERS
        if self.format == "custom":
            return ()
        return _MARKERS.get(self.format, ("\0never",))

    def scan(self, chunk: str, first_line_no: int, arrival: float) -> list[StepRecord]:
        """Steps in a block of raw lines whose first line is ``first_line_no``.

        Only lines holding a marker of the format are cleaned and parsed; line numbers are
        found by counting newlines between them. State carries over to the next scan/feed
        (HF's count, an AReaL table split between blocks).
        """
        out: list[StepRecord] = []
        n = len(chunk)
        pos = 0
        line_no = first_line_no
        while pos < n:
            fmt = self.format
            wrap = self._wrap is None
            markers = self._markers()
            changed = False
            for start, end in _candidates(chunk, pos, markers):
                line_no += chunk.count("\n", pos, start)
                pos = start
                out.extend(self.feed(strip_noise(chunk[start:end]).text, line_no, arrival))
                if self.format != fmt or (self._wrap is None) != wrap:
                    # detected, or a cut line began or ended: go on with the right markers
                    changed = True
                    break
            if not changed:
                break
            line_no += chunk.count("\n", pos, end)
            pos = end
            if pos < n:  # step over the newline that ends the detecting line
                pos += 1
                line_no += 1
        return out


def _cut(text: str) -> bool:
    """A `` - ``-joined step line whose last item is cut: no ``key:value`` after the last separator
    (``... - timi``), a key with no value yet (``... - timing_s/step:``), or a dangling
    separator. A line cut right after a whole value cannot be told from a whole line."""
    tail = text.rstrip("\r\n")
    if tail.endswith((" -", " - ")):
        return True
    at = tail.rfind(" - ")
    if at < 0:
        return False
    item = tail[at + 3:]
    colon = item.find(":")
    return colon < 0 or colon == len(item) - 1


def _continues(text: str) -> bool:
    """A terminal's hard wrap of such a line: no prefix (it was part of one line), no
    new step, and spaces only inside `` - `` separators (keys and values hold none)."""
    if not text or text.startswith("step:") or len(text) > _WRAP_CHARS:
        return False
    rest = text.replace(" - ", "\0").strip(" -")
    return not any(c.isspace() for c in rest)


def _candidates(chunk: str, pos: int, markers: tuple[str, ...]):
    """(start, end) of each line from ``pos`` on that contains one of ``markers``; every line
    when ``markers`` is empty. ``end`` excludes the newline."""
    n = len(chunk)
    if not markers:
        while pos < n:
            end = chunk.find("\n", pos)
            end = n if end < 0 else end
            yield pos, end
            pos = end + 1
        return
    find, rfind = chunk.find, chunk.rfind
    nexts = [find(m, pos) for m in markers]
    while True:
        hits = [h for h in nexts if h >= 0]
        if not hits:
            return
        hit = min(hits)
        start = max(rfind("\n", pos, hit) + 1, pos)
        end = find("\n", hit)
        end = n if end < 0 else end
        yield start, end
        nexts = [h if h > end or h < 0 else find(m, end) for h, m in zip(nexts, markers)]


def scan_steps(chunk: str, fmt: str, first_line_no: int, arrival: float) -> list[StepRecord]:
    """Every step in a self-contained block of raw log text (its last pending step included).

    For a file read block by block, keep one ``StepReader`` and call its ``scan`` instead, so
    that HF's step count and an AReaL table cut between blocks carry over.
    """
    reader = StepReader(fmt)
    return reader.scan(chunk, first_line_no, arrival) + reader.flush()


def detect_format(chunk: str, custom: Sequence[CustomParser] = ()) -> str:
    """The format of the first step line in a block of raw log text, or "unknown"."""
    reader = StepReader("auto", custom)
    for start, end in _candidates(chunk, 0, reader._markers()):
        if reader._detect(strip_noise(chunk[start:end]).text):
            break
    return reader.format
