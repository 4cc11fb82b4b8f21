"""py-spy dumps (text or ``--json``) -> ProcessDump values. Pure: text in, values out.

Error policy: ``parse_text`` and ``parse_json`` return what they could read and raise
``DumpParseError`` (with the reason) only when the input holds no dump at all. ``parse_any`` and
``read_folder_entries`` never raise: they return ``(dumps, problems)``, problems being short
sentences that name the source, so a folder with one bad file still yields the other ranks.

Stacks are bounded: a thread keeps its innermost ``KEEP_INNER`` and outermost ``KEEP_OUTER``
frames with one marker frame between them, so a recursion of 100 000 frames costs no more memory
than one of 1 000 (the innermost frames say where it waits, the outermost which loop it is in).
"""

from __future__ import annotations

import json
import re
import sys
from collections import deque
from collections.abc import Iterable
from dataclasses import replace

from rltui.model import ERROR, Frame, ProcessDump, ThreadStack

KEEP_INNER = 800
KEEP_OUTER = 200
ELIDED = "<frames elided>"  # name of the marker frame; its filename says how many
MAX_THREADS = 4096  # per process; a torch process has ~150, more means garbage or a fork bomb
MAX_PROBLEMS_PER_SOURCE = 8

_PROCESS = re.compile(r"^Process (\d+):(?: (.*))?$")
_PYTHON = re.compile(r"^Python v(\S+)(?: \((.*)\))?$")
# py-spy 0.4 prints the OS thread id in decimal; older releases printed the pthread id in hex
_THREAD = re.compile(r'^Thread (0x[0-9A-Fa-f]+|\d+) \(([^)]*)\)(?:: "(.*)")?$')
_STATUSES = {"idle", "active", "active+gil", "idle+gil"}
_RANK = re.compile(r"(?<![a-z])rank[-_]?(\d{1,6})(?!\d)")
_PKG_DIRS = ("site-packages/", "dist-packages/")

class DumpParseError(ValueError):
    """The input holds no py-spy dump; the message says why (and names the source)."""


# -- frames ----------------------------------------------------------------------------------------

def _is_native(filename: str) -> bool:
    # py-spy --native frames come from .c/.so files; ``<frozen x>`` and ``<string>`` are Python
    return not filename.endswith((".py", ".pyx")) and not filename.startswith("<")


def trim_path(filename: str) -> str:
    """Drop the interpreter-specific prefix: ``.../site-packages/torch/x.py`` -> ``torch/x.py``
    (ranks may run from different virtualenvs; the same code must group together)."""
    path = filename.replace("\\", "/")
    for marker in _PKG_DIRS:
        at = path.rfind(marker)
        if at >= 0:
            return path[at + len(marker):]
    return path


def frame_key(frame: Frame, with_line: bool = False) -> tuple:
    """A hashable identity for grouping equal frames across ranks: name plus the file with any
    site-packages/dist-packages prefix trimmed (ranks may run from different virtualenvs)."""
    key: tuple = (frame.name, trim_path(frame.filename))
    return key + (frame.line,) if with_line else key


class _FrameSink:
    """Collects one thread's frames innermost first, keeping only both ends of a deep stack."""

    __slots__ = ("dropped", "inner", "outer")

    def __init__(self) -> None:
        self.inner: list[Frame] = []
        self.outer: deque[Frame] = deque(maxlen=KEEP_OUTER)
        self.dropped = 0

    def add(self, frame: Frame) -> None:
        if len(self.inner) < KEEP_INNER:
            self.inner.append(frame)
            return
        if len(self.outer) == KEEP_OUTER:
            self.dropped += 1
        self.outer.append(frame)

    def frames(self) -> tuple[Frame, ...]:
        if not self.dropped:
            return (*self.inner, *self.outer)
        marker = Frame(ELIDED, f"{self.dropped} frames", 0)
        return (*self.inner, marker, *self.outer)


# Function and file names repeat across threads, ranks and samples: one string object per
# distinct name keeps thousands of dumps small, and comparing or hashing their frames cheap.
_intern = sys.intern


def _status(active: bool, gil: bool) -> str:
    return ("active" if active else "idle") + ("+gil" if gil else "")


# -- text ------------------------------------------------------------------------------------------

