"""Stack dumps (py-spy ``--json``, and every text form ``stacktext`` reads) -> ProcessDump
values. Pure: text in, values out.

Error policy: ``parse_text`` and ``parse_json`` return what they could read and raise
``DumpParseError`` (with the reason) only when the input holds no dump at all. ``parse_any`` and
``read_folder_entries`` never raise: they return ``(dumps, problems)``, problems being short
sentences that name the source, so a folder with one bad file still yields the other ranks.

Stacks are bounded (``stackframes``): the innermost and outermost frames of a deep stack are kept
with one marker frame between them.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from dataclasses import replace

from rltui.model import ERROR, Frame, ProcessDump, ThreadStack
from rltui.parsing import stacktext
from rltui.parsing.stackframes import (ELIDED, KEEP_INNER, KEEP_OUTER,  # noqa: F401 - API
                                       MAX_PROBLEMS_PER_SOURCE, MAX_THREADS, FrameSink,
                                       frame_key, is_native, trim_path)

_RANK = re.compile(r"(?<![a-z])rank[-_]?(\d{1,6})(?!\d)")
_intern = sys.intern
# A JSON document starts with an array of objects (or an object): "[{", "[]", "{" + quote.
_json_start = re.compile(r'[\s\ufeff]{0,64}(?:\[\s{0,64}[{\]]|\{\s{0,64}")')


class DumpParseError(ValueError):
    """The input holds no stack dump; the message says why (and names the source)."""


def _status(active: bool, gil: bool) -> str:
    return ("active" if active else "idle") + ("+gil" if gil else "")


# -- text ------------------------------------------------------------------------------------------

def _parse_text(text: str, source: str) -> tuple[list[ProcessDump], list[str]]:
    dumps, problems = stacktext.read(text, source)
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
                 native=is_native(filename))


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
            sink = FrameSink()
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
        if _json_start.match(text):
            try:
                return _parse_json(text, source, None)
            except DumpParseError as exc:
                # "[rank0]: Thread ..." or "[2025-...] Pyspy dump" also start with a bracket
                try:
                    return _parse_text(text, source)
                except DumpParseError:
                    raise exc from None
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
