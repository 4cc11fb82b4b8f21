"""The main screen: header, GPU and rank tables, symptoms, logs, footer.

Layout follows the terminal through breakpoint classes (see rltui.tcss): at 80x24 the panes
share the height and the log pane collapses; from 40 rows the log pane joins the symptoms.
Below ``MIN_SIZE`` the panes would be unreadable, so the screen shows one line saying so and
restores the layout when the terminal grows again.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer, Static

from rltui.ui.messages import View
from rltui.ui.widgets import GpuPane, HeaderBar, LogPane, RankPane, SymptomsPane

MIN_SIZE = (60, 16)


class MainScreen(Screen):
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (40, "-tall")]
    BINDINGS = [
        Binding("escape", "unzoom", "Unzoom", show=False, id="rltui.unzoom"),
    ]

    def __init__(self) -> None:
        super().__init__(id="main")
        self.header = HeaderBar(id="header")
        self.gpus = GpuPane(id="gpus")
        self.ranks = RankPane(id="ranks")
        self.symptoms = SymptomsPane(id="symptoms")
        self.logs = LogPane(id="logs")
        self.too_small = Static("", id="too-small")
        self.view: View | None = None

    def compose(self) -> ComposeResult:
        yield self.header
        with Vertical(id="body"):
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
        for pane in (self.header, self.gpus, self.ranks, self.symptoms, self.logs):
            pane.show(view)

    def on_resize(self, event: Resize) -> None:
        width, height = event.size
        small = width < MIN_SIZE[0] or height < MIN_SIZE[1]
        self.set_class(small, "-too-small")
        if small:
            self.too_small.update(f"terminal too small: {width}x{height}, need at least "
                                  f"{MIN_SIZE[0]}x{MIN_SIZE[1]}")

    def action_unzoom(self) -> None:
        if self.maximized is not None:
            self.minimize()
