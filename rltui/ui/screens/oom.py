"""The OOM screen: the triage of the latest CUDA OOM, as ``rltui oom`` prints it.

The phase and why, the error's numbers, the ranked suggestions with their effect and trade-off,
the patch to paste and the memory estimate. The text comes from ``report_text``, so the screen
and the headless command cannot disagree.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static


class OomScreen(Screen):
    DEFAULT_CSS = """
    OomScreen #oom-title { height: 1; background: $primary-background; padding: 0 1; }
    OomScreen #oom-body { padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape,q", "close", "Close", id="rltui.oom.close"),
    ]

    def __init__(self, title: str, text: str) -> None:
        super().__init__(id="oom")
        self.title_text = title
        self.text = text

    def compose(self) -> ComposeResult:
        yield Static(self.title_text, id="oom-title", markup=False)
        with VerticalScroll(id="oom-scroll"):
            yield Static(self.text, id="oom-body", markup=False)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#oom-scroll").focus()

    def action_close(self) -> None:
        self.dismiss()
