"""The log pane: one merged tail of every rank's log, with rank tags, search and filters.

Each evaluation takes only the lines the LogBook gained since the last one
(``lines_since(seq)``) and appends them; nothing is re-rendered per tick. The title carries the
job's progress (the ranks' steps and the ETA where the total is known). With no log files the
pane says how logs are found and which ``--log`` globs it is still waiting for.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from rltui.logbook import LogBook
from rltui.model import OK, LogFileState
from rltui.ui.messages import View
from rltui.ui.widgets.cells import set_title
from rltui.ui.widgets.log_facts import LogIndex, eta, log_index, step_summary
from rltui.ui.widgets.log_view import LogView
from rltui.units import duration

HOW_LOGS_ARE_FOUND = (
    "No log files yet. Each rank's log is found from its stdout/stderr when they go to a "
    "file (train.py > train.log, torchrun --redirects); add any other log with "
    "--log PATH_OR_GLOB.")


FOLLOW_REPAINT_S = 2.0


class LogPane(Vertical):
    ALLOW_MAXIMIZE = True

    def __init__(self, logbook: LogBook | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Logs"
        self.book = logbook
        self.message = Static("", classes="pane-message", markup=False)
        self.message.display = False
        self.log_view = LogView(id="log-view")
        self._seq = 0  # the newest LogBook line already in the view
        self._fed_at: float | None = None  # snapshot time of the last update of the view
        self._said: tuple | None = None
        self._index: LogIndex | None = None
        self._pending: View | None = None  # the newest view waiting for the pane's frame
        self._scheduled = False

    def compose(self) -> ComposeResult:
        yield self.message
        yield self.log_view

    def show(self, view: View) -> None:
        """Called after every evaluation: append what is new, retitle, say what is missing.

        While following a live job the pane is drawn in a frame of its own, just after the
        one that draws the tables: Textual redraws, in full, every widget that overlaps the
        box around all of a frame's changes, so one frame holding the rank table's rows and
        the log lines would redraw the whole screen (the symptoms pane included)."""
        if view.mode == "replay" or not self.is_mounted:
            self._show(view)
            return
        self._pending = view
        if not self._scheduled:
            self._scheduled = True
            self.call_after_refresh(self._show_pending)

    def _show_pending(self) -> None:
        self._scheduled = False
        view, self._pending = self._pending, None
        if view is not None:
            self._show(view)

    def _show(self, view: View) -> None:
        snap = view.snapshot
        index = self._index = log_index(snap)
        lines = self.book.lines_since(self._seq) if self.book is not None else []
        if not self._wait(view, lines):
            self._fed_at = snap.timestamp
            if lines:
                self._seq = lines[-1].seq
            self.log_view.feed(lines, index.rank_of_path, snap.logs, view.palette)
            # the title and the progress line (steps, ETA) go with the lines they describe:
            # paced as they are, so a held second repaints nothing in the pane
            set_title(self, self._title(index))
        self._say(view, index)

    def _wait(self, view: View, lines) -> bool:
        """While following a live job, take new lines at most every FOLLOW_REPAINT_S.

        Following scrolls every line on screen, so each update repaints the whole pane: at one
        update a second that is the largest share of the monitor's CPU on a big terminal. An
        error line is shown at once; replay (which tests and users step through) is not held.
        """
        if (view.mode == "replay" or not self.log_view.lines.follow or self._fed_at is None
                or not lines):
            return False
        if view.snapshot.timestamp - self._fed_at >= FOLLOW_REPAINT_S:
            return False
        return not any(t.line.level == "error" for t in lines)

    def on_log_view_filter_changed(self, event: LogView.FilterChanged) -> None:
        event.stop()
        if self._index is not None:
            set_title(self, self._title(self._index))

    def ranks(self) -> list[int]:
        """Ranks that have a log (for the palette's per-rank commands)."""
        known = set(self._index.ranks) if self._index else set()
        return sorted(known | self.log_view.buffer.ranks)

    # -- title and message -------------------------------------------------------------------
    def _title(self, index: LogIndex) -> str:
        files = index.files
        if not files:
            return "Logs"
        title = f"Logs ({len(files)} file{'s' if len(files) != 1 else ''})"
        rank = self.log_view.buffer.rank_filter
        if rank is not None:
            f = index.for_rank(rank)
            self.log_view.set_progress(step_summary(f) if f is not None else "")
            return f"{title} rank {rank}"
        self.log_view.set_progress(_progress(files).removeprefix(" · "))
        return title

    def _say(self, view: View, index: LogIndex) -> None:
        snap, pal = view.snapshot, view.palette
        source = snap.source("logs")
        text, style = "", pal.dim
        if source is not None and source.status != OK:
            text = f"{source.message or 'log source ' + source.status} {source.remedy}".strip()
            style = pal.bad
        elif not index.files:
            text = HOW_LOGS_ARE_FOUND
            for glob in snap.unmatched_logs:
                text += f"\n--log {glob}: no match yet, waiting for it to appear."
        else:
            failed = [f for f in index.files if f.status != OK]
            if failed:
                f = failed[0]
                text = f"{f.path}: {f.message or f.status}"
                if len(failed) > 1:
                    text += f" (and {len(failed) - 1} more log file(s) unreadable)"
                style = pal.warn
            elif snap.unmatched_logs:
                text = (f"--log {', '.join(snap.unmatched_logs)}: no match yet, waiting for it "
                        "to appear.")
        empty = not index.files and not self.log_view.buffer.entries
        key = (text, style, empty)
        if key == self._said:
            return
        self._said = key
        self.message.display = bool(text)
        self.message.set_class(empty, "-empty")
        self.message.update(Text(text, style=style))
        self.log_view.display = not empty


def _progress(files: tuple[LogFileState, ...]) -> str:
    """`` · step 40-41/100 · eta 4m10s``: the spread of the ranks' steps, and the ETA of the
    rank furthest behind (the job ends when its slowest rank does). One ETA, not one per file:
    this runs at every update, for hundreds of files."""
    stepped = [f for f in files if f.last_step is not None]
    if not stepped:
        return ""
    behind = min(stepped, key=lambda f: f.last_step or 0)
    low, high = behind.last_step, max(f.last_step or 0 for f in stepped)
    out = f" · step {low}" if low == high else f" · step {low}-{high}"
    totals = {f.total_steps for f in stepped if f.total_steps}
    if len(totals) == 1:
        out += f"/{totals.pop()}"
    left = eta(behind)
    if left is not None:
        out += " · done" if left == 0 else f" · eta {duration(left)}"
    return out
