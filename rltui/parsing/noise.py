"""Strip the noise that launchers and terminals add to training log lines.

Pure and total: every function here accepts any ``str`` and never raises. Lines reach the
parsers only after ``strip_noise`` so that step and event patterns can be written against
what the framework itself printed, whatever wrapped it (torchrun, Ray, AReaL's merged log,
a tqdm bar sharing the line).
"""

from __future__ import annotations

import re

import msgspec

from rltui.parsing import transport

# CSI (colours, cursor moves), OSC (titles, hyperlinks; ended by BEL or ST), DCS/PM/APC
# strings, and two-byte escapes. A line cut mid-sequence leaves an unterminated escape at
# its end; that is removed too so no stray ESC reaches the screen.
_ANSI = transport.ANSI

# torchrun --tee / --role prefixes: "[rank3]:" (newer) and "[default0]:" (role + local rank).
# No space follows: the original line (maybe indented) starts right after the colon.
_RANK = re.compile(r"\[(?:rank|default)(\d{1,7})\]:")

# Ray's log monitor: actor or task, pid, node ip (rltui.parsing.transport).
_RAY = transport.RAY

# AReaL merged.log: ``f"[{role}]".ljust(10)`` in front of every line of every role. The pad
# to exactly 10 columns is what tells it from tags like "[titan] " or "[AReaL] "; roles are
# lower-case scheduler names, which keeps "[INFO]    " and "[WorkerDict]..." out.
_ROLE = re.compile(r"\[(?P<role>[a-z][a-z0-9_.@-]{0,40})\]")
_ROLE_WIDTH = 10

# Ray's log deduplication suffix.
_REPEATED = transport.REPEATED

_MAX_PREFIXES = 6  # prefixes nest (role, then Ray, then rank); more is not a prefix chain

# What carried the line before the framework printed it (rltui.parsing.transport): a CI or
# ``kubectl logs --timestamps`` time stamp, docker compose's ``svc-1  | ``, OpenMPI's tag, a
# log viewer's ``[NNNN] ``. Cheap guards first: most lines carry none of these.
_CARRIER_STAMP = re.compile(
    r"\[?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)\]?[ \t]")
_COMPOSE = transport.COMPOSE
_MPI = transport.MPI
_LINENO = transport.LINENO
# pdsh/clush put the host in front; an IPv4 address or localhost is unambiguous there (a host
# name is not: "worker: started" is what programs print).
_PDSH = re.compile(r"(?:\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost): ")


class Cleaned(msgspec.Struct, frozen=True):
    """A log line as the framework printed it, plus what the wrappers said about it."""

    text: str
    rank: int | None = None  # torchrun [rankN]: / [defaultN]: prefix, OpenMPI's tag
    actor: str | None = None  # Ray actor/task ("WorkerDict", "pid=12") or AReaL role ("actor")
    repeated: int | None = None  # Ray "[repeated Nx across cluster]"
    stamp: str | None = None  # a carrier's time stamp taken off the front (CI, kubectl)


def prefix_rest(text: str, end: int) -> str:
    """What follows a torchrun ``[rankN]:`` prefix. torch >= 2.4 writes ``[rankN]: `` with one
    space, older ones none; a traceback indents by 2 and 4, so an odd run of spaces after the
    colon holds the prefix's own space, which must go for the traceback to read right."""
    rest = text[end:]
    spaces = len(rest) - len(rest.lstrip(" "))
    return rest[1:] if spaces % 2 else rest


def _strip_carriers(text: str) -> tuple[str, str | None, int | None]:
    """Take off what carried the line: time stamps, compose services, MPI tags, line numbers.
    Only where the line's head could hold one; a framework's own ``[2025-...]`` header (no
    ``T``, or no zone) stays for the parsers that read its time."""
    stamp = rank = None
    for _ in range(_MAX_PREFIXES):
        head = text[:1]
        if head.isdigit() or head == "[":
            m = _CARRIER_STAMP.match(text)
            if m:
                stamp = m.group(0).strip(" \t[]")
                text = text[m.end():]
                continue
            m = _PDSH.match(text) if head != "[" else None
            if m:
                text = text[m.end():]
                continue
            if head == "[":
                m = _MPI.match(text)
                if m:
                    rank = int(m.group("n"))
                    text = text[m.end():]
                    continue
                m = _LINENO.match(text)
                if m:
                    text = text[m.end():]
                    continue
        if text.startswith("localhost: "):
            text = text[11:]
            continue
        if head.isalnum() and "| " in text[:72]:
            m = _COMPOSE.match(text)
            if m:
                text = text[m.end():]
                continue
        break
    return text, stamp, rank


