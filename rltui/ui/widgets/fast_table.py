"""A keyed, read-only table drawn with the Line API, for hundreds of rows that change each tick.

Why not DataTable: any ``update_cell`` there invalidates the render cache of the whole table,
so after each update every visible cell is rendered again through Rich (about 0.2 ms a cell):
with 512 ranks at 200x60 a single frame took about 100 ms. Here a row is a handful of
pre-styled segments, and its cells are asked for only when the row is drawn, so an update
costs the rows on screen, not the rows in the job.

The owner gives a ``cells(key)`` callback and the row keys; ``invalidate()`` after each update
drops the cached cells and redraws.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from rltui.redact import scrub_text
from rltui.scrub import printable
from rltui.ui.widgets.cells import Cell

CellsOf = Callable[[str], Sequence[Cell]]


@lru_cache(maxsize=256)
def _style(text: str) -> Style:
    return Style.parse(text) if text else Style()


def _shown(cell: Cell) -> Cell:
    """A cell can hold an outside string (a command line, a script name, a thread name, a log
    path): secrets hidden, escape sequences written out (they must not reach the terminal).
    Once per row and change, when the row is cached; short cells are numbers and states."""
    text = cell.text
    shown = _shown_text(text) if len(text) >= SCRUB_FROM else printable(text)
    return cell if shown == text else Cell(shown, cell.style)


@lru_cache(maxsize=1024)
def _shown_text(text: str) -> str:
    """Most long cells (names, command lines, stacks, log paths) are the same from one update
    to the next: scrubbed once, not once a second."""
    return printable(scrub_text(text))


SCRUB_FROM = 8  # characters: shorter cells are numbers, states and short names


def _fit(text: str, width: int, right: bool) -> str:
    """``text`` padded or cut (with an ellipsis) to exactly ``width`` cells."""
    length = cell_len(text)
    if length > width:
        return set_cell_size(text, max(0, width - 1)) + "…" if width > 0 else ""
    pad = " " * (width - length)
    return pad + text if right else text + pad


class FastTable(ScrollView, can_focus=True):
    """Columns are ``(key, label, width, right)``; one header line stays on top."""

    COMPONENT_CLASSES = {"fast-table--header", "fast-table--cursor", "fast-table--odd-row"}
    DEFAULT_CSS = """
    FastTable {
        background: $surface;
        color: $foreground;
        overflow-x: hidden;
        overflow-y: auto;
        scrollbar-size-vertical: 1;
    }
    FastTable > .fast-table--header {
        background: $panel;
        text-style: bold;
    }
    FastTable > .fast-table--odd-row {
        background: $surface-lighten-1;
    }
    FastTable > .fast-table--cursor {
        background: $primary 25%;
    }
    FastTable:focus > .fast-table--cursor {
        background: $primary 55%;
        text-style: bold;
    }
    """
    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First row", show=False),
        Binding("end", "cursor_to(-1)", "Last row", show=False),
    ]

    cursor_row = reactive(0, repaint=True, always_update=False)

    class HeaderClicked(Message):
        """A click on a column's header (the pane sorts by that column)."""

        def __init__(self, table: FastTable, column: str) -> None:
            super().__init__()
            self.table = table
            self.column = column

    def __init__(self, cells: CellsOf, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._cells_of = cells
        self._columns: tuple[tuple[str, str, int, bool], ...] = ()
        self._keys: list[str] = []
        self._index: dict[str, int] = {}
        self._cache: dict[str, Sequence[Cell]] = {}
        self._base: Style | None = None
        self._layout_changed = True

    # -- what the owner calls -----------------------------------------------------------------
    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(c[0] for c in self._columns)

    @property
    def row_keys(self) -> tuple[str, ...]:
        return tuple(self._keys)

    @property
    def row_count(self) -> int:
        return len(self._keys)

    def get_row_index(self, key: str) -> int:
        return self._index[key]

    def get_cell(self, key: str, column: str) -> Cell:
        """The cell as drawn (for tests and callers that read the table)."""
        return self._row(key)[self.columns.index(column)]

    def set_columns(self, columns: Sequence[tuple[str, str, int, bool]]) -> None:
        self._columns = tuple(columns)
        self._resize_virtual()
        self._layout_changed = True
        self.invalidate()

    @property
    def cursor_key(self) -> str | None:
        """The key of the row under the cursor (None: no rows)."""
        return self._keys[self.cursor_row] if self.cursor_row < len(self._keys) else None

    def set_rows(self, keys: Sequence[str],
                 successor: Callable[[str], str | None] | None = None) -> None:
        """The rows in order; the cursor stays on the same key when it still exists (whatever
        the new order), else on ``successor(key)`` (the same rank under its new key: a rank
        that departed), else at the same place."""
        if list(keys) == self._keys:
            return
        current = self.cursor_key
        self._keys = list(keys)
        self._index = {k: i for i, k in enumerate(self._keys)}
        self._layout_changed = True
        self._resize_virtual()
        if current is not None and current not in self._index and successor is not None:
            current = successor(current)
        if current in self._index:
            self.cursor_row = self._index[current]
        else:
            self.cursor_row = min(self.cursor_row, max(0, len(self._keys) - 1))

    def invalidate(self) -> None:
        """The cells may have changed: forget them, and redraw when a row on screen differs.

        Repainting is what costs (the monitor must stay near idle on a quiet node), so the rows
        on screen are recomputed and compared first; an update that changes nothing visible
        repaints nothing.
        """
        old, self._cache = self._cache, {}
        if self._layout_changed or not self.is_mounted:
            self._layout_changed = False
            self.refresh()
            return
        top = int(self.scroll_y)
        changed = [index - top + 1  # the screen line: line 0 is the header
                   for index in range(top, min(len(self._keys), top + max(0, self.size.height - 1)))
                   if old.get(self._keys[index]) != self._row(self._keys[index])]
        # Repaint only the rows that changed (a line costs the same whether it shows text or
        # is blank, and a tall pane is mostly blank on a small job).
        start = 0
        while start < len(changed):
            end = start
            while end + 1 < len(changed) and changed[end + 1] == changed[end] + 1:
                end += 1
            self.refresh_lines(self.scroll_offset.y + changed[start], end - start + 1)
            start = end + 1

    # -- drawing ---------------------------------------------------------------------------------
    def _resize_virtual(self) -> None:
        width = sum(c[2] + 2 for c in self._columns)
        self.virtual_size = Size(width, len(self._keys) + 1)

    def _row(self, key: str) -> Sequence[Cell]:
        cells = self._cache.get(key)
        if cells is None:
            cells = self._cache[key] = tuple(map(_shown, self._cells_of(key)))
        return cells

    def render_lines(self, crop: Region) -> list[Strip]:
        # The widget's style walks the DOM; look it up once per paint, not once per line.
        self._base = self.rich_style
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self._base or self.rich_style
        if y == 0:
            style = base + self.get_component_rich_style("fast-table--header", partial=True)
            segments = [Segment(f" {_fit(label, w, right)} ", style)
                        for _, label, w, right in self._columns]
            return Strip(segments).adjust_cell_length(width, style)
        index = int(self.scroll_y) + y - 1
        if index >= len(self._keys):
            return Strip.blank(width, base)
        row_style = base
        if index % 2:
            row_style += self.get_component_rich_style("fast-table--odd-row", partial=True)
        if index == self.cursor_row:
            row_style += self.get_component_rich_style("fast-table--cursor", partial=True)
        cells = self._row(self._keys[index])
        segments = [Segment(f" {_fit(cell.text, w, right)} ", row_style + _style(cell.style))
                    for (_, _, w, right), cell in zip(self._columns, cells)]
        return Strip(segments).adjust_cell_length(width, row_style)

    # -- cursor ----------------------------------------------------------------------------------
    def watch_cursor_row(self, row: int) -> None:
        visible = max(1, self.size.height - 1)
        top = int(self.scroll_y)
        if row < top:
            self.scroll_to(y=row, animate=False)
        elif row >= top + visible:
            self.scroll_to(y=row - visible + 1, animate=False)

    def _move_to(self, row: int) -> None:
        if self._keys:
            self.cursor_row = max(0, min(len(self._keys) - 1, row))

    def action_cursor(self, delta: int) -> None:
        self._move_to(self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        self._move_to(self.cursor_row + direction * max(1, self.size.height - 2))

    def action_cursor_to(self, row: int) -> None:
        self._move_to(row if row >= 0 else len(self._keys) - 1)

    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y >= 1:
            self._move_to(int(self.scroll_y) + offset.y - 1)
            return
        column = self.column_at(offset.x + int(self.scroll_x))
        if column is not None:
            self.post_message(self.HeaderClicked(self, column))

    def column_at(self, x: int) -> str | None:
        """The column drawn at cell ``x`` of a line (each is its width and a space each side)."""
        left = 0
        for key, _, width, _ in self._columns:
            left += width + 2
            if x < left:
                return key
        return None
