"""PyTorch's Flight Recorder dumps -> ``FrDump`` values (pure: bytes in, values out).

What torch writes, in the order users have it (docs/flight-recorder.md):

* a pickle per rank: the NCCL watchdog's dump on a timeout (``TORCH_NCCL_DUMP_ON_TIMEOUT``) at
  ``TORCH_FR_DUMP_TEMP_FILE`` (older: ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``) + rank, or
  ``torch._C._distributed_c10d._dump_fr_trace()`` written by the job itself;
* the same as JSON (``_dump_fr_trace_json()``: no frames), alone, as a list, or keyed by rank;
* the debug server's ``/fr_trace_json`` page: one ``<h2>Rank N: address</h2>`` and one ``<pre>``
  of JSON per rank.

A dump is untrusted input. Its pickle holds plain dicts, lists, tuples, strings and numbers, so it
is read with an unpickler that resolves no global at all: a pickle that names a class or a
function is refused with a message, never executed.

Every format version torch has written is read: the fields came one by one (``pg_config``,
``pg_status``, ``is_p2p``, dtypes, thread names, ``retired``); a missing one is simply unknown.

Speed: a 2,000-entry dump takes milliseconds to unpickle whole, and a 1,024-rank job has 1,024 of
them. What the diagnosis needs is the groups' counters (at the head of the pickle) and the newest
records (at its end), so a large pickle is read as its head, its first record and its newest
``TAIL`` records, spliced into one stream (``_spliced``). That is exact or refused: the
splice is checked (consecutive record ids, the same fields), protocol 2 pickles name every memo
slot explicitly, and a record that refers to a string first written in the skipped middle fails
to load; any doubt reads the whole pickle.
"""

from __future__ import annotations

import functools
import gc
import io
import json
import pickle
import re
import sys
from collections.abc import Iterable
from typing import Any

from rltui.model import ERROR, Frame, FrDump, FrEntry, FrGroup, FrGroupState
from rltui.parsing.lazyre import LazyPattern

TAIL = 48  # newest records read per large dump
HEAD_RECORDS = (4, 64, 512)  # first records kept with them, more only when needed
MAX_FRAMES = 48
MAX_TEXT = 400  # characters of any one name, file name or op
MAX_SIZES = 16  # tensors per record whose sizes are kept
MAX_RANKS_TEXT = 4 << 20  # characters of all the groups' rank lists together
MAX_RANKS = 1 << 20  # ranks of all the groups together
MAX_WINDOW = 1 << 12  # records looked at when all the newest are pending (2x the default buffer)
MAX_INT = 1 << 63
# A whole read builds every object of the dump at once. What that costs is bounded before it
# starts: a pickle's empty containers (one byte each, ~64 bytes in memory) and its references
# (8 bytes each) are counted from its bytes, a JSON text costs at most ~24 bytes a byte.
MAX_WHOLE_BYTES = 64 << 20  # a pickle read whole (2,000 records with C++ stacks: tens of MB)
MAX_JSON_BYTES = 16 << 20  # a JSON dump, or one rank's section of the debug server's page
MAX_MEMORY = 1 << 30  # what a whole read may build, estimated (from above) from its bytes

_KEY_ENTRIES = b"X\x07\x00\x00\x00entries"
_RANK_TAIL = LazyPattern(r"(?<!\d)(\d{1,7})(?:\.(?:pkl|pickle|json))?$")
_RANK_HEAD = LazyPattern(r"<h2>\s*Rank\s+(\d{1,7})\s*:\s*([^<]{0,300})</h2>", re.I)
_FAILED = LazyPattern(r"<p>\s*Failed to fetch: status=(\d{1,3})", re.I)
_DIGITS = LazyPattern(r"-?\d{1,7}")


class DumpError(ValueError):
    """The bytes are not a Flight Recorder dump rltui can read (the message says why)."""


