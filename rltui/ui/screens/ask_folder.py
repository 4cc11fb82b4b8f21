"""Where the incident reports go: asked the first time ``i`` is pressed, remembered for the
session. A report lands somewhere the user chose and was told of, not silently in whatever
folder rltui happened to be started from."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class AskFolder(ModalScreen[str | None]):
    """Returns the folder typed (enter), or None (escape). Pre-filled with ``default``."""

    BINDINGS = [Binding("escape", "dismiss_none", "Cancel", id="rltui.ask-folder.cancel")]
    DEFAULT_CSS = """
    AskFolder { align: center middle; }
    AskFolder > Vertical { width: 90%; max-width: 100; height: auto;
                           border: round $accent; background: $surface; padding: 0 1; }
    AskFolder #ask-folder-hint { color: $text-muted; }
    """

    def __init__(self, question: str, default: str, hint: str = "") -> None:
        super().__init__()
        self.question = question
        self.default = default
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, id="ask-folder-question", markup=False)
            yield Input(value=self.default, id="ask-folder-input", compact=True)
            yield Static(self.hint or "enter: use it; escape: cancel", id="ask-folder-hint",
                         markup=False)

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        value = event.value.strip()
        self.dismiss(value or None)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
