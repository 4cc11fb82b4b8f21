"""A titled, scrollable text: a check's result in full."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from rltui.scrub import outgoing_text, printable


class TextScreen(Screen):
    DEFAULT_CSS = """
    TextScreen .text-title { height: 1; background: $primary-background; padding: 0 1; }
    TextScreen .text-body { padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape,q", "close", "Close", id="rltui.text.close"),
    ]

    def __init__(self, title: str, text: str, id: str | None = None) -> None:
        super().__init__(id=id)
        # a report made of outside strings (answers, errors, log lines): shown as outputs are
        self.title_text = printable(title)
        self.text = outgoing_text(text)

    def compose(self) -> ComposeResult:
        yield Static(self.title_text, classes="text-title", markup=False)
        with VerticalScroll(classes="text-scroll"):
            yield Static(self.text, classes="text-body", markup=False)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one(".text-scroll").focus()

    def action_close(self) -> None:
        self.dismiss()
