"""The log pane: where the ranks' training logs will be tailed.

It is a real pane now (focusable, zoomable, in the layout) so the log feature only has to feed
it: ``show(view)`` is called after every evaluation like every other pane, and ``write_lines``
appends text. Until that feature lands it says so instead of staying blank.
"""

from __future__ import annotations

from typing import Iterable

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Log

from rltui.ui.messages import View

PLACEHOLDER = ("Logs arrive with the log feature:",
               "rltui will tail each rank's stdout/stderr here",
               "and mark step lines, tracebacks, OOM and NCCL messages.")


class LogPane(Vertical):
    ALLOW_MAXIMIZE = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Logs"
        self.log_view = Log(id="log-lines", max_lines=5000, auto_scroll=True)
        self._placeholder = True

    def compose(self) -> ComposeResult:
        yield self.log_view

    def on_mount(self) -> None:
        self.log_view.write_lines(PLACEHOLDER)

    def show(self, view: View) -> None:
        """Called after every evaluation; the log feature reads its events from ``view``."""

    def write_lines(self, lines: Iterable[str]) -> None:
        if self._placeholder:
            self._placeholder = False
            self.log_view.clear()
        self.log_view.write_lines(lines)
