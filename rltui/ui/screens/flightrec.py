"""The Flight Recorder's groups, from the compare screen (``f``): per process group each rank's
sequence ids, the rank that is behind marked, and the findings.

From top to bottom: a title (how many groups and dumps, and the pattern the findings decide),
the findings in words (scrolls; ``z`` zooms), then one table row per (group, rank): the group's
name, the rank, its last completed and last enqueued collective (sequence ids), the oldest
collective it has pending (``all_reduce #4``, ``+N`` more behind it) and for how long, and a
mark: ``◀ behind`` for a rank that never entered the collective the others of its group wait
in, ``no dump`` for a rank the Flight Recorder says nothing about. ``escape``, ``q`` or ``f``
go back. The screen shows the reading it was opened with (the screen never reads a file).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from rltui.diagnosis.flightrec import BEHIND, CODE_BUGS, MISSING, SAME, FrAnalysis
from rltui.model import OK
from rltui.ui.themes import Palette
from rltui.ui.widgets.cells import Cell
from rltui.ui.widgets.stack_summary import StackSummary
from rltui.ui.widgets.stack_table import StackPane, pane_css, rest, short_pane_css
from rltui.ui.zoom import toggle_zoom
from rltui.units import age

BEHIND_MARK = "◀ behind"
NO_DUMP_MARK = "no dump"
MAX_PROBLEMS = 8
PENDING_MAX = 40


def findings_text(fa: FrAnalysis, palette: Palette) -> Text:
    """The findings (their kind in its colour, then the words), what could not be read, and
    whether the ranks record at all."""
    out = Text()
    colour = {BEHIND: palette.warn, MISSING: palette.warn, SAME: palette.info}
    for f in fa.findings:
        if out:
            out.append("\n")
        style = palette.bad if f.kind in CODE_BUGS else colour.get(f.kind, palette.info)
        out.append(f"{f.kind}: ", style=f"bold {style}")
        out.append(f.text)
    if not fa.findings:
        out.append("No finding: the dumps show no rank stuck in a collective "
                   "(nothing pending, or nothing that tells the ranks apart).",
                   style=palette.dim)
    if fa.problems:
        out.append(f"\nNot read ({len(fa.problems)}): ", style=f"bold {palette.warn}")
        out.append("; ".join(fa.problems[:MAX_PROBLEMS])
                   + (f"; … {len(fa.problems) - MAX_PROBLEMS} more"
                      if len(fa.problems) > MAX_PROBLEMS else ""), style=palette.warn)
    if not fa.groups and fa.enabled is False:
        out.append("\nThe ranks run without a Flight Recorder buffer (TORCH_FR_BUFFER_SIZE unset "
                   "or 0).", style=palette.warn)
    return out


class FrGroupsPane(StackPane):
    """One row per (group, rank)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Groups"
        self._rows: dict[str, tuple] = {}  # key -> (group name, first row of its group, member)
        self._palette: Palette | None = None

    def show(self, fa: FrAnalysis, palette: Palette) -> None:
        self._palette = palette
        rows: dict[str, tuple] = {}
        for i, v in enumerate(fa.groups):
            for j, m in enumerate(v.members):
                rows[f"{i}:{m.rank}"] = (v.name, j == 0, m)
        self._rows = rows
        self.set_pane_title(f"Groups ({len(fa.groups)}) · each rank's sequence ids")
        self.set_rows(list(rows))

    def row(self, key: str):
        """The ``RankInGroup`` of a row."""
        return self._rows[key][2]

    def columns_for(self, width: int) -> list[tuple[str, str, int, bool]]:
        group = min(28, max([5, *(len(n) for n, _, _ in self._rows.values())]))
        fixed = (group, 5, 9, 8, 5, len(BEHIND_MARK))
        return [("group", "group", group, False), ("rank", "rank", 5, True),
                ("completed", "completed", 9, True), ("enqueued", "enqueued", 8, True),
                ("pending", "pending (oldest)", min(PENDING_MAX, rest(width, *fixed)), False),
                ("age", "for", 5, True), ("mark", "", len(BEHIND_MARK), False)]

    def cells(self, key: str) -> Sequence[Cell]:
        pal = self._palette
        assert pal is not None
        name, first, m = self._rows[key]
        group = Cell(name, "bold" if first else pal.dim)
        rank = Cell(str(m.rank), "bold" if m.behind else "")
        if not m.has_dump:
            return (group, rank, Cell("-", pal.dim), Cell("-", pal.dim), Cell("", pal.dim),
                    Cell(""), Cell(NO_DUMP_MARK, pal.warn))

        def seq(n: int) -> Cell:
            return Cell(f"#{n}") if n >= 0 else Cell("-", pal.dim)

        p = m.pending
        if p is not None:
            more = f"  +{m.pending_count - 1}" if m.pending_count > 1 else ""
            pending = Cell(f"{p.op} #{p.seq}{more}", pal.warn)
        else:
            pending = Cell("nothing pending", pal.dim)
        waited = Cell(age(m.age_s) if m.age_s is not None else "", pal.dim)
        mark = Cell(BEHIND_MARK, f"bold {pal.bad}") if m.behind else Cell("")
        return (group, rank, seq(m.last_completed), seq(m.last_enqueued), pending, waited, mark)