def _split_frame(line: str) -> tuple[str, str, int] | None:
    """``    name (file:line)`` -> (name, file, line); None for any other line.

    The file is the last parenthesised group: a --native C++ name may hold parentheses of its
    own (``{lambda(c10d::Work*)#1}::_FUN (libtorch_python.so)``). The file may hold colons or
    parentheses too (``<frozen runpy>:88``, ``C:\\Program Files (x86)\\x.py:3``), so its
    group is found by balancing parentheses from the end, and the line number is only the
    trailing ``:digits``.
    """
    if len(line) < 8 or not line.startswith("    ") or line[4] == " " or line[-1] != ")":
        return None
    at = line.rfind(" (", 5)
    if at < 0:
        return None
    tail = line[at + 2:-1]
    if "(" in tail or ")" in tail:
        depth, at = 0, -1
        for i in range(len(line) - 1, 4, -1):
            ch = line[i]
            if ch == ")":
                depth += 1
            elif ch == "(":
                depth -= 1
                if depth == 0:
                    at = i - 1 if line[i - 1] == " " else -1
                    break
        if at < 5:
            return None
        tail = line[at + 2:-1]
    name = line[4:at]
    file, colon, num = tail.rpartition(":")
    if colon and num.isdigit():
        return name, file, int(num)
    return name, tail, 0


class _TextDump:
    __slots__ = ("command", "expect_cmd", "pid", "python", "sink", "thread", "threads")

    def __init__(self, pid: int, command: str) -> None:
        self.pid, self.command, self.python = pid, command, ""
        self.threads: list[ThreadStack] = []
        self.sink: _FrameSink | None = None
        self.thread: tuple[int, str, str] | None = None
        self.expect_cmd = True  # a command line may span lines (``python -c "..."``)

    def close_thread(self) -> None:
        if self.thread is not None and self.sink is not None and len(self.threads) < MAX_THREADS:
            tid, status, name = self.thread
            self.threads.append(ThreadStack(tid, name, status, self.sink.frames()))
        self.thread, self.sink = None, None

    def build(self, source: str, message: str = "") -> ProcessDump:
        self.close_thread()
        status, msg = "ok", message
        if not self.threads:
            status, msg = ERROR, message or "the dump holds no threads (cut short?)"
        return ProcessDump(pid=self.pid, threads=tuple(self.threads), python_version=self.python,
                           command=self.command, source=source, status=status, message=msg)


def _parse_text(text: str, source: str) -> tuple[list[ProcessDump], list[str]]:
    dumps: list[ProcessDump] = []
    problems: list[str] = []
    cur: _TextDump | None = None
    unknown: list[str] = []
    lines = text.splitlines()
    # a file that does not end in a newline was most likely cut off while being written
    cut = bool(text) and not text.endswith("\n")
    for i, raw in enumerate(lines):
        line = raw.rstrip("\r")
        last = cut and i == len(lines) - 1
        m = _PROCESS.match(line)
        if m:
            if cur is not None:
                dumps.append(cur.build(source))
            cur = _TextDump(int(m.group(1)), m.group(2) or "")
            continue
        m = _THREAD.match(line)
        if m:
            if cur is None:  # threads without a header: keep them, the pid is unknown
                cur = _TextDump(0, "")
                problems.append(f"{source}: no 'Process N:' header; pid unknown")
            cur.close_thread()
            cur.expect_cmd = False
            tid = m.group(1)
            status = m.group(2) if m.group(2) in _STATUSES else "unknown"
            cur.thread = (int(tid, 16) if tid.startswith("0x") else int(tid), status,
                          m.group(3) or "")
            cur.sink = _FrameSink()
            continue
        if cur is not None and cur.sink is not None:
            frame = _split_frame(line)
            if frame is not None and not last:
                name, filename, num = frame
                filename = _intern(filename)
                cur.sink.add(Frame(_intern(name), filename, num, native=_is_native(filename)))
                continue
            if line.startswith("        ") or not line.strip():
                continue  # --locals blocks (indent 8+) and blank lines
        if cur is not None and cur.sink is None:
            m = _PYTHON.match(line)
            if m:
                cur.python, cur.expect_cmd = m.group(1), False
                continue
            if cur.expect_cmd:
                cur.command += "\n" + line
                continue
            if not line.strip():
                continue
        if last and cur is not None:
            continue  # reported below as a cut-off file
        if line.strip():
            unknown.append(line)
    if cur is not None:
        dumps.append(cur.build(source))
    if cut and dumps:
        problems.append(f"{source}: the file ends mid-line (cut short?); its last line was "
                        f"skipped")
    if unknown and dumps:
        problems.append(f"{source}: {len(unknown)} line(s) not understood, e.g. "
                        f"{unknown[0][:80]!r}")
    if not dumps:
        raise DumpParseError(_not_a_dump(text, source))
    return dumps, problems


