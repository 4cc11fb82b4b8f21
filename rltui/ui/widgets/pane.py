"""The base of the table panes: a titled, zoomable box holding a message and a table.

Columns have a priority; a pane shows as many as fit its own width, so the same pane is compact
at 80 columns, complete at 200, and complete again when zoomed. What is left over goes to the
columns that can use it (``grow``: a GPU's name), so a wide terminal shows names whole.

Every table pane sorts: ``,`` and ``.`` move the sort column left and right among the columns
shown, ``I`` (htop's key) or a click on the sorted column's header reverses the order, a click
on another header sorts by it. The header marks the column with ``▲``/``▼``; until one is chosen the
rows keep the pane's own order (by rank, by GPU index) and no mark shows. The cursor stays on
its row's key through updates and re-sorts (FastTable.set_rows). An update hands the table the
row keys (cheap) and drops its cached cells; a row's cells are formatted only when the row is
drawn, so one update costs the rows on screen, not the 512 ranks of the job.

A pane folds (``fold``) to one summary line where the screen is too short for its rows and
something matters more (the main screen at 80x24 with symptoms): the table hides and the line
says what the rows would, one group each (rltui.tablesummary). Zoomed, it unfolds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.events import Resize
from textual.widgets import Static

from rltui.tablesort import Value, cell_value, next_column, sort_rows
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
    grow: int = 0  # up to this many more cells when the pane has room to spare


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


def column_widths(columns: Sequence[Column], shown: Sequence[str], width: int) -> dict[str, int]:
    """The width of each shown column: its own, plus the room the shown columns leave, shared
    in display order among those that ``grow`` (each up to its ``grow``)."""
    by_key = {c.key: c for c in columns}
    widths = {k: by_key[k].width for k in shown}
    spare = width - CHROME - sum(w + CELL_PADDING for w in widths.values())
    for key in shown:
        if spare <= 0:
            break
        extra = min(spare, by_key[key].grow)
        widths[key] += extra
        spare -= extra
    return widths


SORT_MARKS = ("▲", "▼")  # ascending, descending


def header_label(label: str, width: int, mark: str = "") -> str:
    """A header's label with the sort mark kept whole: the label is cut first."""
    if not mark:
        return label
    if len(label) + 1 > width:
        return label[:max(0, width - 1)] + mark
    return label + mark


class Summary(Static):
    """A folded pane's line: focusable while folded (TablePane.fold), so tab reaches the pane
    and ``z`` or enter zooms it (zoomed, the pane unfolds to its table)."""

    BINDINGS = [Binding("enter", "app.zoom", "Zoom", show=False, id="rltui.table.unfold",
                        tooltip="the whole table, full screen")]