class FlightRecorderScreen(Screen):
    BINDINGS = [
        Binding("escape,q,f", "close", "Close", id="rltui.flightrec.close",
                tooltip="zoom out, else back to the compare screen"),
        Binding("z", "zoom", "Zoom", id="rltui.flightrec.zoom",
                tooltip="fill the screen with the focused pane; again or escape to return"),
    ]
    DEFAULT_CSS = """
    FlightRecorderScreen #fr-title {
        height: 1;
        background: $panel;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    FlightRecorderScreen #fr-findings {
        height: auto;
        max-height: 12;
        scrollbar-size-vertical: 1;
        scrollbar-gutter: stable;
    }
    FlightRecorderScreen #fr-findings-body {
        padding: 0 1;
    }
    FlightRecorderScreen #fr-findings:focus {
        background: $primary 15%;
    }
    """ + pane_css("FlightRecorderScreen") + """
    """ + short_pane_css("FlightRecorderScreen") + """
    FlightRecorderScreen.-short #fr-findings {
        max-height: 8;
    }
    FlightRecorderScreen #fr-findings.-maximized,
    FlightRecorderScreen.-short #fr-findings.-maximized {
        max-height: 100%;
    }
    """
    VERTICAL_BREAKPOINTS = [(0, "-short"), (40, "-tall")]

    def __init__(self, fa: FrAnalysis, palette: Palette, *, pattern: str = "") -> None:
        super().__init__(id="flight-recorder")
        self.fa = fa
        self.palette = palette
        self.pattern = pattern
        self.title_bar = Static("", id="fr-title", markup=False)
        self.findings = StackSummary(id="fr-findings")
        self.groups = FrGroupsPane(id="fr-groups")

    def compose(self) -> ComposeResult:
        yield self.title_bar
        yield self.findings
        yield self.groups
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self._draw()
        self.groups.table.focus()

    def _draw(self) -> None:
        fa, pal = self.fa, self.palette
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append(" Flight Recorder ", style=f"bold reverse {pal.info}")
        dumps = sum(1 for d in fa.dumps if d.status == OK)
        title.append(f"  {len(fa.groups)} group{'s' if len(fa.groups) != 1 else ''}, "
                     f"{dumps} dump{'s' if dumps != 1 else ''}", style="bold")
        if self.pattern:
            title.append(f"  {self.pattern}", style=pal.dim)
        self.title_bar.update(title)
        self.findings.show_text(findings_text(fa, pal))
        self.groups.show(fa, pal)

    def action_close(self) -> None:
        if self.maximized is not None:
            self.minimize()
        else:
            self.dismiss()

    def action_zoom(self) -> None:
        toggle_zoom(self)
