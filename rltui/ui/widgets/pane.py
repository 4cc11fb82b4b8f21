"""The base of the table panes: a titled, zoomable box holding a one-line message and a table.

Columns have a priority; a pane shows as many as fit its own width, so the same pane is compact
at 80 columns, complete at 200, and complete again when zoomed. Rows are keyed: each update
compares the new cells with the previous ones and calls ``update_cell`` only where the text or
style changed, and only for the rows in view (the others catch up when scrolled to); the table
is rebuilt only when its rows or columns change. That keeps one update of 512 ranks within a
frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.events import Resize
from textual.widgets import DataTable, Static

from rltui.ui.messages import View
from rltui.ui.widgets.cells import Cell


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    width: int
    priority: int  # lower shows first when room is short
    right: bool = False  # right-justify (numbers)


Row = tuple[str, object]  # row key, the item the row shows (a GpuSample, a ProcInfo ...)

CELL_PADDING = 2  # DataTable's default cell_padding on both sides
CHROME = 4  # borders, scrollbar and slack around the table


def fit_columns(columns: Sequence[Column], width: int) -> tuple[str, ...]:
    """Keys of the columns that fit ``width``, by priority, in display order."""
    chosen: set[str] = set()
    used = CHROME
    for col in sorted(columns, key=lambda c: c.priority):
        need = col.width + CELL_PADDING
        if used + need > width and chosen:
            continue  # a wider one is skipped; a narrower, less important one may still fit
        chosen.add(col.key)
        used += need
    return tuple(c.key for c in columns if c.key in chosen)


class TablePane(Vertical):
    """Subclasses set ``COLUMNS`` and implement ``rows(view)`` (which rows, cheap) and
    ``cells(item)`` (what one row shows, computed only for rows in view)."""

    ALLOW_MAXIMIZE = True
    COLUMNS: tuple[Column, ...] = ()

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.message = Static("", classes="pane-message", markup=False)
        self.message.display = False
        self.table: DataTable = DataTable(cursor_type="row", zebra_stripes=True)
        self._shown: tuple[str, ...] = ()
        self._justify = {c.key: "right" if c.right else "left" for c in self.COLUMNS}
        self._row_keys: list[str] = []
        self._items: dict[str, object] = {}  # what each row should show
        self._pushed: dict[str, tuple[Cell, ...]] = {}  # what the table holds
        self._view: View | None = None
        self._said: tuple[str, str] = ("", "")

    def compose(self) -> ComposeResult:
        yield self.message
        yield self.table

    def on_mount(self) -> None:
        self.watch(self.table, "scroll_y", self._flush_visible, init=False)

    # -- to be implemented by panes -------------------------------------------------------
    def rows(self, view: View) -> list[Row]:
        """The rows, in order, for this view (``self.view``); also the place to set the title
        and the message."""
        raise NotImplementedError

    def cells(self, item: object) -> dict[str, Cell]:
        """The cells of one row, for ``self.view``; columns left out are blank."""
        raise NotImplementedError

    @property
    def view(self) -> View:
        assert self._view is not None
        return self._view

    # -- the update path --------------------------------------------------------------------
    def show(self, view: View) -> None:
        palette_changed = self._view is None or self._view.palette is not view.palette
        self._view = view
        if palette_changed:
            self._pushed.clear()  # every cell must be restyled
        self._sync(self.rows(view))

    def say(self, text: str = "", style: str = "") -> None:
        """The pane's message: one sentence, wrapped if the pane is narrow (empty hides it)."""
        if (text, style) == self._said:
            return
        self._said = (text, style)
        if self.message.display != bool(text):
            self.message.display = bool(text)
            self.call_after_refresh(self._flush_visible)  # the table's height changes
        self.message.update(Text(text, style=style))

    def on_resize(self, event: Resize) -> None:
        shown = fit_columns(self.COLUMNS, event.size.width)
        if shown != self._shown:
            self._shown = shown
            self._rebuild_columns()
        # More rows may be in view now (zoom, a taller terminal): bring them up to date once
        # the table has its new size.
        self.call_after_refresh(self._flush_visible)

    def _rebuild_columns(self) -> None:
        table = self.table
        cursor = table.cursor_row
        table.clear(columns=True)
        by_key = {c.key: c for c in self.COLUMNS}
        for key in self._shown:
            col = by_key[key]
            table.add_column(Text(col.label, justify=self._justify[key]), width=col.width,
                             key=key)
        self._row_keys = []
        if self._view is not None:
            self._sync(self.rows(self._view))
            if cursor < table.row_count:
                table.move_cursor(row=cursor, animate=False)

    def _render_cell(self, key: str, cell: Cell) -> Text:
        return Text(cell.text, style=cell.style, justify=self._justify[key],  # type: ignore[arg-type]
                    no_wrap=True, overflow="ellipsis")

    def _cells_of(self, item: object) -> tuple[Cell, ...]:
        cells = self.cells(item)
        empty = Cell("")
        return tuple(cells.get(c, empty) for c in self._shown)

    def _sync(self, rows: list[Row]) -> None:
        if not self._shown:
            return  # not sized yet: the first resize builds the columns and syncs
        keys = [key for key, _ in rows]
        if keys != self._row_keys:
            self._rebuild_rows(rows)
            return
        self._items = dict(rows)
        self._flush_visible()

    def _flush_visible(self) -> None:
        """Compute the rows in view (and a few around) and push their changed cells.

        With 512 ranks most rows are off screen: formatting them and calling ``update_cell``
        (a refresh each) would cost more than the whole budget of an update, so they wait
        until a scroll or resize brings them into view.
        """
        if self._view is None:
            return
        table, shown = self.table, self._shown
        margin = 2
        first = max(0, int(table.scroll_y) - margin)
        last = int(table.scroll_y) + table.size.height + margin
        for key in self._row_keys[first:last]:
            new = self._cells_of(self._items[key])
            old = self._pushed.get(key)
            if new == old:
                continue
            self._pushed[key] = new
            for i, col in enumerate(shown):
                if old is None or old[i] != new[i]:
                    table.update_cell(key, col, self._render_cell(col, new[i]))

    def _rebuild_rows(self, rows: list[Row]) -> None:
        table = self.table
        keep = None
        if table.row_count and table.cursor_row < len(self._row_keys):
            keep = self._row_keys[table.cursor_row]
        table.clear()
        self._pushed.clear()
        self._items = dict(rows)
        blank = [""] * len(self._shown)
        for key, _ in rows:
            table.add_row(*blank, key=key)  # filled by the flush, in view first
        self._row_keys = keys = [key for key, _ in rows]
        if keep is not None and keep in keys:
            table.move_cursor(row=keys.index(keep), animate=False)
        self._flush_visible()
