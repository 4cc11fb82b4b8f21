"""The table and titled box shared by the compare screen's panes (classes, tree, diff).

``StackTable`` is the monitor's ``FastTable`` (same look, same cursor keys) that also says when
its cursor moves, so the screen can follow it (the source under the diff, the tree's keys).
``StackPane`` is a zoomable box around one; a subclass lays out its columns for its own width.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.events import Resize
from textual.message import Message

from rltui.ui.widgets.cells import Cell, set_title
from rltui.ui.widgets.fast_table import CellsOf, FastTable

CELL_PADDING = 2  # one space each side of a cell
SCROLLBAR = 1  # the vertical scrollbar, when the rows overflow


class StackTable(FastTable):
    class CursorMoved(Message):
        def __init__(self, table: StackTable, row: int) -> None:
            super().__init__()
            self.table = table
            self.row = row

        @property
        def control(self) -> StackTable:
            return self.table

    def __init__(self, cells: CellsOf, *, id: str | None = None) -> None:
        super().__init__(cells, id=id)
        self._anchor: tuple[int, int] | None = None  # (row, rows of context above it)

    @property
    def cursor_key(self) -> str | None:
        keys = self.row_keys
        return keys[self.cursor_row] if 0 <= self.cursor_row < len(keys) else None

    def move_to_key(self, key: str) -> bool:
        """Put the cursor on the row ``key`` (scrolled into view); False when there is none."""
        try:
            self.cursor_row = self.get_row_index(key)
        except KeyError:
            return False
        return True

    def show_row(self, row: int, above: int = 1) -> None:
        """Cursor to ``row``, scrolled near the top with ``above`` rows before it, so what
        follows it (the frames below a divergence) is on screen."""
        self._anchor = (row, above)
        self.cursor_row = row
        self.call_after_refresh(self._keep_in_view)

    def watch_cursor_row(self, row: int) -> None:
        if self._anchor is not None and self._anchor[0] != row:
            self._anchor = None  # the user moved on: plain scrolling from here
        super().watch_cursor_row(row)
        self.post_message(self.CursorMoved(self, row))

    def _keep_in_view(self) -> None:
        if self._anchor is not None and self.size.height > 1:
            row, above = self._anchor
            self.scroll_to(y=max(0, row - above), animate=False)
        else:
            FastTable.watch_cursor_row(self, self.cursor_row)

    def on_resize(self, event: Resize) -> None:
        # A cursor put on a row before the first layout (or a zoom, a smaller terminal) must
        # end up on screen: scroll again once the new height is known.
        self.call_after_refresh(self._keep_in_view)


class StackPane(Vertical):
    """A titled, zoomable box around one ``StackTable``; ``columns_for(width)`` gives the columns
    (key, label, width, right-justified) for the pane's inner width."""

    ALLOW_MAXIMIZE = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="stack-pane")
        self.table = StackTable(self.cells, id=f"{id}-table" if id else None)
        self._width = 0
        self._columns: tuple = ()

    def compose(self) -> ComposeResult:
        yield self.table

    def cells(self, key: str) -> Sequence[Cell]:
        raise NotImplementedError

    def columns_for(self, width: int) -> list[tuple[str, str, int, bool]]:
        raise NotImplementedError

    def set_pane_title(self, text: str) -> None:
        set_title(self, text)

    def relayout(self) -> None:
        """Columns for the current width (their labels or widths may depend on the data)."""
        columns = tuple(self.columns_for(max(10, self._width - SCROLLBAR)))
        if columns != self._columns:
            self._columns = columns
            self.table.set_columns(columns)

    def width_of(self, column: str) -> int:
        """The width of a column as laid out (cells fit their text to it)."""
        return next((c[2] for c in self._columns if c[0] == column), 80)

    def set_rows(self, keys: Sequence[str]) -> None:
        self.table.set_rows(keys)
        self.relayout()
        self.table.invalidate()

    def on_resize(self, event: Resize) -> None:
        self._width = self.size.width  # inside the borders (the event's size is outside)
        self.relayout()


def rest(width: int, *fixed: int) -> int:
    """What is left of ``width`` for one flexible column after the fixed ones (and padding)."""
    return max(8, width - sum(w + CELL_PADDING for w in fixed) - CELL_PADDING)


# The bordered panes of the compare screen and of the Flight Recorder's groups view, as each
# screen's CSS (a screen's DEFAULT_CSS, where its own rules that follow may refine them).
def pane_css(screen: str) -> str:
    return f"""
    {screen} .stack-pane {{
        border: round $primary 60%;
        border-title-color: $foreground;
        border-title-style: bold;
        padding: 0;
        height: 1fr;
    }}
    {screen} .stack-pane:focus-within {{
        border: round $accent;
    }}
    {screen} .stack-pane > StackTable {{
        height: 1fr;
    }}
"""


def short_pane_css(screen: str) -> str:
    """Short terminals (80x24): one line of chrome per pane, as on the main screen."""
    return f"""
    {screen}.-short .stack-pane {{
        border: none;
        border-top: solid $primary 60%;
    }}
    {screen}.-short .stack-pane:focus-within {{
        border: none;
        border-top: solid $accent;
    }}
"""
