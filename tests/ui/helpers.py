"""Small readers of what the panes show, so tests assert on text rather than internals."""

from __future__ import annotations

import io

from rich.console import Console

from rltui.ui import RltuiApp


def plain(renderable: object, width: int = 200) -> str:
    """A Rich renderable (or Textual content) as plain text."""
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def header_text(app: RltuiApp) -> str:
    return str(app.main_screen.header.content)


def cell(table, row: str, column: str):
    """The cell a table holds for ``row`` and ``column`` (text and style string)."""
    return table.get_cell(row, column)


def drawn(table, row: str, column: str) -> tuple[str, str | None]:
    """What the table actually draws for that cell: (text, foreground colour as #rrggbb)."""
    y = table.get_row_index(row) - int(table.scroll_y) + 1  # line 0 is the header
    assert 1 <= y < table.size.height, "row not on screen"
    # The line starts with one segment per column, in order.
    seg = list(table.render_line(y))[table.columns.index(column)]
    colour = seg.style.color.get_truecolor().hex if seg.style and seg.style.color else None
    return seg.text.strip(), colour


def gpu_message(app: RltuiApp) -> str:
    message = app.main_screen.gpus.message
    return str(message.content) if message.display else ""


def rank_message(app: RltuiApp) -> str:
    message = app.main_screen.ranks.message
    return str(message.content) if message.display else ""


class FakeClock:
    """A monotonic clock the test moves by hand (replay advances by wall time)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