class _NoGlobals(pickle.Unpickler):
    """Resolves nothing: torch's dumps hold plain data only; anything else is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(
            f"the pickle names {module[:60]}.{name[:60]}: a Flight Recorder dump holds plain "
            "data only, so this one is refused (not loaded)")


# -- what a pickle may hold, checked before the C unpickler sees it ----------------------------
# The C unpickler trusts a PUT's memo index: ``r\xff\xff\xff\x7f`` (5 bytes) makes it allocate
# and zero a 32 GB memo. Every opcode is walked first (runs of fixed-length opcodes by one
# regex, the rest here): code-reaching opcodes are refused by name, memo indices bounded.
_RUN_PATTERN = (
    rb"(?:[hqK\x80].|[()\]N0-2laeutds}\x85-\x89\x8f\x90\x91\x94]++|M..|[Jj]....|r..\x00\x00"
    rb"|G........|\x95........|\x8a(?:\x00|\x01.|\x02..|\x03...|\x04....|\x05.....|\x06......"
    rb"|\x07.......|\x08........))*+")
if sys.version_info < (3, 11):
    # possessive quantifiers came in 3.11. Nothing follows the repetition, so the greedy one
    # matches the same run and never backtracks (it keeps a mark per repeat as it goes)
    _RUN_PATTERN = _RUN_PATTERN.replace(b"]++", b"]+").replace(b"))*+", b"))*")
_RUN = LazyPattern(_RUN_PATTERN, re.S)
# the same without MEMOIZE and FRAME: a splice needs every memo slot named
_RUN_SPLICE = LazyPattern(_RUN_PATTERN.replace(b"\\x91\\x94]+", b"\\x91]+").replace(
    b"|\\x95........", b""), re.S)
_CODE = {b"c": "GLOBAL", b"\x93": "STACK_GLOBAL", b"R": "REDUCE", b"b": "BUILD", b"i": "INST",
         b"o": "OBJ", b"\x81": "NEWOBJ", b"\x92": "NEWOBJ_EX", b"\x82": "EXT1", b"\x83": "EXT2",
         b"\x84": "EXT4", b"P": "PERSID", b"Q": "BINPERSID", b"\x97": "NEXT_BUFFER",
         b"\x98": "READONLY_BUFFER"}
_SIZED = {b"X": 4, b"T": 4, b"B": 4, b"U": 1, b"C": 1, b"\x8c": 1, b"\x8d": 8, b"\x8e": 8,
          b"\x96": 8, b"\x8a": 1, b"\x8b": 4}
_LINE = b"ILFSVgp"
MAX_LINE = 1 << 16  # a protocol 0 argument (a number, a string)


def _walk(data: bytes, *, splice: bool = False) -> None:
    """DumpError for an opcode that reaches code, a memo index beyond what ``data`` could
    fill, or bytes that are no pickle; with ``splice``, for MEMOIZE and FRAME too (implicit
    memo slots and frame lengths change meaning once the middle is left out)."""
    run = _RUN_SPLICE.match if splice else _RUN.match
    i, n = 0, len(data)
    bound = max(n, 256)  # a memo index: one slot per object, every object at least a byte
    while i < n:
        i = run(data, i).end()
        op = data[i:i + 1]
        if not op:
            break
        if op == b".":
            return
        if op in _SIZED:
            w = _SIZED[op]
            size = int.from_bytes(data[i + 1:i + 1 + w], "little")
            i += 1 + w + size
            if i > n:  # never let the unpickler allocate what a length claims
                raise DumpError("the pickle is cut short (truncated): the dump may still be "
                                "being written")
        elif op == b"r":
            if int.from_bytes(data[i + 1:i + 5], "little") > bound:
                raise DumpError("a pickle that sets memo slot "
                                f"{int.from_bytes(data[i + 1:i + 5], 'little')}: more than "
                                "its size allows, not a Flight Recorder dump torch writes")
            i += 5
        elif op in _LINE:
            end = data.find(b"\n", i + 1, i + 2 + MAX_LINE)
            if end < 0:
                raise DumpError("a protocol 0 pickle with an argument longer than "
                                f"{MAX_LINE} bytes: not read")
            if op == b"p":
                arg = data[i + 1:end].strip()
                if not arg.isdigit() or len(arg) > 12 or int(arg) > bound:
                    raise DumpError("a pickle that sets an unbounded memo slot: not read")
            i = end + 1
        elif op in (b"\x94", b"\x95"):
            raise DumpError("implicit memo slots or frames: no splice")
        elif op == b"c":
            module, name = (data[i + 1:i + 400].split(b"\n") + [b"", b""])[:2]
            raise DumpError(
                f"the pickle names {module.decode('utf-8', 'replace')[:60]}."
                f"{name.decode('utf-8', 'replace')[:60]}: a Flight Recorder dump holds plain "
                "data only, so this one is refused (not loaded)")
        elif op in _CODE:
            raise DumpError(f"the pickle calls or builds objects ({_CODE[op]}): a Flight "
                            "Recorder dump holds plain data only, so this one is refused "
                            "(not loaded)")
        elif op in b"hqK\x80MJjrG\x95\x8a" and n - i <= 9:
            break  # cut short: the unpickler says so
        else:
            raise DumpError(f"not a Flight Recorder dump (byte {op!r} at {i} is no pickle "
                            "opcode rltui reads)")


def _unpickle(data: bytes, *, walked: bool = False) -> Any:
    """Load a pickle checked first: its cost bounded, and (unless the caller just walked it,
    more strictly, for a splice) every opcode walked."""
    _check_cost(data)
    if not walked:
        _walk(data)
    # A buffered reader gives the C unpickler its fast path (peek); a bare BytesIO is 3x slower.
    # The load makes thousands of containers at once: the cyclic collector would scan every
    # live object again and again meanwhile (plain data has no cycles to find).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _NoGlobals(io.BufferedReader(io.BytesIO(data), 1 << 20)).load()
    finally:
        if collecting:
            gc.enable()


# opcodes that make a container (an empty list/dict/set, a tuple) or a new small object (a
# short string or bytes, an int, a float) in one to three bytes
_CONTAINERS = (b"]", b"}", b"l", b"d", b"t", b"\x85", b"\x86", b"\x87", b"\x8f", b"\x91")
_SMALL = (b"\x8c", b"U", b"C", b"M", b"\x8a", b"F", b"V", b"S", b"I", b"L")
_NOT_CONTAINERS = bytes(b for b in range(256) if bytes([b]) not in _CONTAINERS)
_NOT_SMALL = bytes(b for b in range(256) if bytes([b]) not in _SMALL)


def _check_cost(data: bytes) -> None:
    """DumpError when reading ``data`` whole could build more than MAX_MEMORY: an upper
    bound from its bytes (every empty list/dict/tuple opcode is one byte, every other object
    at least one byte and a pointer)."""
    if len(data) > MAX_WHOLE_BYTES:
        raise DumpError(f"a pickle of {len(data) >> 20} MiB: larger than rltui reads whole "
                        f"({MAX_WHOLE_BYTES >> 20} MiB)")
    containers = len(data.translate(None, _NOT_CONTAINERS))
    small = len(data.translate(None, _NOT_SMALL))
    cost = 16 * len(data) + 256 * containers + 64 * small
    if cost > MAX_MEMORY:
        raise DumpError(f"a pickle of {len(data) >> 10} KiB that would build about "
                        f"{cost >> 20} MiB of objects (at most {MAX_MEMORY >> 20} MiB): not a "
                        "Flight Recorder dump torch writes, not read")


def _check_json(n: int) -> None:
    if n > MAX_JSON_BYTES:
        raise DumpError(f"a JSON of {n >> 20} MiB: larger than rltui reads "
                        f"({MAX_JSON_BYTES >> 20} MiB)")


def _rank(v: Any) -> int | None:
    """A rank as a dump or a page writes it: an int (not a bool) or digits, 0 to 10^7."""
    if isinstance(v, str) and 0 < len(v.strip()) <= 7 and v.strip().isdigit():
        v = int(v.strip())
    if type(v) is int and 0 <= v < 10 ** 7:
        return v
    return None


def rank_from_name(name: str) -> int | None:
    """The rank torch appends to the dump's path (``nccl_trace_rank_3`` -> 3)."""
    m = _RANK_TAIL.search(name.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def read_dump(data: bytes, source: str, *, rank: int | None = None,
              written: float | None = None, tail: int = TAIL) -> list[FrDump]:
    """The dumps in one file or page: one for a rank's pickle or JSON, one per rank for the
    debug server's page or a JSON list. Never raises: an unreadable input is one dump with
    status error and the reason."""
    if rank is None:
        rank = rank_from_name(source)
    try:
        return _read(data, source, rank, written, tail)
    except (DumpError, pickle.UnpicklingError) as exc:
        return [FrDump(rank=rank, source=source, status=ERROR, message=str(exc)[:300],
                       written=written)]
    except (EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError,
            RecursionError, MemoryError, OverflowError, UnicodeDecodeError) as exc:
        return [FrDump(rank=rank, source=source, status=ERROR, written=written,
                       message=f"not a Flight Recorder dump ({type(exc).__name__})")]


def read_parts(head: bytes, end: bytes, source: str, *, rank: int | None = None,
               written: float | None = None, tail: int = TAIL) -> FrDump | None:
    """A large pickle read from its first and last bytes only (``head``, ``end``); None when
    that is not enough (the caller reads the whole file)."""
    if head[:2] != b"\x80\x02":
        return None
    try:
        doc = _spliced(head, tail, end)
        if doc is None:
            return None
        dump = _from_doc(doc, source, rank if rank is not None else rank_from_name(source),
                         written, tail, whole=False)
    except Exception:  # noqa: BLE001 - any doubt: the caller reads it whole
        return None
    if sum(not e.done for e in dump.entries) >= tail:
        return None  # every newest record pending: older ones may be; read it whole
    return dump


def _read(data: bytes, source: str, rank: int | None, written: float | None,
          tail: int) -> list[FrDump]:
    head = data[:64].lstrip()
    if data[:1] == b"\x80":
        return [_from_pickle(data, source, rank, written, tail)]
    if head[:1] in (b"{", b"["):
        _check_json(len(data))
        doc = json.loads(data)
        return _from_json(doc, source, rank, written, tail)
    text = data[:1 << 16].decode("utf-8", "replace")
    if _RANK_HEAD.search(text) or b"<h2" in data[:1 << 16]:
        if len(data) > MAX_WHOLE_BYTES:
            raise DumpError(f"a page of {len(data) >> 20} MiB: larger than rltui reads "
                            f"({MAX_WHOLE_BYTES >> 20} MiB)")
        return from_page(data.decode("utf-8", "replace"), source, written=written, tail=tail)
    if not data:
        raise DumpError("empty file: the dump may still be being written")
    raise DumpError("not a Flight Recorder dump (neither a pickle, JSON nor the debug "
                    "server's page)")


# -- pickles ---------------------------------------------------------------------------------------

def _from_pickle(data: bytes, source: str, rank: int | None, written: float | None,
                 tail: int) -> FrDump:
    doc = None
    if data[:2] == b"\x80\x02" and len(data) > 1 << 16:
        doc = _spliced(data, tail)
    whole = doc is None
    if whole:
        doc = _unpickle(data)
    dump = _from_doc(doc, source, rank, written, tail, whole=whole)
    if sum(not e.done for e in dump.entries) >= tail:
        # every newest record still pending: older ones may be too; read them all
        dump = _from_doc(doc if whole else _unpickle(data), source, rank, written, tail,
                         whole=True, all_pending=True)
    return dump


def _spliced(data: bytes, tail: int, end: bytes | None = None) -> dict | None:
    """The dump's head, first records and newest ``tail`` records, loaded as one pickle; None
    when the splice cannot be made or checked (the caller reads the whole pickle). ``end``,
    when given, is the file's last bytes and ``data`` its first ones (read apart)."""
    at = data.find(_KEY_ENTRIES)
    if at < 0 or data.find(_KEY_ENTRIES, at + 1) >= 0:
        return None
    i = _skip_put(data, at + len(_KEY_ENTRIES))
    if data[i:i + 1] != b"]":
        return None
    i = _skip_put(data, i + 1)
    if data[i:i + 2] != b"(}":
        return None
    first = i + 1  # the first record: EMPTY_DICT, MARK, its first key
    if data[first + 1:first + 3] != b"(X":
        return None  # a memoised dict: every record's opening differs
    n = int.from_bytes(data[first + 3:first + 7], "little")
    key_end = first + 7 + n
    put = data[key_end:key_end + 1]
    if put == b"q":
        sig = b"}(h" + data[key_end + 1:key_end + 2]
    elif put == b"r":
        sig = b"}(j" + data[key_end + 1:key_end + 5]
    else:
        sig = data[first:key_end]
    if end is None and (not sig or len(sig) < 4):
        return None
    # the newest ``tail`` record openings, searched from the end
    newest = data if end is None else end
    cut, stop = -1, len(newest)
    for _ in range(tail):
        cut = newest.rfind(sig, key_end if end is None else 0, stop)
        if cut < 0:
            return None  # small enough to read whole (or the end read apart too short)
        stop = cut
    # The first records are kept too: a later record refers to the strings (and frames) where
    # they were first written: a loop's call sites come within its first iteration. More of
    # the head is kept only while a reference is missing.
    heads, pos = [], key_end
    limit = cut if end is None else len(data)
    for want in HEAD_RECORDS:
        while len(heads) < want:
            pos = data.find(sig, pos + 1, limit)
            if pos < 0:
                return None
            heads.append(pos)
        try:
            stream = data[:heads[-1]] + newest[cut:]
            _walk(stream, splice=True)
            doc = _unpickle(stream, walked=True)
        except pickle.UnpicklingError as exc:
            if "memo" in str(exc).lower():
                continue
            return None
        except Exception:  # noqa: BLE001 - any other failure: read the whole pickle
            return None
        return _checked(doc, want, tail)
    return None


def _checked(doc: Any, head: int, tail: int) -> dict | None:
    """The spliced dump when it holds ``head`` + ``tail`` records of one shape with
    consecutive record ids across the newest ones; else None."""
    entries = doc.get("entries") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or len(entries) != head + tail:
        return None
    if not isinstance(entries[0], dict):
        return None
    keys = set(entries[0])
    newest = entries[head:]
    ids = [e.get("record_id") if isinstance(e, dict) else None for e in newest]
    # consecutive ids prove the splice fell on record boundaries; the shape is checked at
    # both ends of the window
    if (any(type(x) is not int for x in ids) or ids[-1] - ids[0] != len(ids) - 1
            or any(b - a != 1 for a, b in zip(ids, ids[1:]))
            or set(newest[0]) != keys or set(newest[-1]) != keys):
        return None
    # the first records too: the records skipped are counted from the ids on both sides
    first = [e.get("record_id") if isinstance(e, dict) else None for e in entries[:head]]
    if (any(type(x) is not int for x in first)
            or any(b - a != 1 for a, b in zip(first, first[1:])) or ids[0] <= first[-1]):
        return None
    before = first[-1]
    doc["__head__"] = head
    doc["__skipped__"] = ids[0] - before - 1
    return doc


def _skip_put(data: bytes, i: int) -> int:
    op = data[i:i + 1]
    if op == b"q":
        return i + 2
    if op == b"r":
        return i + 5
    return i


# -- JSON and the debug server's page -------------------------------------------------------------

def _from_json(doc: Any, source: str, rank: int | None, written: float | None,
               tail: int) -> list[FrDump]:
    if isinstance(doc, dict) and "entries" in doc or isinstance(doc, dict) and "version" in doc:
        return [_from_doc(doc, source, rank, written, tail, whole=True)]
    out: list[FrDump] = []
    if isinstance(doc, list):
        for i, one in enumerate(doc[:1 << 16]):
            if isinstance(one, dict):
                r = _rank(one.get("rank", i))
                out.append(_from_doc(one, f"{source}#{i}", i if r is None else r,
                                     written, tail, whole=True))
    elif isinstance(doc, dict):
        for key, one in list(doc.items())[:1 << 16]:
            if isinstance(one, dict):
                r = _rank(one.get("rank", rank_from_name(str(key)[:300])))
                out.append(_from_doc(one, f"{source}#{str(key)[:120]}", r,
                                     written, tail, whole=True))
    if not out:
        raise DumpError("JSON without Flight Recorder entries")
    return out


def from_page(text: str, source: str, *, written: float | None = None,
              tail: int = TAIL) -> list[FrDump]:
    """The debug server's ``/fr_trace_json`` page: each rank's JSON after its heading (torch
    renders it without escaping; an escaped one is read too)."""
    import html  # the debug server's page only
    heads = list(_RANK_HEAD.finditer(text))
    if not heads:
        raise DumpError("a web page without the debug server's 'Rank N' sections")
    out: list[FrDump] = []
    decoder = json.JSONDecoder()
    for k, m in enumerate(heads[:1 << 14]):
        rank = int(m.group(1))
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        part = text[m.end():end]
        where = f"{source} (rank {rank}: {m.group(2).strip()[:120]})"
        failed = _FAILED.search(part)
        pre = part.find("<pre>")
        if failed or pre < 0:
            why = (f"the debug server could not fetch it (status {failed.group(1)})" if failed
                   else "no data in the page")
            out.append(FrDump(rank=rank, source=where, status=ERROR, message=why,
                              written=written))
            continue
        body = part[pre + 5:]
        try:
            _check_json(len(body))
            doc, _ = decoder.raw_decode(body.lstrip())
        except DumpError as exc:
            out.append(FrDump(rank=rank, source=where, status=ERROR, written=written,
                              message=str(exc)))
            continue
        except (ValueError, RecursionError):
            try:
                doc, _ = decoder.raw_decode(html.unescape(body.split("</pre>", 1)[0]).strip())
            except (ValueError, RecursionError):
                out.append(FrDump(rank=rank, source=where, status=ERROR, written=written,
                                  message="the rank's section holds no readable JSON"))
                continue
        if not isinstance(doc, dict):
            out.append(FrDump(rank=rank, source=where, status=ERROR, written=written,
                              message="the rank's section is not a Flight Recorder dump"))
            continue
        try:
            out.append(_from_doc(doc, where, rank, written, tail, whole=True))
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError,
                OverflowError) as exc:  # this rank's section only: the others are read
            out.append(FrDump(rank=rank, source=where, status=ERROR, written=written,
                              message=str(exc)[:300] if isinstance(exc, DumpError) else
                              f"not a Flight Recorder dump ({type(exc).__name__})"))
    return out