class TablePane(Vertical):
    """Subclasses set ``COLUMNS`` and implement ``rows(view)`` (which rows, cheap) and
    ``cells(item)`` (what one row shows, computed only for rows on screen). A pane whose
    columns depend on the view (a node column across nodes) overrides ``columns(view)``."""

    ALLOW_MAXIMIZE = True
    COLUMNS: tuple[Column, ...] = ()
    BINDINGS = [
        Binding("full_stop", "sort(1)", "Sort", id="rltui.table.sort_next", show=False,
                tooltip="sort by the next column to the right (again: further right)"),
        Binding("comma", "sort(-1)", "Sort", id="rltui.table.sort_previous", show=False,
                tooltip="sort by the next column to the left"),
        Binding("I", "reverse_sort", "Reverse", id="rltui.table.sort_reverse", show=False,
                tooltip="reverse the sort order (a click on the sorted column's header too)"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.message = Static("", classes="pane-message", markup=False)
        self.message.display = False
        self.table = FastTable(self._row_cells)
        # the folded pane's one line: no wrap, cut with an ellipsis where the pane is narrow
        self.summary = Summary("", classes="pane-summary", markup=False)
        self.folded = False
        self.table_wanted = True  # False: the pane's message stands in for its table
        self._shown: tuple[str, ...] = ()
        self._widths: dict[str, int] = {}
        self._columns: tuple[Column, ...] = self.COLUMNS
        self._width = 0
        self._items: dict[str, object] = {}
        self._view: View | None = None
        self._said: tuple[str, str] = ("", "")
        self._natural: list[str] = []  # the row keys in the pane's own order
        self.sort_column: str | None = None  # None: the pane's own order
        self.sort_reverse = False

    def compose(self) -> ComposeResult:
        yield self.message
        yield self.summary
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

    def sort_value(self, item: object, column: str) -> Value:
        """What ``item`` sorts by in ``column``: by default what its cell says; a pane gives
        the real value where the cell rounds or formats it (bytes, durations)."""
        cell = self.cells(item).get(column)
        return None if cell is None else cell_value(cell.text)

    def summary_text(self) -> str:
        """The rows in one line, one group each, for a folded pane (after ``rows``)."""
        return ""

    def fold(self, folded: bool) -> None:
        """Show one summary line instead of the table (True), or the table again."""
        if folded == self.folded:
            return
        self.folded = folded
        self.set_class(folded, "-folded")
        self.summary.can_focus = folded  # unfolded, tab goes to the table
        self.show_table(self.table_wanted)
        self._show_message()
        if folded and self._view is not None:
            self.summary.update(self.summary_text())

    def show_table(self, wanted: bool) -> None:
        """Show the table (when wanted and not folded) or hide it (its message then speaks)."""
        self.table_wanted = wanted
        self.table.display = wanted and not self.folded
        self._show_message()

    def keep(self, keys: list[str]) -> list[str]:
        """The rows shown of ``keys`` (a pane with a filter leaves some out)."""
        return keys

    def successor(self, key: str) -> str | None:
        """The key a row may take next (the cursor follows it); None: it has none."""
        return None

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
        self._natural = [key for key, _ in rows]
        self._set_rows()
        self.table.invalidate()
        if self.folded:
            self.summary.update(self.summary_text())

    def _set_rows(self) -> None:
        keys = self.keep(self._natural)
        column = self.sort_column
        if column is not None:
            items = self._items
            keys = sort_rows(keys, lambda k: self.sort_value(items[k], column), self.sort_reverse)
        self.table.set_rows(keys, self.successor)

    # -- sorting ------------------------------------------------------------------------------
    def sort_by(self, column: str | None, reverse: bool = False) -> None:
        """Sort by ``column`` (None: the pane's own order) and redraw at once."""
        self.sort_column, self.sort_reverse = column, reverse
        self._shown = ()  # the header's mark moved
        self._fit()
        if self._view is not None:
            self._set_rows()
            self.table.invalidate()

    def action_sort(self, step: int) -> None:
        self.sort_by(next_column(self._shown, self.sort_column, step))

    def action_reverse_sort(self) -> None:
        shown = self._shown
        self.sort_by(self.sort_column or (shown[0] if shown else None), not self.sort_reverse)

    def on_fast_table_header_clicked(self, event: FastTable.HeaderClicked) -> None:
        event.stop()
        if event.column == self.sort_column:
            self.sort_by(event.column, not self.sort_reverse)
        else:
            self.sort_by(event.column)

    def say(self, text: str = "", style: str = "") -> None:
        """The pane's message: one sentence, wrapped if the pane is narrow (empty hides it)."""
        if (text, style) == self._said:
            return
        self._said = (text, style)
        self._show_message()
        self.message.update(Text(text, style=style))

    def _show_message(self) -> None:
        # a folded pane with no table says its message in the summary line (one line, not the
        # message's three at 80x24); with a table the message stays beside the summary
        self.message.display = bool(self._said[0]) and not (self.folded and not self.table_wanted)

    def on_resize(self, event: Resize) -> None:
        self._width = event.size.width
        self._fit()

    def _fit(self) -> None:
        if not self._width:
            return  # not laid out yet: the first resize fits
        # the sorted column is a cell wider where its label and mark need it (util▲)
        columns = tuple(
            replace(c, width=max(c.width, len(c.label) + 1)) if c.key == self.sort_column else c
            for c in self._columns)
        shown = fit_columns(columns, self._width)
        widths = column_widths(columns, shown, self._width)
        if (shown, widths) != (self._shown, self._widths):
            self._shown, self._widths = shown, widths
            by_key = {c.key: c for c in self._columns}
            mark = SORT_MARKS[self.sort_reverse]
            self.table.set_columns([
                (k, header_label(by_key[k].label, widths[k], mark if k == self.sort_column
                                 else ""), widths[k], by_key[k].right)
                for k in shown])

    def _row_cells(self, key: str) -> tuple[Cell, ...]:
        cells = self.cells(self._items[key])
        empty = Cell("")
        return tuple(cells.get(c, empty) for c in self._shown)
