"""Source lines around a stack frame, for the compare screen (never raises).

py-spy names a frame's file by its full path, or by a short name relative to a ``sys.path``
entry (``rltui/demo/trainer.py``, ``torch/distributed/distributed_c10d.py``). A dump is often
read on another machine or outside the job's container, so a full path that does not exist here
is also tried by its tail under the working directory (the job's checkout, usually).

Bounded: only regular files up to ``MAX_BYTES`` are read, binary files (a NUL byte) are refused,
lines are cut at ``MAX_LINE`` characters and control characters (a terminal escape in a source
file) are replaced. Files are cached by path, modification time and size, so moving the cursor
over the same frames reads nothing again, and an edited file is read afresh.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Sequence
from functools import lru_cache

from rltui.sources import safeopen

MAX_BYTES = 4 * 1024 * 1024
MAX_LINE = 400
MAX_CONTEXT = 50
MAX_ROOTS = 32  # sys.path entries tried for a short name
MAX_TAIL_PARTS = 6  # path components tried for a full path missing here
_CONTROL = {c: "\ufffd" for c in (*range(0x09), *range(0x0a, 0x20), 0x7f)}


def read_source(path: str, line: int, context: int = 2, *,
                roots: Sequence[str] | None = None) -> list[tuple[int, str]] | None:
    """Lines ``line - context`` to ``line + context`` of ``path`` as (number, text), or None
    when the file cannot be found or read, is binary or too large, or has no such line.

    ``roots``: folders to resolve a short name against (default: the working directory, then
    ``sys.path``)."""
    try:
        if not path or line <= 0 or path.startswith("<"):
            return None  # <frozen runpy>, <string>: no file behind them
        context = max(0, min(int(context), MAX_CONTEXT))
        search = tuple(roots) if roots is not None else _default_roots()
        for candidate in _candidates(path, search):
            lines = _lines_of(candidate)
            if lines is None:
                continue
            if line > len(lines):
                return None
            lo, hi = max(1, line - context), min(len(lines), line + context)
            return [(n, lines[n - 1]) for n in range(lo, hi + 1)]
        return None
    except Exception:  # noqa: BLE001 - a display helper must never take the screen down
        return None


def _default_roots() -> tuple[str, ...]:
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = "."
    return (cwd, *[p for p in sys.path if p][:MAX_ROOTS])


def _candidates(path: str, roots: Sequence[str]):
    path = os.path.expanduser(path)
    if os.path.isabs(path):
        yield path
        # Dumped elsewhere (a container, another node): its tail under the first root.
        parts = path.replace("\\", "/").strip("/").split("/")
        if roots:
            for n in range(min(len(parts) - 1, MAX_TAIL_PARTS), 1, -1):
                yield os.path.join(roots[0], *parts[-n:])
        return
    for root in roots:
        yield os.path.join(root, path)


def _lines_of(path: str) -> tuple[str, ...] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
        return None  # a FIFO or device would block or never end; a huge file is no source
    return _read(path, st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=64)
def _read(path: str, mtime_ns: int, size: int) -> tuple[str, ...] | None:
    try:
        data = safeopen.read_bytes(path, MAX_BYTES + 1)  # a planted link is refused
    except OSError:
        return None
    if len(data) > MAX_BYTES or b"\0" in data:
        return None
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    # Split on newlines only, as Python numbers lines (str.splitlines also splits on form
    # feeds and other separators, which would shift every line below them).
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return tuple(_clean(raw) for raw in lines)


def _clean(raw: str) -> str:
    return raw.expandtabs(4)[:MAX_LINE].translate(_CONTROL)