# -- the dump's fields -----------------------------------------------------------------------------

def _from_doc(doc: Any, source: str, rank: int | None, written: float | None, tail: int,
              *, whole: bool, all_pending: bool = False) -> FrDump:
    if isinstance(doc, list):  # the first format: a bare list of records
        doc = {"entries": doc}
    if not isinstance(doc, dict):
        raise DumpError("not a Flight Recorder dump (no dict of entries)")
    raw = doc.get("entries", [])
    if not isinstance(raw, list):
        raise DumpError("not a Flight Recorder dump (entries is not a list)")
    version = doc.get("version", "")
    version = _text(version) if isinstance(version, (str, int, float)) else ""
    if whole:
        total = len(raw)
        window = raw[-MAX_WINDOW:] if all_pending else raw[-tail:]
    else:
        window = raw[int(doc.get("__head__", 1)):]  # the first records only anchor the splice
        total = len(raw) + int(doc.get("__skipped__", 0))
    status = doc.get("pg_status")
    keep = _needed(window, [str(k) for k in status] if isinstance(status, dict) else ())
    frames: dict[int, Frame] = {}  # torch's pickle shares each frame dict: convert it once
    entries = tuple(e for e in (_entry(x, frames) for x in keep) if e is not None)
    return FrDump(rank=rank, source=source, version=version, entries=entries,
                  groups=_groups(doc.get("pg_config")), states=_states(doc.get("pg_status")),
                  total=total, written=written)


