"""Two stacks side by side, root first, aligned frame by frame.

The middle column says how a row compares, in a character as well as a colour: blank (the same
frame), ``~`` (same function, other line), ``≠`` (another function), ``<`` / ``>`` (a frame only
one side has), ``?`` (above the known frames of a stack cut short: unknown). The first row that
differs is marked ``▶`` and drawn bold; ``g`` puts the cursor on it. The column headers name the
two sides (``rank 0 (#1)``) and, with the Flight Recorder read, the collective each side is
pending in (``rank 0 (#1) · all_reduce #4 of default_pg``; narrower: ``rank 0 · #4 of
default_pg``), which tells apart two ranks with the same stack.
"""

from __future__ import annotations

from collections.abc import Sequence

from rltui.diagnosis.stackview import (
    DIFFER,
    KIND_TEXT,
    LEFT_ONLY,
    LINE,
    LOST,
    RIGHT_ONLY,
    SAME,
    DiffRow,
    Side,
    StackDiff,
    StackView,
    fit_first,
    fit_frame,
    member_text,
)
from rltui.ui.themes import Palette
from rltui.ui.widgets.cells import Cell
from rltui.ui.widgets.stack_table import CELL_PADDING, StackPane

MARKS = {SAME: "", LINE: "~", DIFFER: "≠", LEFT_ONLY: "<", RIGHT_ONLY: ">", LOST: "?"}
INDEX = 4
MARK = 1


class StackDiffPane(StackPane):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Compare"
        self.diff = StackDiff(rows=(), first=None, first_function=None)
        self.left_text = self.right_text = ""
        self._heads: tuple[list[str], list[str]] = ([], [])  # column headers, longest first
        self._palette: Palette | None = None

    def show(self, view: StackView, left: Side, right: Side, palette: Palette) -> bool:
        """Show the diff of ``left`` and ``right``; True when its rows changed."""
        self._palette = palette
        diff = view.diff(left, right)
        changed = diff.rows != self.diff.rows
        self.diff = diff
        self.left_text, self.right_text = view.side_text(left), view.side_text(right)
        self._heads = (self._head(view, left, self.left_text),
                       self._head(view, right, self.right_text))
        self.set_pane_title(f"Compare {self.left_text} | {self.right_text} · {self.summary()}")
        self.set_rows([str(i) for i in range(len(diff.rows))])
        return changed

    @staticmethod
    def _head(view: StackView, side: Side, text: str) -> list[str]:
        pending = view.side_pending(side)
        if not pending:
            return [text]
        short = member_text(side.member) if side.member is not None else text
        return list(dict.fromkeys([f"{text} · {pending[0]}", f"{short} · {pending[0]}",
                                   f"{short} · {pending[-1]}"]))

    def _fit_heads(self, width: int) -> tuple[str, str]:
        """The two headers in the same form: the longest that fits both."""
        heads = self._heads
        for i in range(max(len(h) for h in heads)):
            texts = [h[min(i, len(h) - 1)] if h else "" for h in heads]
            if all(len(t) <= width for t in texts):
                return texts[0], texts[1]
        return tuple(fit_first(h, width) if h else "" for h in heads)  # type: ignore[return-value]

    def summary(self) -> str:
        d = self.diff
        if not d.rows:
            return "no stack"
        if d.first is None:
            if any(r.kind == LOST for r in d.rows):
                return "same where both are known (one stack cut short)"
            return "same stack"
        kind = KIND_TEXT[d.rows[d.first].kind]
        text = f"diverge at frame {d.first} ({kind})"
        if d.first_function is not None and d.first_function != d.first:
            text += f", other function at {d.first_function}"
        return text

    @property
    def selected(self) -> DiffRow | None:
        rows = self.diff.rows
        row = self.table.cursor_row
        return rows[row] if 0 <= row < len(rows) else None

    def to_divergence(self) -> bool:
        if self.diff.first is None:
            return False
        self.table.show_row(self.diff.first)
        return True

    def columns_for(self, width: int) -> list[tuple[str, str, int, bool]]:
        side = max(8, (width - INDEX - MARK - 4 * CELL_PADDING) // 2)
        left, right = self._fit_heads(side)
        return [("i", "#", INDEX, True), ("left", left, side, False),
                ("mark", "", MARK, False), ("right", right, side, False)]

    def relayout(self) -> None:
        self._columns = ()  # the headers name the sides, which change without a resize
        super().relayout()

    def cells(self, key: str) -> Sequence[Cell]:
        pal = self._palette
        assert pal is not None
        i = int(key)
        row = self.diff.rows[i]
        first = i == self.diff.first
        style = {SAME: "", LINE: pal.warn, DIFFER: pal.bad, LEFT_ONLY: pal.info,
                 RIGHT_ONLY: pal.info, LOST: pal.dim}[row.kind]
        if first:
            style = f"bold {style}".strip()
        index = Cell(f"▶{i}" if first else str(i), f"bold {pal.warn}" if first else pal.dim)
        width = self.width_of("left")
        left = Cell(fit_frame(row.left, width) if row.left is not None else "", style)
        right = Cell(fit_frame(row.right, width) if row.right is not None else "", style)
        return (index, left, Cell(MARKS[row.kind], f"bold {style}".strip() if style else ""), right)
