"""Frame-level pieces shared by the stack readers (py-spy text and JSON, faulthandler). Pure.

Stacks are bounded: a thread keeps its innermost ``KEEP_INNER`` and outermost ``KEEP_OUTER``
frames with one marker frame between them, so a recursion of 100 000 frames costs no more memory
than one of 1 000 (the innermost frames say where it waits, the outermost which loop it is in).
"""

from __future__ import annotations

from collections import deque

from rltui.model import Frame

KEEP_INNER = 800
KEEP_OUTER = 200
ELIDED = "<frames elided>"  # name of the marker frame; its filename says how many
# Name of the marker frame at the outer end of a thread whose dump was cut short in its frames
# (the text ends mid-line): the frames beyond it, up to the script's entry, are unknown.
CUT = "<frames cut off>"


def is_cut(frame: Frame) -> bool:
    """The marker frame ``CUT`` (no real frame has that name and no file)."""
    return frame.name == CUT and not frame.filename

MAX_THREADS = 4096  # per process; a torch process has ~150, more means garbage or a fork bomb
MAX_PROBLEMS_PER_SOURCE = 8

_PKG_DIRS = ("site-packages/", "dist-packages/")


# -- frames ----------------------------------------------------------------------------------------

def is_native(filename: str) -> bool:
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


class FrameSink:
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


def split_frame(line: str) -> tuple[str, str, int] | None:
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
    if colon and num.isascii() and num.isdigit():  # "²" is a digit to isdigit, not to int()
        return name, file, int(num) if len(num) <= 9 else 0  # no source file is that long
    return name, tail, 0