def _not_a_dump(text: str, source: str) -> str:
    stripped = text.strip()
    if not stripped:
        return f"{source}: empty file, no py-spy dump in it"
    first = stripped.splitlines()[0][:100]
    if first.startswith("Error:"):
        # py-spy's own failure message saved instead of a dump; timeouts say so
        return f"{source}: py-spy failed instead of dumping: {first[6:].strip()}"
    return f"{source}: not py-spy output (starts with {first!r})"


def parse_text(text: str, source: str = "") -> list[ProcessDump]:
    """One or several concatenated ``py-spy dump`` text outputs, in file order."""
    return _parse_text(text, source)[0]


# -- JSON ------------------------------------------------------------------------------------------

def _json_values(text: str, source: str, problems: list[str]) -> list:
    """Top-level JSON values one after another (a shell loop over ``py-spy dump --json``). A
    value cut short is salvaged thread by thread."""
    dec = json.JSONDecoder()
    values: list = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos] in " \t\r\n\ufeff":
            pos += 1
        if pos >= n:
            return values
        try:
            value, pos = dec.raw_decode(text, pos)
        except ValueError as exc:
            if text[pos] != "[":
                if not values:
                    raise DumpParseError(f"{source}: not valid JSON ({exc.msg} at char "
                                         f"{exc.pos})") from None
                problems.append(f"{source}: stray text after the JSON dumps was ignored")
                return values
            salvaged = _salvage(text, pos + 1, dec)
            if not salvaged and not values:
                raise DumpParseError(f"{source}: JSON cut short ({exc.msg} at char {exc.pos}) "
                                     f"before the first complete thread") from None
            problems.append(f"{source}: JSON cut short ({exc.msg} at char {exc.pos}); "
                            f"{len(salvaged)} complete thread(s) recovered")
            values.append(salvaged)
            return values
        values.append(value)


def _salvage(text: str, pos: int, dec: json.JSONDecoder) -> list:
    items: list = []
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        try:
            item, pos = dec.raw_decode(text, pos)
        except ValueError:
            return items
        items.append(item)


def _json_frame(raw: object) -> Frame | None:
    if not isinstance(raw, dict):
        return None
    name = raw.get("name")
    short, full = raw.get("short_filename"), raw.get("filename")
    filename = short if isinstance(short, str) and short else full
    if not isinstance(name, str) or not isinstance(filename, str):
        return None
    line = raw.get("line")
    line = line if isinstance(line, int) and not isinstance(line, bool) and line > 0 else 0
    module = raw.get("module") if isinstance(raw.get("module"), str) else ""
    return Frame(_intern(name), _intern(filename), line, _intern(module),
                 native=_is_native(filename))


def _json_threads(values: Iterable, source: str, pid: int | None,
                  problems: list[str]) -> list[ProcessDump]:
    by_pid: dict[int, list[ThreadStack]] = {}
    bad = 0
    for value in values:
        if not isinstance(value, list):
            raise DumpParseError(f"{source}: JSON but not a py-spy --json dump (expected an "
                                 f"array of threads, got {type(value).__name__})")
        if not value and pid is not None:
            by_pid.setdefault(pid, [])
        for t in value:
            if not isinstance(t, dict) or not isinstance(t.get("frames"), list):
                bad += 1
                continue
            tpid = t.get("pid") if isinstance(t.get("pid"), int) else pid
            tid = t.get("os_thread_id")
            if not isinstance(tid, int):
                tid = t.get("thread_id") if isinstance(t.get("thread_id"), int) else 0
            name = t.get("thread_name") if isinstance(t.get("thread_name"), str) else ""
            sink = _FrameSink()
            for raw in t["frames"]:
                frame = _json_frame(raw)
                if frame is not None:
                    sink.add(frame)
            threads = by_pid.setdefault(tpid if tpid is not None else 0, [])
            if len(threads) < MAX_THREADS:
                threads.append(ThreadStack(tid, name, _status(t.get("active") is True,
                                                              t.get("owns_gil") is True),
                                           sink.frames()))
    if bad:
        problems.append(f"{source}: {bad} JSON entr{'y was' if bad == 1 else 'ies were'} not "
                        f"a py-spy thread and skipped")
    if not by_pid:
        raise DumpParseError(f"{source}: a py-spy --json dump with no threads in it")
    out = []
    for p, threads in by_pid.items():
        status, msg = ("ok", "") if threads else (ERROR, "the dump holds no threads")
        out.append(ProcessDump(pid=p, threads=tuple(threads), source=source, status=status,
                               message=msg))
    return out