def _needed(window: list, groups: Iterable[str] = ()) -> list:
    """The records the diagnosis reads, oldest first: every one still pending, and each
    group's newest finished one (converting all of them would cost more than reading). A
    rank blocks in its oldest pending op, so pending ones are the newest: once every group
    named in the counters has its finished record, older ones are not needed."""
    out, seen = [], set()
    left = set(groups)
    known = bool(left)  # without counters, every record of the window is looked at
    for e in reversed(window):
        if type(e) is not dict:
            continue
        if not _done(e):
            out.append(e)
            continue
        if known and not left:
            break
        pg = e.get("process_group")
        key = (pg[0] if isinstance(pg, (list, tuple)) and pg else e.get("pg_id"),
               bool(e.get("is_p2p")))
        try:
            if key in seen:
                continue
            seen.add(key)
            left.discard(key[0])
        except TypeError:  # an unhashable name: not torch's
            continue
        out.append(e)
    return out[::-1]


def _done(e: dict) -> bool:
    return bool(e.get("retired")) or e.get("state") == "completed"


def _entry(e: Any, cache: dict[int, Frame]) -> FrEntry | None:
    if not isinstance(e, dict):
        return None
    pg = e.get("process_group")
    if isinstance(pg, (list, tuple)) and pg:
        group = _text(pg[0])
        desc = _text(pg[1]) if len(pg) > 1 else ""
    else:
        group, desc = _text(e.get("pg_id", "")), ""
    if desc == "undefined":
        desc = ""
    name = _text(e.get("profiling_name", "")) or "?"
    backend, _, op = name.partition(":")
    if not op:
        backend, op = "", name
    is_p2p = bool(e.get("is_p2p", op.startswith(("send", "recv"))))
    return FrEntry(
        group=group, seq=_int(e.get("collective_seq_id", e.get("seq_id"))), op=op, desc=desc, backend=backend,
        p2p_seq=_int(e.get("p2p_seq_id")), is_p2p=is_p2p, record_id=_int(e.get("record_id")),
        op_id=_int(e.get("op_id"), -1),
        state=_text(e.get("state", "")), done=_done(e),
        input_sizes=_sizes(e.get("input_sizes")), output_sizes=_sizes(e.get("output_sizes")),
        dtypes=tuple(_text(d) for d in _list(e.get("input_dtypes"))[:MAX_SIZES]),
        created_ns=_opt_int(e.get("time_created_ns")),
        started_ns=_opt_int(e.get("time_discovered_started_ns")),
        frames=_frames(e.get("frames"), cache), timeout_ms=_opt_int(e.get("timeout_ms")))


