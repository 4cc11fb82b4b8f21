"""Small readers of what the panes show, so tests assert on text rather than internals, and
waits on events (never a fixed pause): ``until_view`` waits on evaluations, ``until_idle`` on
the app having handled its pending messages, ``record_intervals`` lets a test fire the app's
interval timers by hand."""

from __future__ import annotations

import io
import time
from collections.abc import Callable

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


# -- waiting on events ---------------------------------------------------------------------------
# The timeouts are safety nets for a loaded machine, not bounds: a wait returns as soon as its
# condition holds.

async def until_view(app: RltuiApp, condition: Callable[[object], object], what: str,
                     timeout: float = 30.0):
    """The first view after this call for which ``condition(view)`` holds (waits on
    evaluations: what a thread worker brings in is shown by one)."""
    deadline = time.monotonic() + timeout
    while True:
        view = await app.next_evaluation(timeout=timeout)
        if condition(view):
            return view
        assert time.monotonic() < deadline, f"never: {what}"


async def dump_now(app: RltuiApp, pilot, until: Callable[[object], object]):
    """``d`` on a live app: the dump's worker ends, then the first evaluation for which
    ``until(view)`` holds (the round reaches the view on a later evaluation)."""
    await pilot.press("d")
    await app.workers.wait_for_complete()
    view = await app.wait_for_evaluation(app.evaluations)
    while not until(view):
        view = await app.wait_for_evaluation(app.evaluations)
    return view


async def until_idle(pilot, condition: Callable[[], object], what: str,
                     timeout: float = 30.0) -> None:
    """Wait until ``condition()`` holds, letting the app handle its pending messages between
    looks (``pilot.pause()`` with no delay returns once the app is idle): for what the UI does
    on its own event loop (a palette search, a table scrolling once it has its size)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        await pilot.pause()


def record_intervals(app) -> dict[str, Callable[[], object]]:
    """The callbacks of the interval timers the app sets from now on, by timer name (call
    before ``run_test``): a test fires one by hand, exactly as its timer would, instead of
    waiting for intervals to pass."""
    fired: dict[str, Callable[[], object]] = {}
    set_interval = app.set_interval

    def recording(interval, callback=None, *args, name=None, **kwargs):
        if name is not None and callback is not None:
            fired[name] = callback
        return set_interval(interval, callback, *args, name=name, **kwargs)

    app.set_interval = recording
    return fired


def headers(table) -> dict[str, str]:
    """The column headers the table draws (its line 0), by column key."""
    return {key: seg.text.strip() for key, seg in zip(table.columns, table.render_line(0))}


def record_notes(app) -> list[str]:
    """The messages of the notifications the app shows from now on (also those a worker
    thread asks for through ``call_from_thread``)."""
    notes: list[str] = []
    notify = app.notify

    def recording(message, *args, **kwargs):
        notes.append(str(message))
        return notify(message, *args, **kwargs)

    app.notify = recording
    return notes
