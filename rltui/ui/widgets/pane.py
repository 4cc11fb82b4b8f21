"""The base of the table panes: a titled, zoomable box holding a message and a table.

Columns have a priority; a pane shows as many as fit its own width, so the same pane is compact
at 80 columns, complete at 200, and complete again when zoomed. An update hands the table the
row keys (cheap) and drops its cached cells; a row's cells are formatted only when the row is
drawn, so one update costs the rows on screen, not the 512 ranks of the job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.events import Resize
from textual.widgets import Static

from rltui.ui.messages import View
from rltui.ui.widgets.cells import Cell
from rltui.ui.widgets.fast_table import FastTable


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    label: str
    width: int
    priority: int  # lower shows first when room is short
    right: bool = False  # right-justify (numbers)


Row = tuple[str, object]  # row key, the item the row shows (a GpuSample, a ProcInfo ...)

CELL_PADDING = 2  # one space each side of a cell
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
    ``cells(item)`` (what one row shows, computed only for rows on screen). A pane whose
    columns depend on the view (a node column across nodes) overrides ``columns(view)``."""

    ALLOW_MAXIMIZE = True
    COLUMNS: tuple[Column, ...] = ()

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.message = Static("", classes="pane-message", markup=False)
        self.message.display = False
        self.table = FastTable(self._row_cells)
        self._shown: tuple[str, ...] = ()
        self._columns: tuple[Column, ...] = self.COLUMNS
        self._width = 0
        self._items: dict[str, object] = {}
        self._view: View | None = None
        self._said: tuple[str, str] = ("", "")

    def compose(self) -> ComposeResult:
        yield self.message
        yield self.table

    # -- to be implemented by panes -------------------------------------------------------
    def rows(self, view: View) -> list[Row]:
        """The rows, in order, for this view; also the place to set title and message."""
        raise NotImplementedError

    def cells(self, item: object) -> dict[str, Cell]:
        """The cells of one row for ``self.view``; columns left out are blank."""
        raise NotImplementedError

    def columns(self, view: View) -> tuple[Column, ...]:
        return self.COLUMNS

    @property
    def view(self) -> View:
        assert self._view is not None
        return self._view

    # -- the update path --------------------------------------------------------------------
    def show(self, view: View) -> None:
        self._view = view
        columns = self.columns(view)
        if columns != self._columns:
            self._columns = columns
            self._fit()
        rows = self.rows(view)
        self._items = dict(rows)
        self.table.set_rows([key for key, _ in rows])
        self.table.invalidate()

    def say(self, text: str = "", style: str = "") -> None:
        """The pane's message: one sentence, wrapped if the pane is narrow (empty hides it)."""
        if (text, style) == self._said:
            return
        self._said = (text, style)
        self.message.display = bool(text)
        self.message.update(Text(text, style=style))

    def on_resize(self, event: Resize) -> None:
        self._width = event.size.width
        self._fit()

    def _fit(self) -> None:
        if not self._width:
            return  # not laid out yet: the first resize fits
        shown = fit_columns(self._columns, self._width)
        if shown != self._shown:
            self._shown = shown
            by_key = {c.key: c for c in self._columns}
            self.table.set_columns([(k, by_key[k].label, by_key[k].width, by_key[k].right)
                                    for k in shown])

    def _row_cells(self, key: str) -> tuple[Cell, ...]:
        cells = self.cells(self._items[key])
        empty = Cell("")
        return tuple(cells.get(c, empty) for c in self._shown)