def _strip_prefixes(text: str, rank: int | None, actor: str | None):
    """Remove leading wrapper prefixes in any order; the innermost actor name wins."""
    for _ in range(_MAX_PREFIXES):
        if not text or text[0] not in "[(":
            break
        m = _RANK.match(text)
        if m:
            rank = int(m.group(1))
            text = prefix_rest(text, m.end())
            continue
        m = _RAY.match(text)
        if m:
            name = m.group("actor") or m.group("daemon")
            actor = name if name else f"pid={m.group('pid')}"
            text = text[m.end():]
            continue
        m = _ROLE.match(text)
        if m:
            end = m.end()
            if end < _ROLE_WIDTH:
                pad = _ROLE_WIDTH - end
                if text[end:end + pad] != " " * pad:
                    break
                end += pad
            actor = m.group("role")
            text = text[end:]
            continue
        break
    return text, rank, actor


def _last_redraw(text: str) -> str:
    """The final state of a line that carriage returns redrew (tqdm): its last non-blank part."""
    parts = text.split("\r")
    for part in reversed(parts):
        if part.strip():
            return part
    return ""


def strip_noise(raw: str) -> Cleaned:
    """Remove ANSI escapes, tqdm redraws, torchrun/Ray/AReaL prefixes and Ray's repeat suffix."""
    text = raw.removesuffix("\n")
    if "\x1b" in text or "\x9b" in text:
        text = _ANSI.sub("", text)
    if text.endswith("\r"):  # CRLF line end, not a redraw
        text = text.rstrip("\r")
    rank: int | None = None
    actor: str | None = None
    stamp: str | None = None
    head = text[:1]
    if head.isdigit() or head == "[" or (head.isalnum() and "| " in text[:72]) or \
            text.startswith("localhost: "):
        text, stamp, rank = _strip_carriers(text)
    if text[:1] in ("[", "("):
        text, rank, actor = _strip_prefixes(text, rank, actor)
    if "\r" in text:
        text = _last_redraw(text)
        if text[:1] in ("[", "("):
            text, rank, actor = _strip_prefixes(text, rank, actor)
    repeated: int | None = None
    if "x across cluster]" in text[-48:]:
        m = _REPEATED.search(text, len(text) - 64)  # only the tail: no rescans of a long line
        if m:
            repeated = int(m.group(1))
            text = text[:m.start()].rstrip()
    return Cleaned(text, rank, actor, repeated, stamp)


# Level words are looked for near the start of a line (where loggers put them); long lines
# are only examined this far so one 1 MB line cannot stall the log pane.
_LEVEL_SCAN = 4096

_ERROR = re.compile(
    r"\b(?:ERROR|CRITICAL|FATAL)\b"
    r"|Traceback \(most recent call last\)"
    r"|CUDA out of memory"
    r"|Watchdog caught collective operation timeout"
    # an exception line: "RuntimeError: ...", "torch.OutOfMemoryError: ...",
    # "ray.exceptions.RayTaskError(ValueError): ...", a bare "KeyboardInterrupt"
    r"|^\s*[A-Za-z_][\w.]*(?:Error|Exception)(?:\([\w.]*\))?(?::|\s*$)"
    # c10/glog severity letter E: "[E603 17:48:01.005 ProcessGroupNCCL.cpp:632]", "[E socket.cpp:42]"
    r"|^\[?E\d{3,4} \d\d:\d\d:\d\d|^\[E [\w.]+:\d+\]"
)
_WARNING = re.compile(
    r"\b(?:WARNING|WARN)\b|\b\w*Warning: "
    r"|^\[?W\d{3,4} \d\d:\d\d:\d\d|^\[W [\w.]+:\d+\]"
)

# Cheap substring guards: most lines contain none of these, and ``in`` runs at memory speed.
_ERROR_HINTS = ("ERROR", "CRITICAL", "FATAL", "Traceback", "CUDA out of memory", "Watchdog",
                "Error", "Exception")
_WARNING_HINTS = ("WARN", "Warning")


def level_of(text: str) -> str:
    """"error", "warning" or "" for a cleaned line, from its level word or its content."""
    head = text[:_LEVEL_SCAN]
    first = head.lstrip("[ ")[:1]  # a c10/glog severity letter sits at the line start
    if (first == "E" or any(h in head for h in _ERROR_HINTS)) and _ERROR.search(head):
        return "error"
    if (first == "W" or any(h in head for h in _WARNING_HINTS)) and _WARNING.search(head):
        return "warning"
    return ""
