"""Source lines of the diff's cursor row: the left frame's lines, and the right frame's beside
them when the two sides stand at another place.

The lines come from a callable the screen was given (``(path, line) -> [(number, text)] |
None``); this pane never opens a file. A frame with no readable file says so in one dim line.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from rltui.diagnosis.stackview import short_file
from rltui.model import Frame
from rltui.parsing.stackframes import CUT, ELIDED
from rltui.ui.themes import Palette
from rltui.ui.widgets.cells import set_title

SourceLines = Callable[[str, int], "list[tuple[int, str]] | None"]
# Marker frames the reader puts in a stack, with no file behind them: what each stands for
# (an elision marker's file names how many frames it holds).
MARKERS = {CUT: "the dump was cut short here: the frames above are lost",
           ELIDED: "{} left out here: a stack this deep keeps its innermost and outermost frames"}


def _place(frame: Frame) -> str:
    if frame.name in MARKERS and not frame.line:
        return frame.name
    return f"{short_file(frame.filename)}:{frame.line}" if frame.line else short_file(
        frame.filename)


class StackSourcePane(Vertical):
    ALLOW_MAXIMIZE = True

    def __init__(self, source_lines: SourceLines, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="stack-pane")
        self.border_title = "Source"
        self.source_lines = source_lines
        self.body = Static("", id=f"{id}-body" if id else None)
        self.context = 2  # lines each side of the frame's line; 1 on a short terminal
        self._frames: tuple[Frame | None, Frame | None] = (None, None)
        self._names = ("L", "R")
        self._palette: Palette | None = None
        self._cache: dict[tuple[str, int], list[tuple[int, str]] | None] = {}

    def compose(self) -> ComposeResult:
        yield self.body

    def show(self, left: Frame | None, right: Frame | None, palette: Palette,
             left_name: str = "L", right_name: str = "R") -> None:
        self._frames = (left, right)
        self._names = (left_name, right_name)
        self._palette = palette
        same = left is not None and right is not None and \
            (left.filename, left.line) == (right.filename, right.line)
        if left is None and right is None:
            set_title(self, "Source")
            self.body.update(Text("no frame on this row", style=palette.dim))
            return
        if same or right is None or left is None:
            frame = left or right
            assert frame is not None
            who = left_name if right is None else (right_name if left is None else "both")
            set_title(self, f"Source {_place(frame)} ({who})")
            self.body.update(self._block(frame))
            return
        set_title(self, f"Source {left_name} {_place(left)} | {right_name} {_place(right)}")
        grid = Table.grid(expand=True, padding=(0, 1))
        grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        grid.add_row(self._block(left), self._block(right))
        self.body.update(grid)

    def redraw(self) -> None:
        if self._palette is not None:
            self.show(*self._frames, self._palette, *self._names)

    def _lines(self, frame: Frame) -> list[tuple[int, str]] | None:
        key = (frame.filename, frame.line)
        if key not in self._cache:
            if len(self._cache) > 256:
                self._cache.clear()
            try:
                self._cache[key] = self.source_lines(frame.filename, frame.line)
            except Exception:  # noqa: BLE001 - an injected reader must not break the screen
                self._cache[key] = None
        return self._cache[key]

    def _block(self, frame: Frame) -> RenderableType:
        pal = self._palette
        assert pal is not None
        if frame.name in MARKERS and not frame.line:  # no file behind it: say what it stands for
            return Text(MARKERS[frame.name].format(frame.filename), style=pal.dim,
                        no_wrap=True, overflow="ellipsis")
        lines = self._lines(frame) if frame.line and not frame.native else None
        if not lines:
            return Text(f"no source for {frame.filename}" + (f":{frame.line}" if frame.line
                                                              else ""),
                        style=pal.dim, no_wrap=True, overflow="ellipsis")
        lines = [(n, t) for n, t in lines if abs(n - frame.line) <= self.context]
        # Common indentation is dropped: at 80 columns, two sides share the width.
        indent = min((len(t) - len(t.lstrip(" ")) for _, t in lines if t.strip()), default=0)
        lines = [(n, t[indent:]) for n, t in lines]
        width = len(str(lines[-1][0])) if lines else 1
        out = Text(no_wrap=True, overflow="ellipsis")
        for i, (n, text) in enumerate(lines):
            if i:
                out.append("\n")
            here = n == frame.line
            out.append(f"{n:>{width}} ", style=f"bold {pal.warn}" if here else pal.dim)
            out.append("▶ " if here else "│ ", style=pal.warn if here else pal.dim)
            out.append(text, style="bold" if here else "")
        return out
