"""Short tracebacks for the text and markdown reports.

A run's traceback is often long, and its last lines are the library's (asyncio, httpx) while the
line to fix is the workflow's: a server that is down gives a dozen asyncio frames under the one
line that opened the connection. So an excerpt is not the last N lines but the header, the first
and the innermost frame in the user's code, as many frames below that as fit, and the exception,
with ``  ...`` where lines were left out. The JSON keeps the whole traceback.

Which frames are the user's is read from the path, not from this interpreter's ``sysconfig``:
the worker may run under another Python. ``site-packages``, ``dist-packages``, ``<frozen ...>``
and ``.../lib/pythonX.Y/`` (the standard library on Unix) are not the user's.
"""

from __future__ import annotations

import re

GAP = "  ..."
_FILE = re.compile(r'^\s*File "(?P<path>[^"]*)", line \d+')
_STDLIB = re.compile(r"[/\\]lib[/\\]python\d+(\.\d+)?t?[/\\]")
_MARKERS = re.compile(r"^\s*[\^~]+\s*$")  # the ^^^ under the failing expression (3.11+)


def is_user_file(path: str) -> bool:
    return not (path.startswith("<") or "site-packages" in path or "dist-packages" in path
                or _STDLIB.search(path))


def _span(lines: list[str], start: int) -> range:
    """A frame: its ``File`` line and the indented source lines under it."""
    end = start + 1
    while end < len(lines) and lines[end].startswith("    ") and not _FILE.match(lines[end]):
        end += 1
    return range(start, end)


def excerpt(text: str | None, limit: int) -> list[str]:
    """At most ``limit`` lines of a formatted traceback (a little more only when the user's
    innermost frame and the exception alone do not fit)."""
    lines = (text or "").rstrip().splitlines()
    if len(lines) <= limit:
        return lines
    lines = [line for line in lines if not _MARKERS.match(line)]
    if len(lines) <= limit:
        return lines
    starts = [i for i, line in enumerate(lines) if _FILE.match(line)]
    user = [i for i in starts if is_user_file(_FILE.match(lines[i])["path"])]
    if not user:
        return lines[-limit:]
    tail_start = _span(lines, starts[-1]).stop
    tail = lines[tail_start:]
    if len(tail) > max(1, limit // 3):  # a long message: its first lines name the error
        tail = tail[:max(1, limit // 3) - 1] + [GAP]
    head = lines[:1] if lines[0].startswith("Traceback") else []
    inner = _span(lines, user[-1])
    first = _span(lines, user[0]) if user[0] != user[-1] else None
    left = limit - len(head) - len(inner) - len(tail)
    out = list(head)
    if first is not None and len(first) + 1 <= left:
        out += [lines[i] for i in first]
        left -= len(first)
        above = first.stop
    else:
        above = len(head)
    if inner.start > above:  # frames between the entry and the user's innermost one
        out.append(GAP)
        left -= 1
    out += [lines[i] for i in inner]
    below = lines[inner.stop:tail_start]
    if len(below) <= left:
        out += below
    else:  # whole frames only: a File line without its source reads as a bug
        cut = max(0, left - 1)
        while cut > 0 and not _FILE.match(below[cut]):
            cut -= 1
        out += below[:cut] + [GAP]
    return out + tail
