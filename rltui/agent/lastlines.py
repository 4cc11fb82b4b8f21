"""The last lines of a file, read backwards from its end within a byte budget (``tail``).

The log source follows files forwards from where it last stopped; a tail request asks for
what is at the end now, which may be lines the source never kept, so this reads the file
itself, in blocks from the end, and stops at the line count or the budget, whichever is first.
"""

from __future__ import annotations

import os

from rltui.sources import safeopen

BLOCK = 64 << 10


def last_lines(path: str, count: int, budget: int) -> tuple[list[str], bool, int]:
    """(lines, cut, size): at most ``count`` last lines of ``path`` from at most ``budget``
    bytes; ``cut`` when the budget ran out before ``count`` lines (the first, partial line is
    dropped). Undecodable bytes become U+FFFD. Raises OSError (missing, denied, not a file, a
    symbolic link whose owner could not read the file: rltui.sources.safeopen)."""
    fd, st = safeopen.open_fd(path)
    with os.fdopen(fd, "rb") as f:
        size = end = st.st_size
        blocks: list[bytes] = []
        got = newlines = 0
        trailing = None  # whether the file ends with a newline (not counted as a line break)
        while end > 0 and got < budget and newlines <= count:
            start = max(0, end - BLOCK, end - (budget - got))
            f.seek(start)
            block = f.read(end - start)
            if not block:  # the file shrank under us
                break
            if trailing is None:
                trailing = block.endswith(b"\n")
            blocks.append(block)
            got += len(block)
            newlines += block.count(b"\n")
            end = start
    data = b"".join(reversed(blocks))
    if trailing:
        data = data[:-1]
    lines = data.split(b"\n") if data else []
    cut = False
    if len(lines) > count:
        lines = lines[-count:]
    elif end > 0 and lines:  # stopped by the budget inside a line: that line is partial
        lines = lines[1:]
        cut = True
    return [line.rstrip(b"\r").decode("utf-8", "replace") for line in lines], cut, size
