"""One rank's log full screen: every kept line of its files, with line numbers.

Opened with ``o`` from the log pane or the rank table (or the palette's ``Logs: Open rank N
log``); ``escape`` closes it. It reads the same LogBook as the pane: all of this rank's kept
lines when it opens, then only the new ones at each evaluation. Opened from a symptom's evidence
(enter on a ``file:line``), the cursor starts on that line (``line``), follow off. Search, the errors-only filter
and the error jumps are the pane's own (the same view), so the keys are the same.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from rltui.logbook import LogBook, TaggedLine
from rltui.model import NodeSnapshot
from rltui.scrub import printable
from rltui.ui.messages import View
from rltui.ui.widgets.log_buffer import MAX_BATCH
from rltui.ui.widgets.log_facts import LogIndex, log_index, step_summary
from rltui.ui.widgets.log_view import LogView


class LogFileScreen(Screen):
    BINDINGS = [
        Binding("escape", "close", "Close", id="rltui.logfile.close",
                tooltip="back to the main screen"),
    ]
    DEFAULT_CSS = """
    LogFileScreen #log-file-title {
        height: 1;
        background: $panel;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, book: LogBook, rank: int | None, path: str | None,
                 view: View | None, line: int | None = None) -> None:
        super().__init__(id="log-file")
        self.book = book
        self.rank = rank
        self.path = path
        self.title_bar = Static("", id="log-file-title", markup=False)
        self.log_view = LogView(tags=False, line_numbers=True, can_open=False,
                                id="log-file-view")
        self._seq = 0
        self._job: str | None = None  # several jobs: the rank's job, told once (_scope)
        self._snap: NodeSnapshot | None = None  # that job's own snapshot, as last read
        self._files: frozenset[str] | None = None  # its log files
        self._first_view = view
        self.line = line

    @property
    def label(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else (self.path or "?")

    def compose(self) -> ComposeResult:
        yield self.title_bar
        yield self.log_view
        yield Footer(compact=True)

    def on_mount(self) -> None:
        view = self._first_view
        if view is not None:
            # Everything this rank's files still have in the LogBook, in one batch: the cap on
            # new lines per update is for the running tail, not for opening a file.
            self.log_view.buffer.max_batch = None
            self._take(self.book.lines(), view)
            self.log_view.buffer.max_batch = MAX_BATCH
        self.log_view.lines.focus()
        if self.line is not None:
            self.call_after_refresh(self._to_line)  # once laid out: the jump centres it

    def _to_line(self) -> None:
        """The cursor on line ``self.line`` of ``self.path`` (the evidence's), if still kept."""
        buf = self.log_view.buffer
        pos = next((buf.base + i for i in range(len(buf.entries) - 1, -1, -1)
                    if buf.entries[i].path == self.path
                    and buf.entries[i].line_no == self.line), None)
        if pos is None or not self.log_view.lines.jump(pos):
            self.notify(f"Line {self.line} of {printable(self.path or '?')} is no longer kept: "
                        "the log shows its newest lines.", severity="warning", timeout=6)
        self.log_view.update_status()

    def show(self, view: View) -> None:
        """Called after every evaluation while this screen is on top."""
        self._take(self.book.lines_since(self._seq), view)

    def _take(self, lines: list[TaggedLine], view: View) -> None:
        if lines:
            self._seq = lines[-1].seq
        scope = self._scope(view)
        # the rank's job's own logs (which file is whose rank, their events), else the view's
        snap = self._snap if self._snap is not None else view.snapshot
        index = log_index(snap)
        rank_of = index.rank_of_path
        mine = [t for t in lines if self._mine(t, rank_of, scope)]
        self.log_view.feed(mine, rank_of, snap.logs, view.palette)
        self.title_bar.update(self._title(view, index, scope))

    def _scope(self, view: View) -> frozenset[str] | None:
        """Several jobs on the node: the log files of this rank's job (rank numbers repeat
        from job to job; rank 2 of one job is not rank 2 of the other). The job is the one whose
        logs hold ``path`` (opened from a row or an evidence line), else the job shown alone;
        once told, it stays this screen's (``j`` to another job or to all jobs while it is open
        changes nothing here), its files read again at each evaluation (a file it starts later
        joins). None: every file of the rank number (one job, or no way to tell)."""
        if self.rank is None:
            return None
        jobs = [v for v in view.jobs if v.job is not None]
        if self._job is None and len(jobs) > 1:
            if self.path is not None:
                self._job = next((v.key for v in jobs
                                  if any(f.path == self.path for f in v.snapshot.logs)), None)
            if self._job is None and view.focus is not None:
                self._job = view.focus  # the snapshot is that job's alone
        mine = next((v for v in jobs if v.key == self._job), None)
        if mine is not None:
            self._snap = mine.snapshot
            self._files = frozenset(f.path for f in mine.snapshot.logs)
        return self._files  # its job gone from the node: the files it had

    def _mine(self, t: TaggedLine, rank_of: dict[str, int],
              scope: frozenset[str] | None) -> bool:
        if self.rank is None:
            return t.path == self.path
        if scope is not None and t.path not in scope:
            return False
        rank = t.rank if t.rank is not None else rank_of.get(t.path)
        return rank == self.rank

    def _title(self, view: View, index: LogIndex, scope: frozenset[str] | None) -> Text:
        pal = view.palette
        files = (index.files_of_rank(self.rank) if self.rank is not None
                 else [f for f in [index.for_path(self.path or "")] if f is not None])
        if scope is not None:
            files = [f for f in files if f.path in scope]
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(f" {self.label} log ", style="bold reverse")
        if files:
            out.append(f"  {printable(files[0].path)}")
            if len(files) > 1:
                out.append(f" (+{len(files) - 1} more)", style=pal.dim)
            best = (index.for_rank(self.rank) if self.rank is not None and scope is None
                    else files[0])
            summary = step_summary(best) if best is not None else ""
            if summary:
                out.append(f"  {summary}", style="bold")
        out.append(f"  {len(self.log_view.buffer.entries)} lines kept", style=pal.dim)
        out.append("  escape closes", style=pal.dim)
        return out

    def action_close(self) -> None:
        self.dismiss()
