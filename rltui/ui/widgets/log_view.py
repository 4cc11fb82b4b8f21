"""A log view: the lines, a status line, and the search box; the keys that browse logs.

The same view serves the merged log pane and the full-screen log of one rank, so search,
filters and jumps behave the same in both. Its keys apply while it has focus, which is what
lets ``n`` mean "next match" here during a search and "step" (replay) everywhere else: an
action that does not apply (no search, nothing to open) passes the key on to the app.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Static

from rltui.logbook import TaggedLine
from rltui.model import LogFileState
from rltui.ui.themes import Palette
from rltui.ui.widgets.log_buffer import MAX_BATCH, LogBuffer
from rltui.ui.widgets.log_lines import LogLines

# Events whose lines count as errors (the "completion" banner is good news).
ERROR_EVENTS = frozenset({"traceback", "cuda-oom", "engine-oom", "ray-oom", "nccl-timeout",
                          "child-failed"})


class OpenLog(Message):
    """Open the log of ``rank`` (all its files), or of ``path`` when no rank is known, full
    screen. Posted by the log pane and the rank table; the app opens the screen."""

    def __init__(self, rank: int | None, path: str | None = None) -> None:
        super().__init__()
        self.rank = rank
        self.path = path


class LogView(Vertical):
    class FilterChanged(Message):
        """The rank filter changed (the pane's title names the rank)."""

    ALLOW_MAXIMIZE = False  # zoom the pane around it, not the view alone
    DEFAULT_CSS = """
    LogView { height: 1fr; }
    LogView > LogLines { height: 1fr; }
    LogView > .log-status { height: 1; background: $panel; padding: 0 1; }
    LogView > Input, LogView > Input:focus { height: 1; border: none; padding: 0 1; }
    """
    BINDINGS = [
        Binding("f", "toggle_follow", "Follow", id="rltui.logs.follow",
                tooltip="follow on/off: when off, new lines do not move the view"),
        Binding("slash", "search", "Search", id="rltui.logs.search",
                tooltip="search the kept lines (an upper-case letter makes it exact)"),
        Binding("n", "find(1)", "Next match", id="rltui.logs.next_match",
                tooltip="during a search; otherwise n is the replay step"),
        Binding("N", "find(-1)", "Previous match", id="rltui.logs.previous_match",
                show=False, tooltip="during a search"),
        Binding("x", "errors_only", "Errors", id="rltui.logs.errors_only",
                tooltip="only error lines and the tracebacks/OOM messages around them"),
        Binding("full_stop", "error(1)", "Next error", id="rltui.logs.next_error", show=False,
                tooltip="the next error line, traceback or OOM (one stop per traceback)"),
        Binding("comma", "error(-1)", "Previous error", id="rltui.logs.previous_error",
                show=False, tooltip="the previous error line, traceback or OOM"),
        Binding("greater_than_sign", "cycle_rank(1)", "Next rank",
                id="rltui.logs.next_rank", show=False,
                tooltip="show one rank's lines: the next rank, then all ranks again"),
        Binding("less_than_sign", "cycle_rank(-1)", "Previous rank",
                id="rltui.logs.previous_rank", show=False,
                tooltip="show one rank's lines: the previous rank"),
        Binding("o", "open", "Open log", id="rltui.logs.open",
                tooltip="open the rank's log full screen (the filtered rank, else the rank "
                        "of the line at the cursor or at the bottom)"),
        Binding("escape", "clear", "Clear search", id="rltui.logs.clear", show=False,
                tooltip="close the search box; again to clear the search"),
    ]

    def __init__(self, *, tags: bool = True, line_numbers: bool = False,
                 can_open: bool = True, max_batch: int | None = MAX_BATCH,
                 id: str | None = None) -> None:
        super().__init__(id=id)
        self.buffer = LogBuffer(max_batch=max_batch)
        self.lines = LogLines(self.buffer, tags=tags, line_numbers=line_numbers)
        self.status = Static("", classes="log-status", markup=False)
        self.search_box = Input(placeholder="search: enter finds, escape cancels",
                                classes="log-search")
        self.search_box.display = False
        self.can_open = can_open
        self._palette: Palette | None = None
        self._events_seen: dict[str, tuple[float, int]] = {}
        self._status_key: tuple | None = None
        # Step progress of the ranks shown (set by the owner). It lives in the one-line status,
        # not the border title: a new title repaints the whole pane, a new status one line.
        self.progress = ""

    def compose(self) -> ComposeResult:
        yield self.lines
        yield self.search_box
        yield self.status

    def on_mount(self) -> None:
        # A move up in the lines turns follow off there; the status line must say so.
        self.watch(self.lines, "follow", lambda _: self.update_status(), init=False)

    # -- feeding --------------------------------------------------------------------------------
    def feed(self, lines: Sequence[TaggedLine], rank_of: Mapping[str, int],
             logs: Iterable[LogFileState], palette: Palette) -> None:
        """Append new lines and mark the parsers' new events (called once per evaluation)."""
        self._palette = palette
        self.lines.set_palette(palette)
        keep = None if self.lines.follow else self.lines.top_position()
        added, dropped = self.buffer.add(lines, rank_of)
        if self._mark_events(logs) and self.buffer.errors_only:
            self.lines.rebuilt(keep)  # lines joined the errors-only rows above the end
        else:
            self.lines.rows_changed(added, dropped)
        self.update_status()

    def _mark_events(self, logs: Iterable[LogFileState]) -> bool:
        changed = False
        for f in logs:
            if not f.events:
                continue
            newest = (f.events[-1].arrival, f.events[-1].line_no)
            seen = self._events_seen.get(f.path)
            if seen == newest:
                continue
            self._events_seen[f.path] = newest
            for event in reversed(f.events):
                if (event.arrival, event.line_no) == seen:
                    break
                if event.kind in ERROR_EVENTS:
                    changed |= self.buffer.mark_event(f.path, event.line_no, event.end_line)
        return changed

    # -- state for callers ---------------------------------------------------------------------
    @property
    def follow(self) -> bool:
        return self.lines.follow

    def set_rank_filter(self, rank: int | None) -> None:
        keep = self._keep()
        self.buffer.set_filter(rank=rank)
        self.lines.rebuilt(keep)
        self.update_status()
        self.post_message(self.FilterChanged())

    def set_query(self, query: str) -> None:
        self.buffer.set_query(query)
        self.lines.refresh()
        self.update_status()

    def _keep(self) -> int | None:
        """The line to keep in view through a filter change."""
        if self.lines.visible(self.lines.cursor):
            return self.lines.cursor
        return self.lines.top_position()

    # -- actions ----------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "find":
            return bool(self.buffer.query)  # no search: n is the app's (replay step)
        if action == "clear":
            return self.search_box.display or bool(self.buffer.query)
        if action in ("open", "cycle_rank"):
            return self.can_open
        return True

    def action_toggle_follow(self) -> None:
        self.lines.follow = not self.lines.follow
        self.update_status()

    def action_errors_only(self) -> None:
        keep = self._keep()
        self.buffer.set_filter(errors_only=not self.buffer.errors_only)
        self.lines.rebuilt(keep)
        self.update_status()

    def action_cycle_rank(self, direction: int) -> None:
        ranks = sorted(self.buffer.ranks)
        if not ranks:
            self.notify("No rank is known for any log line yet.", severity="warning")
            return
        current = self.buffer.rank_filter
        if current is None or current not in ranks:
            rank: int | None = ranks[0] if direction > 0 else ranks[-1]
        else:
            i = ranks.index(current) + direction
            rank = ranks[i] if 0 <= i < len(ranks) else None
        self.set_rank_filter(rank)

    def action_search(self) -> None:
        self.search_box.value = self.buffer.query
        self.search_box.display = True
        self.search_box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._close_search()
        self.set_query(event.value)
        if event.value:
            # Logs are read from the end: the first hit is the newest one on or above screen.
            start = self.lines.edge_position(-1)
            pos = self.buffer.next_match(start, -1)
            if pos is None:
                pos = self.buffer.next_match(start, 1)
            if pos is not None:
                self._jump_to_match(pos)
            self.update_status()

    def _jump_to_match(self, pos: int) -> None:
        entry = self.buffer.at(pos)
        spans = self.buffer.spans(entry.text) if entry is not None else []
        if spans:
            self.lines.jump(pos, spans[0][0], spans[0][1] - spans[0][0])
        else:
            self.lines.jump(pos)

    def _close_search(self) -> None:
        self.search_box.display = False
        self.lines.focus()

    def action_clear(self) -> None:
        if self.search_box.display:
            self._close_search()
        else:
            self.set_query("")

    def action_find(self, direction: int) -> None:
        pos = self.buffer.next_match(self.lines.edge_position(direction), direction)
        if pos is None:
            self.notify(f"No {'later' if direction > 0 else 'earlier'} match for "
                        f"{self.buffer.query!r}.", timeout=3)
            return
        self._jump_to_match(pos)
        self.update_status()

    def action_error(self, direction: int) -> None:
        pos = self.buffer.next_error(self.lines.edge_position(direction), direction)
        if pos is None:
            self.notify(f"No {'later' if direction > 0 else 'earlier'} error in the lines "
                        "shown.", timeout=3)
            return
        self.lines.jump(pos, 0)  # an error line says what it is at its start
        self.update_status()

    def action_open(self) -> None:
        buf = self.buffer
        if buf.rank_filter is not None:
            self.post_message(OpenLog(buf.rank_filter))
            return
        pos = self.lines.cursor if self.lines.visible(self.lines.cursor) else None
        if pos is None and buf.shown:
            bottom = min(int(self.lines.scroll_y) + self.lines.size.height, len(buf.shown))
            pos = buf.shown[max(0, bottom - 1)]
        entry = buf.at(pos) if pos is not None else None
        while entry is not None and not entry.path:  # a "lines skipped" marker
            pos = pos - 1 if pos is not None else None
            entry = buf.at(pos) if pos is not None else None
        if entry is None:
            self.notify("No log lines yet.", severity="warning")
            return
        self.post_message(OpenLog(entry.rank, entry.path))

    # -- status line ------------------------------------------------------------------------------
    def set_progress(self, text: str) -> None:
        if text != self.progress:
            self.progress = text
            self.update_status()

    def update_status(self) -> None:
        buf, pal = self.buffer, self._palette
        key = (self.lines.follow, buf.rank_filter, buf.errors_only, buf.query,
               len(buf.matches), self.lines.cursor, pal, self.progress)
        if key == self._status_key or pal is None:
            return
        self._status_key = key
        out = Text(no_wrap=True, overflow="ellipsis")
        if self.progress:
            out.append(self.progress + "  ", style="bold")
        if self.lines.follow:
            out.append("follow", style=pal.ok)
        else:
            out.append("follow off", style=f"bold {pal.warn}")
        out.append("  ")
        out.append("all ranks" if buf.rank_filter is None else f"rank {buf.rank_filter}",
                   style="" if buf.rank_filter is None else "bold")
        if buf.errors_only:
            out.append("  errors only", style=f"bold {pal.bad}")
        if buf.query:
            out.append(f"  /{buf.query}", style="bold")
            n = len(buf.matches)
            if not n:
                out.append(" no match", style=pal.warn)
            else:
                cursor = self.lines.cursor
                at = buf.matches.index(cursor) + 1 if cursor in buf.matches else None
                out.append(f" {at} of {n}" if at else f" {n} match(es)", style=pal.dim)
        out.append("   f follow  / search  x errors  . , error", style=pal.dim)
        if self.can_open:
            out.append("  < > rank  o open", style=pal.dim)
        # One line of fixed height: no layout pass (a layout repaints the whole pane).
        self.status.update(out, layout=False)
