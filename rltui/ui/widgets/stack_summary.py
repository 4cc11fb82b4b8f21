"""The compare screen's verdict: the pattern's explanation, then what has no stack (ranks
missing from the dump, processes py-spy could not read) and the problems met reading the dumps.

It scrolls (focus it with tab) and zooms with ``z`` when the terminal is too short for it all.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.events import Resize
from textual.widgets import Static

from rltui.diagnosis.stacks import StackReport
from rltui.diagnosis.stackview import members_text
from rltui.rankset import label
from rltui.ui.themes import Palette

MAX_PROBLEMS = 5
PADDING = 2  # the body's padding, one column each side


def summary_text(report: StackReport, palette: Palette, problems: Sequence[str] = ()) -> Text:
    out = Text()
    out.append(report.explanation or report.title)
    if report.hang and not report.confirmed:
        out.append("\nOne sample only: dump again to confirm that the stacks do not move.",
                   style=palette.info)
    if report.missing_ranks or report.missing_pids:
        out.append("\nMissing (exited, no stack): ", style=f"bold {palette.bad}")
        out.append(", ".join(([label(report.missing_ranks)] if report.missing_ranks else [])
                             + ([members_text(-1 - p for p in report.missing_pids)]
                                if report.missing_pids else [])), style=palette.bad)
    tree = report.tree
    unreadable = tree.unreadable if tree is not None else ()
    if unreadable:
        out.append("\nUnreadable (alive, no stack): ", style=f"bold {palette.warn}")
        out.append("; ".join(
            f"pid {d.pid}" + (f" (rank {d.rank})" if d.rank is not None else "")
            + f" {d.status}" + (f": {d.message}" if d.message else "")
            for d in unreadable[:8]) + (f"; … {len(unreadable) - 8} more"
                                        if len(unreadable) > 8 else ""),
            style=palette.warn)
    elif report.unreadable:
        out.append("\nUnreadable (alive, no stack): ", style=f"bold {palette.warn}")
        out.append(", ".join(f"pid {p}" for p in report.unreadable), style=palette.warn)
    if problems:
        out.append(f"\nReading the dumps ({len(problems)} problem"
                   f"{'s' if len(problems) != 1 else ''}): ", style=f"bold {palette.warn}")
        out.append("; ".join(problems[:MAX_PROBLEMS])
                   + (f"; … {len(problems) - MAX_PROBLEMS} more"
                      if len(problems) > MAX_PROBLEMS else ""), style=palette.warn)
    return out


class StackSummary(VerticalScroll):
    ALLOW_MAXIMIZE = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.body = Static("", id=f"{id}-body" if id else None)
        self._text = Text()

    def compose(self) -> ComposeResult:
        yield self.body

    def show(self, report: StackReport, palette: Palette, problems: Sequence[str] = ()) -> None:
        self.show_text(summary_text(report, palette, problems))

    def show_text(self, text: Text) -> None:
        self._text = text
        self.body.update(self._text)
        self._fit()

    def on_resize(self, event: Resize) -> None:
        self._fit()

    def _fit(self) -> None:
        # The height is the wrapped text's, measured here at the width it is drawn at (the
        # stylesheet's max-height still caps it): an automatic height measured once with a
        # scrollbar and drawn without one (or the reverse) leaves a blank or a hidden line.
        width = self.size.width - self.styles.scrollbar_size_vertical - PADDING
        if width <= 0:
            return
        lines = len(self._text.wrap(self.app.console, width))
        if self.styles.height is None or self.styles.height.value != lines:
            self.styles.height = max(1, lines)
