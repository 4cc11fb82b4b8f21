"""The main screen: header, GPU and rank tables, symptoms, logs, footer.

Layout follows the terminal through breakpoint classes (see rltui.tcss): at 80x24 the panes
share the height and the log pane collapses; from 40 rows the log pane joins the symptoms.
Below 40 rows, with symptoms to read, the GPU and rank panes (and across nodes the nodes pane)
fold to one summary line each (``8 GPUs: 6 busy, 2 idle, 61-78 GiB``): the incident and its evidence take the room; tab reaches
a folded pane and ``z`` (or enter) shows its table full screen. Below ``MIN_SIZE`` the panes would be unreadable, so the screen shows one line saying so and
restores the layout when the terminal grows again.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer, Static

from rltui.logbook import LogBook
from rltui.ui.copying import CopyTarget, quoted
from rltui.ui.messages import View
from rltui.ui.widgets import GpuPane, HeaderBar, LogPane, NodesPane, RankPane, SymptomsPane
from rltui.ui.widgets.pane import TablePane

MIN_SIZE = (60, 16)
TALL = 40  # rows: the -tall breakpoint; under it the tables fold while there are symptoms


class MainScreen(Screen):
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (TALL, "-tall")]
    BINDINGS = [
        Binding("escape", "unzoom", "Unzoom", show=False, id="rltui.unzoom"),
    ]

    def __init__(self, logbook: LogBook | None = None, across_nodes: bool = False) -> None:
        super().__init__(id="main")
        self.header = HeaderBar(id="header")
        # Across nodes only: on one node it is not composed at all (nothing to focus or lay out).
        self.node_pane: NodesPane | None = NodesPane(id="nodes") if across_nodes else None
        self.gpus = GpuPane(id="gpus")
        self.ranks = RankPane(id="ranks")
        self.symptoms = SymptomsPane(id="symptoms")
        self.logs = LogPane(logbook, id="logs")
        self.too_small = Static("", id="too-small")
        self.view: View | None = None
        self._folded = False  # the tables folded at the last look (focus moves on a change)

    def compose(self) -> ComposeResult:
        yield self.header
        with Vertical(id="body"):
            if self.node_pane is not None:
                yield self.node_pane
            yield self.gpus
            yield self.ranks
            with Horizontal(id="lower"):
                yield self.symptoms
                yield self.logs
        yield self.too_small
        yield Footer(compact=True)

    def show(self, view: View) -> None:
        """Hand one evaluation to every pane (main thread only)."""
        self.view = view
        if self.node_pane is not None:
            self.node_pane.show(view)
        for pane in (self.header, self.gpus, self.ranks, self.symptoms, self.logs):
            pane.show(view)
        self._refold()

    def _refold(self) -> None:
        """Fold the tables where the terminal is short and there are symptoms to read; a
        zoomed pane unfolds. Focus follows: into the table shown, out of the one folded."""
        view = self.view
        symptoms = view is not None and bool(view.diagnosis.symptoms)
        self.set_class(symptoms, "-has-symptoms")
        fold = 0 < self.size.height < TALL and symptoms  # 0: not laid out yet
        newly = fold and not self._folded
        self._folded = fold
        tables = self.tables()
        for pane in tables:
            pane.fold(fold and self.maximized is not pane)
        focused = self.focused
        for pane in tables:
            if focused is not None and pane in focused.ancestors_with_self:
                if pane.folded and focused is not pane.summary:
                    pane.summary.focus()  # back from its zoomed table: its line
                elif not pane.folded and focused is pane.summary:
                    pane.table.focus()
        if newly and (focused is None or any(p in focused.ancestors_with_self
                                             for p in tables)):
            # the tables just folded: the incident comes first
            self.symptoms.options.focus()

    def tables(self) -> tuple[TablePane, ...]:
        """The panes that fold: the nodes (across nodes), the GPUs, the ranks."""
        return ((self.node_pane,) if self.node_pane is not None else ()) + (self.gpus, self.ranks)

    def copy_target(self) -> CopyTarget | None:
        """``y``: the selected symptom's evidence (title, id, ranks, evidence lines)."""
        found = self.symptoms.copy_text()
        if found is None:
            return None
        text, symptom = found
        return CopyTarget(text, f"the evidence of {quoted(symptom.title)}", "evidence")

    def on_resize(self, event: Resize) -> None:
        width, height = event.size
        self.call_after_refresh(self._refold)
        small = width < MIN_SIZE[0] or height < MIN_SIZE[1]
        self.set_class(small, "-too-small")
        if small:
            self.too_small.update(f"terminal too small: {width}x{height}, need at least "
                                  f"{MIN_SIZE[0]}x{MIN_SIZE[1]}")

    def action_unzoom(self) -> None:
        if self.maximized is not None:
            self.minimize()

    def reveal_logs(self) -> None:
        """Focus the log pane; on a short terminal, where it is hidden, zoom it."""
        if self.has_class("-short") and self.maximized is not self.logs:
            self.maximize(self.logs, container=False)
        if self.logs.log_view.display:  # hidden while there is no log at all
            self.logs.log_view.lines.focus()

    def watch_maximized(self, maximized: object) -> None:
        self._refold()
        # Zooming out of the log pane on a short terminal hides it again: focus must not stay
        # on a pane nobody can see (its keys would still answer).
        if maximized is None and self.has_class("-short"):
            focused = self.focused
            if focused is not None and self.logs in focused.ancestors_with_self:
                self.ranks.table.focus()