def _frames(raw: Any, cache: dict[int, Frame]) -> tuple[Frame, ...]:
    out = []
    for f in _list(raw)[:MAX_FRAMES]:
        if isinstance(f, dict):
            frame = cache.get(id(f))
            if frame is None:
                name, file, line = f.get("name", "?"), f.get("filename", ""), f.get("line")
                if (type(name) is str and type(file) is str and type(line) is int
                        and len(name) <= MAX_TEXT and len(file) <= MAX_TEXT
                        and -MAX_INT < line < MAX_INT):
                    frame = _frame(name or "?", file, line)
                else:
                    frame = Frame(name=_text(name) or "?", filename=_text(file),
                                  line=_int(line))
                cache[id(f)] = frame
            out.append(frame)
    return tuple(out)


@functools.lru_cache(maxsize=1 << 13)
def _frame(name: str, filename: str, line: int) -> Frame:
    # every rank's dump names the same frames: made once for all of them
    return Frame(name=name, filename=filename, line=line)


def _groups(raw: Any) -> tuple[FrGroup, ...]:
    if not isinstance(raw, dict):
        return ()
    out = []
    # one budget for all the groups: a rank list shared by reference across 16,384 groups
    # costs the pickle nothing and would cost us each time
    chars, count = MAX_RANKS_TEXT, MAX_RANKS
    for key, cfg in list(raw.items())[:1 << 14]:
        if not isinstance(cfg, dict):
            continue
        name = _text(cfg.get("name", key)) or _text(key)
        if not name:
            continue  # gloo's placeholder: {'': {'name': '', 'desc': '', 'ranks': '[]'}}
        ranks = cfg.get("ranks", ())
        if isinstance(ranks, str):
            text = ranks[:max(chars, 0)]
            chars -= len(text)
            ranks = [int(x) for x in _DIGITS.findall(text)]
        ranks = tuple(r for r in _list(ranks)[:max(count, 0)]
                      if type(r) is int and 0 <= r < MAX_INT)
        count -= len(ranks)
        desc = _text(cfg.get("desc", ""))
        out.append(FrGroup(group=name, desc="" if desc == "undefined" else desc, ranks=ranks))
    return tuple(out)


