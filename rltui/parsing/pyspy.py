"""Stack dumps (py-spy ``--json``, and every text form ``stacktext`` reads) -> ProcessDump
values. Pure: text in, values out.

Error policy: ``parse_text`` and ``parse_json`` return what they could read and raise
``DumpParseError`` (with the reason) only when the input holds no dump at all. ``parse_any`` and
``read_folder_entries`` never raise: they return ``(dumps, problems)``, problems being short
sentences that name the source, so a folder with one bad file still yields the other ranks.

Stacks are bounded (``stackframes``): the innermost and outermost frames of a deep stack are kept
with one marker frame between them.

Ranks of one job print the same stacks, so a folder is read with one ``StackCache``: a py-spy
``--json`` stack is converted to frames once per distinct stack (later ranks reuse the very same
frames tuple, which the merge converts once too), a text frame line once per distinct line.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from operator import itemgetter

import msgspec

from rltui.model import ERROR, Frame, ProcessDump, ThreadStack, replace
from rltui.parsing import stacktext
from rltui.parsing.stackframes import (  # noqa: F401 - API
    CUT,
    ELIDED,
    KEEP_INNER,
    KEEP_OUTER,
    MAX_PROBLEMS_PER_SOURCE,
    MAX_THREADS,
    FrameSink,
    frame_key,
    is_native,
    trim_path,
)

_RANK = re.compile(r"(?<![a-z])rank[-_]?(\d{1,6})(?!\d)")
_intern = sys.intern
# A JSON document starts with an array of objects (or an object): "[{", "[]", "{" + quote.
_json_start = re.compile(r'[\s\ufeff]{0,64}(?:\[\s{0,64}[{\]]|\{\s{0,64}")')
# Integers decode to their digits as bytes, a type no other JSON value has: a frame's raw values
# are then an exact cache key (``1 == 1.0 == True``, but ``"line": true`` is no line number).
_DECODER = json.JSONDecoder(parse_int=str.encode)
_RAW_FRAME = itemgetter("name", "short_filename", "filename", "line", "module")
_THREAD_KEYS = ("pid", "os_thread_id", "thread_id", "thread_name", "active", "owns_gil", "frames")
_RAW_THREAD = itemgetter(*_THREAD_KEYS)
_MISS = object()
MAX_CACHED_FRAMES = 1 << 18  # raw frames kept as keys across a folder (~100 MB at most)
# A name, file or module of a --json frame is cut here (py-spy writes paths and qualified names,
# never this long), and a frame holding a longer one is not keyed in the cache: a folder of
# hostile files keeps no more than that per frame, whatever each file's size.
MAX_FIELD = 4096
MAX_KEYED_DEPTH = 4 * (KEEP_INNER + KEEP_OUTER)  # a deeper stack is converted, not keyed


class StackCache:
    """What one folder's files share: each distinct py-spy ``--json`` stack converted once (its
    raw frames' values -> the frames tuple), each distinct frame once, each distinct text frame
    line once. Bounded: past ``MAX_CACHED_FRAMES`` raw frames nothing more is kept (a folder of
    all-different stacks is garbage, not a job)."""

    __slots__ = ("frames", "kept", "lines", "stacks")

    def __init__(self) -> None:
        self.stacks: dict[tuple, tuple[Frame, ...]] = {}
        self.frames: dict[tuple, Frame | None] = {}
        self.lines: dict[str, Frame | None] = {}  # text frame lines (``stacktext``)
        self.kept = 0


class DumpParseError(ValueError):
    """The input holds no stack dump; the message says why (and names the source)."""


def _status(active: bool, gil: bool) -> str:
    return ("active" if active else "idle") + ("+gil" if gil else "")


# -- text ------------------------------------------------------------------------------------------

def _parse_text(text: str, source: str, cache: StackCache | None = None
                ) -> tuple[list[ProcessDump], list[str]]:
    dumps, problems = stacktext.read(text, source,
                                     frames=cache.lines if cache is not None else None)
    if not dumps:
        raise DumpParseError(stacktext.no_dump_reason(text, source))
    return dumps, problems


def parse_text(text: str, source: str = "") -> list[ProcessDump]:
    """Every text stack dump in ``text`` (py-spy, faulthandler, ...; see ``stacktext``), in file
    order."""
    return _parse_text(text, source)[0]


# -- JSON ------------------------------------------------------------------------------------------

def _json_values(text: str, source: str, problems: list[str]) -> list:
    """Top-level JSON values one after another (a shell loop over ``py-spy dump --json``). A
    value cut short is salvaged thread by thread."""
    dec = _DECODER
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


def _int(value: object) -> int | None:
    """A JSON integer as ``_DECODER`` gives it (bytes) or as ``json`` does (int); else None."""
    if value.__class__ is bytes:
        # more digits than any id or line has: not a number here (int() refuses > 4300 digits)
        return int(value) if len(value) <= 20 else None
    return value if isinstance(value, int) else None


def _frame_of(name: object, short: object, full: object, line: object,
              module: object) -> Frame | None:
    filename = short if isinstance(short, str) and short else full
    if not isinstance(name, str) or not isinstance(filename, str):
        return None
    if len(name) > MAX_FIELD or len(filename) > MAX_FIELD:
        name, filename = _cut(name), _cut(filename)
    line = _int(line) if not isinstance(line, bool) else None
    line = line if line is not None and line > 0 else 0
    module = _cut(module) if isinstance(module, str) else ""
    return Frame(_intern(name), _intern(filename), line, _intern(module),
                 native=is_native(filename))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_FIELD else text[:MAX_FIELD - 1] + "\u2026"


def _long(key: tuple) -> bool:
    """Whether a raw frame holds a string over MAX_FIELD (it is then converted, not kept)."""
    return any(len(v) > MAX_FIELD for v in key if v.__class__ is str)


def _json_frame(raw: object) -> Frame | None:
    if not isinstance(raw, dict):
        return None
    return _frame_of(raw.get("name"), raw.get("short_filename"), raw.get("filename"),
                     raw.get("line"), raw.get("module"))


def _json_stack(raw_frames: list, cache: StackCache | None) -> tuple[Frame, ...]:
    """One thread's frames, bounded; with a cache, converted once per distinct stack."""
    key = None
    if cache is not None and len(raw_frames) <= MAX_KEYED_DEPTH:
        try:
            key = tuple(map(_RAW_FRAME, raw_frames))  # one C-level pass, no call per frame
            hit = cache.stacks.get(key)
            if hit is None and any(map(_long, key)):  # only for a stack not seen yet
                key = None
        except (KeyError, TypeError):  # a frame that is no py-spy frame, or odd values
            key = hit = None
        if hit is not None:
            return hit
    sink = FrameSink()
    if key is None:
        for raw in raw_frames:
            frame = _json_frame(raw)
            if frame is not None:
                sink.add(frame)
        return sink.frames()
    known = cache.frames
    keep = cache.kept + len(key) <= MAX_CACHED_FRAMES
    for fkey in key:
        frame = known.get(fkey, _MISS)
        if frame is _MISS:
            frame = _frame_of(*fkey)
            if keep:
                known[fkey] = frame
        if frame is not None:
            sink.add(frame)
    frames = sink.frames()
    if keep:
        cache.stacks[key] = frames
        cache.kept += len(key)
    return frames