def _parse_json(data: str | list, source: str, pid: int | None
                ) -> tuple[list[ProcessDump], list[str]]:
    problems: list[str] = []
    values = _json_values(data, source, problems) if isinstance(data, str) else [data]
    if not values:
        raise DumpParseError(f"{source}: empty file, no py-spy dump in it")
    return _json_threads(values, source, pid, problems), problems


def parse_json(data: str | list, source: str = "", pid: int | None = None) -> list[ProcessDump]:
    """``py-spy dump --json`` output (text or already decoded), one dump per pid found in it.
    ``pid`` fills in threads that carry none."""
    return _parse_json(data, source, pid)[0]


# -- any -------------------------------------------------------------------------------------------

def parse_any(text: str, source: str = "") -> tuple[list[ProcessDump], list[str]]:
    """Sniff JSON or text and parse; never raises. Garbage gives ``([], [reason])``."""
    try:
        head = text.lstrip(" \t\r\n\ufeff")[:1]
        if head in ("[", "{"):
            return _parse_json(text, source, None)
        return _parse_text(text, source)
    except DumpParseError as exc:
        return [], [str(exc)]
    except (RecursionError, ValueError, TypeError) as exc:  # deeply nested or odd JSON
        return [], [f"{source}: could not be read as a py-spy dump ({type(exc).__name__})"]


def rank_from_filename(name: str) -> int | None:
    """The rank in a dump's file name: rank3.txt, rank_3.json, dump-rank-3.txt, RANK03 -> 3.
    ``rank`` must not be the tail of a longer word (``frank3``, ``crank2``)."""
    base = re.split(r"[/\\]", name)[-1].lower()
    m = _RANK.search(base)
    return int(m.group(1)) if m else None


def read_folder_entries(files: list[tuple[str, str]]) -> tuple[list[ProcessDump], list[str]]:
    """Parse (file name, content) pairs from one folder into dumps ordered by rank, then pid
    (dumps with no rank last). Never raises; every oddity becomes a problem sentence."""
    dumps: list[ProcessDump] = []
    problems: list[str] = []
    for name, content in files:
        try:
            found, probs = parse_any(content, name)
        except Exception as exc:  # noqa: BLE001 - a parser bug must not lose the other ranks
            found, probs = [], [f"{name}: could not be parsed ({type(exc).__name__}: {exc})"]
        problems.extend(probs[:MAX_PROBLEMS_PER_SOURCE])
        rank = rank_from_filename(name)
        if rank is not None and len(found) > 1:
            problems.append(f"{name}: holds {len(found)} dumps, so the rank in its name is "
                            f"not used")
            rank = None
        for d in found:
            d = replace(d, rank=rank) if rank is not None else d
            if d.status != "ok":
                problems.append(f"{name}: pid {d.pid}: {d.message}")
            dumps.append(d)
    dumps.sort(key=lambda d: (d.rank is None, d.rank if d.rank is not None else 0, d.pid))
    problems.extend(_folder_checks(dumps, len(files)))
    return dumps, problems


def _folder_checks(dumps: list[ProcessDump], nfiles: int) -> list[str]:
    out: list[str] = []
    if not dumps:
        out.append(f"no py-spy dumps found in {nfiles} file(s)")
        return out
    seen: dict[int, list[str]] = {}
    for d in dumps:
        if d.rank is not None:
            seen.setdefault(d.rank, []).append(d.source)
    for rank, sources in seen.items():
        if len(sources) > 1:
            out.append(f"rank {rank} appears {len(sources)} times ({', '.join(sources)}); "
                       f"the last one is compared")
    pids: dict[int, list[str]] = {}
    for d in dumps:
        if d.pid:
            pids.setdefault(d.pid, []).append(d.source)
    for pid, sources in pids.items():
        if len(sources) > 1:
            out.append(f"pid {pid} was dumped {len(sources)} times ({', '.join(sources)})")
    versions = sorted({d.python_version for d in dumps if d.python_version})
    if len(versions) > 1:
        out.append(f"dumps come from different Python versions ({', '.join(versions)}); "
                   f"frame names may differ between them (3.11+ prints Class.method)")
    return out