def _states(raw: Any) -> tuple[FrGroupState, ...]:
    if not isinstance(raw, dict):
        return ()
    out = []
    for key, st in list(raw.items())[:1 << 14]:
        if isinstance(st, dict):
            out.append(FrGroupState(
                group=_text(key), last_enqueued=_int(st.get("last_enqueued_collective"), -1),
                last_started=_int(st.get("last_started_collective"), -1),
                last_completed=_int(st.get("last_completed_collective"), -1)))
    return tuple(out)


def _sizes(raw: Any) -> tuple:
    out = []
    for shape in _list(raw)[:MAX_SIZES]:
        out.append(tuple(_int(d) for d in _list(shape)[:8]))
    return tuple(out)


def _list(raw: Any) -> list:
    return raw if isinstance(raw, (list, tuple)) else []


def _text(v: Any) -> str:
    if isinstance(v, int) and not -MAX_INT < v < MAX_INT:
        return "(a number too large)"  # str() of it could take long or raise
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    return str(v)[:MAX_TEXT] if isinstance(v, (str, int, float, bytes)) else ""


def _int(v: Any, default: int = 0) -> int:
    if isinstance(v, str) and 0 < len(v) <= 20 and v.lstrip("-").isdigit():
        v = int(v)  # the JSON dump writes pg_status's counters as strings
    if isinstance(v, bool) or not isinstance(v, int) or not -MAX_INT < v < MAX_INT:
        return default
    return v


def _opt_int(v: Any) -> int | None:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 < v < MAX_INT:
        return None
    return v


def dump_paths_from_env(env: Iterable[tuple[str, str]]) -> tuple[str | None, bool | None]:
    """(the dump path prefix, whether the rank records) from a rank's environment: the
    prefix torch appends the rank to (TORCH_FR_DUMP_TEMP_FILE, older
    TORCH_NCCL_DEBUG_INFO_TEMP_FILE; default /tmp/nccl_trace_rank_), and True/False when
    TORCH_FR_BUFFER_SIZE / TORCH_NCCL_TRACE_BUFFER_SIZE says, None when neither is set."""
    vals = dict(env)
    prefix = vals.get("TORCH_FR_DUMP_TEMP_FILE") or vals.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    enabled = None
    for key in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"):
        if key in vals:
            m = _DIGITS.match(vals[key].strip())
            on = bool(m and int(m.group(0)) > 0)
            enabled = on if enabled is None else (enabled or on)
    return prefix or "/tmp/nccl_trace_rank_", enabled