def _json_threads(values: Iterable, source: str, pid: int | None, problems: list[str],
                  cache: StackCache | None, rank: int | None = None) -> list[ProcessDump]:
    by_pid: dict[int, list[ThreadStack]] = {}
    bad = 0
    for value in values:
        if not isinstance(value, list):
            raise DumpParseError(f"{source}: JSON but not a py-spy --json dump (expected an "
                                 f"array of threads, got {type(value).__name__})")
        if not value and pid is not None:
            by_pid.setdefault(pid, [])
        for t in value:
            try:
                tpid, os_tid, tid, name, active, gil, raw_frames = _RAW_THREAD(t)
            except (KeyError, TypeError):  # a key missing: each one looked up, or no object
                if not isinstance(t, dict):
                    bad += 1
                    continue
                tpid, os_tid, tid, name, active, gil, raw_frames = map(t.get, _THREAD_KEYS)
            if not isinstance(raw_frames, list):
                bad += 1
                continue
            tpid = _int(tpid)
            tpid = tpid if tpid is not None else pid
            os_tid = _int(os_tid)
            if os_tid is None:
                tid = _int(tid)
                os_tid = tid if tid is not None else 0
            name = name if isinstance(name, str) else ""
            threads = by_pid.setdefault(tpid if tpid is not None else 0, [])
            if len(threads) < MAX_THREADS:
                threads.append(ThreadStack(os_tid, name, _status(active is True, gil is True),
                                           _json_stack(raw_frames, cache)))
    if bad:
        problems.append(f"{source}: {bad} JSON entr{'y was' if bad == 1 else 'ies were'} not "
                        f"a py-spy thread and skipped")
    return _dumps_of(by_pid, source, rank)


def _dumps_of(by_pid: dict[int, list[ThreadStack]], source: str, rank: int | None
              ) -> list[ProcessDump]:
    if not by_pid:
        raise DumpParseError(f"{source}: a py-spy --json dump with no threads in it")
    if len(by_pid) > 1:
        rank = None  # the rank of a file (its name's) is no rank of several processes
    out = []
    for p, threads in by_pid.items():
        status, msg = ("ok", "") if threads else (ERROR, "the dump holds no threads")
        out.append(ProcessDump(pid=p, rank=rank, threads=tuple(threads), source=source,
                               status=status, message=msg))
    return out


# -- the well-formed fast path ---------------------------------------------------------------------
# py-spy's own ``--json`` output, exactly as it writes it, is decoded straight into these types by
# msgspec (in C, the ``locals`` and other fields left unread): several times faster than
# ``json`` plus the checks below. Anything else (a value of another type, an integer past 64 bits,
# a cut or concatenated file, a BOM) fails this schema and takes the general path, which salvages
# what it can and says why. Integers here are exact ints (``true`` and ``1.0`` are no line), so the
# frames themselves key the cache.


class _WellFormedFrame(msgspec.Struct, frozen=True, gc=False):
    name: str
    filename: str
    line: int
    module: str | None = None
    short_filename: str | None = None


class _WellFormedThread(msgspec.Struct, gc=False):
    frames: list[_WellFormedFrame]
    pid: int | None = None
    thread_id: int | None = None
    os_thread_id: int | None = None
    thread_name: str | None = None
    active: bool = False
    owns_gil: bool = False


_WELL_FORMED = msgspec.json.Decoder(list[_WellFormedThread])


def _well_formed(text: str) -> list[_WellFormedThread] | None:
    try:
        return _WELL_FORMED.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return None


def _long_frame(f: _WellFormedFrame) -> bool:
    return len(f.name) > MAX_FIELD or len(f.filename) > MAX_FIELD or \
        len(f.short_filename or "") > MAX_FIELD or len(f.module or "") > MAX_FIELD


def _well_formed_stack(raw: list[_WellFormedFrame], cache: StackCache | None
                       ) -> tuple[Frame, ...]:
    """``_json_stack`` for frames that passed the schema."""
    key = tuple(raw) if cache is not None and len(raw) <= MAX_KEYED_DEPTH else None
    if key is not None:
        hit = cache.stacks.get(key)  # type: ignore[union-attr]
        if hit is not None:
            return hit
        if any(map(_long_frame, key)):
            key = None
    sink = FrameSink()
    known = cache.frames if key is not None else {}  # type: ignore[union-attr]
    keep = key is not None and cache.kept + len(key) <= MAX_CACHED_FRAMES  # type: ignore[union-attr]
    for f in raw:
        frame = known.get(f, _MISS)  # type: ignore[call-overload]
        if frame is _MISS:
            frame = _frame_of(f.name, f.short_filename, f.filename, f.line, f.module)
            if keep:
                known[f] = frame  # type: ignore[index]
        if frame is not None:
            sink.add(frame)
    frames = sink.frames()
    if keep:
        cache.stacks[key] = frames  # type: ignore[union-attr,index]
        cache.kept += len(key)  # type: ignore[union-attr,arg-type]
    return frames


def _well_formed_threads(threads: list[_WellFormedThread], pid: int | None,
                         cache: StackCache | None) -> dict[int, list[ThreadStack]]:
    by_pid: dict[int, list[ThreadStack]] = {}
    for t in threads:
        tpid = t.pid if t.pid is not None else pid
        os_tid = t.os_thread_id if t.os_thread_id is not None else \
            t.thread_id if t.thread_id is not None else 0
        group = by_pid.setdefault(tpid if tpid is not None else 0, [])
        if len(group) < MAX_THREADS:
            group.append(ThreadStack(os_tid, t.thread_name or "", _status(t.active, t.owns_gil),
                                     _well_formed_stack(t.frames, cache)))
    return by_pid


def _parse_json(data: str | list, source: str, pid: int | None,
                cache: StackCache | None = None, rank: int | None = None
                ) -> tuple[list[ProcessDump], list[str]]:
    problems: list[str] = []
    if isinstance(data, str):
        fast = _well_formed(data)
        if fast:
            return _dumps_of(_well_formed_threads(fast, pid, cache), source, rank), problems
        values = _json_values(data, source, problems)
        cache = cache if cache is not None else StackCache()
    else:
        # decoded elsewhere: its integers are ints, so its raw values are no exact cache key
        values, cache = [data], None
    if not values:
        raise DumpParseError(f"{source}: empty file, no py-spy dump in it")
    return _json_threads(values, source, pid, problems, cache, rank), problems


def parse_json(data: str | list, source: str = "", pid: int | None = None) -> list[ProcessDump]:
    """``py-spy dump --json`` output (text or already decoded), one dump per pid found in it.
    ``pid`` fills in threads that carry none."""
    return _parse_json(data, source, pid)[0]


# -- any -------------------------------------------------------------------------------------------

def parse_any(text: str, source: str = "", cache: StackCache | None = None,
              rank: int | None = None) -> tuple[list[ProcessDump], list[str]]:
    """Sniff JSON or text and parse; never raises. Garbage gives ``([], [reason])``.
    ``cache``: shared by the files of one folder (equal stacks converted once). ``rank``: the
    file name's, given to a py-spy ``--json`` dump of one process (text dumps name their own;
    ``read_folder_entries`` gives them the name's where they do not)."""
    try:
        if _json_start.match(text):
            try:
                return _parse_json(text, source, None, cache, rank)
            except DumpParseError as exc:
                # "[rank0]: Thread ..." or "[2025-...] Pyspy dump" also start with a bracket
                try:
                    return _parse_text(text, source, cache)
                except DumpParseError:
                    raise exc from None
        return _parse_text(text, source, cache)
    except DumpParseError as exc:
        return [], [str(exc)]
    except (RecursionError, ValueError, TypeError) as exc:  # deeply nested or odd JSON
        return [], [f"{source}: could not be read as a py-spy dump ({type(exc).__name__})"]


def rank_from_filename(name: str) -> int | None:
    """The rank in a dump's file name: rank3.txt, rank_3.json, dump-rank-3.txt, RANK03 -> 3.
    ``rank`` must not be the tail of a longer word (``frank3``, ``crank2``)."""
    base = name.replace("\\", "/").rpartition("/")[2].lower()
    m = _RANK.search(base)
    return int(m.group(1)) if m else None


def read_folder_entries(files: Iterable[tuple[str, str]]
                        ) -> tuple[list[ProcessDump], list[str]]:
    """Parse (file name, content) pairs from one folder into dumps ordered by rank, then pid
    (dumps with no rank last). Never raises; every oddity becomes a problem sentence.

    ``files`` is read one pair at a time: a generator that reads each file as it is asked for
    keeps one file in memory, not the folder."""
    dumps: list[ProcessDump] = []
    problems: list[str] = []
    cache = StackCache()
    nfiles = 0
    for name, content in files:
        nfiles += 1
        rank = rank_from_filename(name)
        try:
            found, probs = parse_any(content, name, cache, rank)
        except Exception as exc:  # noqa: BLE001 - a parser bug must not lose the other ranks
            found, probs = [], [f"{name}: could not be parsed ({type(exc).__name__}: {exc})"]
        problems.extend(probs[:MAX_PROBLEMS_PER_SOURCE])
        if rank is not None and len(found) > 1 and any(d.rank is None for d in found):
            problems.append(f"{name}: holds {len(found)} dumps, so the rank in its name is "
                            f"not used")
            rank = None
        for d in found:
            d = replace(d, rank=rank) if rank is not None and d.rank is None else d
            if d.status != "ok":
                problems.append(f"{name}: pid {d.pid}: {d.message}")
            dumps.append(d)
    dumps.sort(key=lambda d: (d.rank is None, d.rank if d.rank is not None else 0, d.pid))
    problems.extend(_folder_checks(dumps, nfiles))
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
