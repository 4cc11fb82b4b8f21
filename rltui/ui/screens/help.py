"""The help screen: every key, and the threshold behind every colour.

Keys are read from the app's bindings (so the page cannot drift from what the keys do) and
thresholds from the settings in force (so it shows the user's values, not the defaults).
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from rltui.diagnosis.thresholds import Thresholds
from rltui.ui.themes import Palette

# What each threshold does on screen: (unit, colour it drives, where).
THRESHOLD_HELP: dict[str, tuple[str, str, str]] = {
    "gpu_idle_pct": ("%", "idle", "GPU util at or below it is idle; the idle side of "
                     "gpu-idle-vs-busy"),
    "gpu_busy_pct": ("%", "ok", "GPU util at or above it is busy; the busy side of "
                     "gpu-idle-vs-busy"),
    "gpu_idle_sustain_s": ("s", "warn", "gpu-idle-vs-busy (warning) once idle and busy GPUs "
                           "coexist this long"),
    "rank_exit_grace_s": ("s", "bad", "rank-exited (critical) once a rank is gone this long "
                          "while others remain"),
    "gpu_mem_warn_pct": ("%", "warn", "GPU memory used at or above it"),
    "gpu_temp_warn_c": ("C", "warn", "GPU temperature at or above it"),
    "cpu_busy_pct": ("%", "warn", "a rank's CPU at or above it (spinning or busy)"),
    "stale_after_intervals": (" x poll interval", "warn", "a source in the header whose last "
                              "reading is older than this"),
}

# Colours not tied to a number.
FIXED_COLOURS: tuple[tuple[str, str], ...] = (
    ("bad", "a source that failed (header, pane message), a critical symptom, a zombie "
            "process, ECC errors above 0, a log line at error level"),
    ("warn", "a warning symptom, throttling, a partly read process (* after its pid), a log "
             "line at warning level, follow off in a log view"),
    ("dim", "departed ranks (exited, zombie, missing), N/A (the device or OS cannot tell), "
            "- (not known yet)"),
    ("spark", "sparklines: GPU util and memory over the last readings, seconds per step"),
    ("info", "informational symptoms and what could not be checked"),
)

# Keys that are not bindings of the app itself.
EXTRA_KEYS: tuple[tuple[str, str], ...] = (
    ("tab / shift+tab", "Move between panes"),
    ("up / down / pgup / pgdn", "Move in the focused table or list"),
    ("enter", "In Symptoms: zoom to read the highlighted symptom in full (on cuda-oom: "
              "open the OOM triage)"),
    ("escape", "Zoom out; close this help; close a full-screen log"),
    ("right / left", "In a log view: scroll sideways (a line that goes on ends in …)"),
    ("ctrl+p", "Command palette (every action, e.g. 'Theme: Light')"),
)


def key_rows(bindings: Iterable[Binding], display) -> list[tuple[str, str]]:
    rows = []
    for b in bindings:
        if not b.description:
            continue
        keys = " / ".join(display(Binding(k.strip(), b.action)) for k in b.key.split(","))
        rows.append((keys, b.description + (f": {b.tooltip}" if b.tooltip else "")))
    return rows


class HelpScreen(Screen):
    BINDINGS = [
        Binding("escape,question_mark,f1", "close", "Close help", id="rltui.help.close"),
    ]

    def __init__(self, bindings: list[Binding], thresholds: Thresholds, palette: Palette) -> None:
        super().__init__(id="help")
        self._key_bindings = bindings
        self._thresholds = thresholds
        self._palette = palette

    def compose(self) -> ComposeResult:
        self.content = self._content()
        with VerticalScroll(id="help-body"):
            yield Static(self.content, id="help-text")
        yield Footer(compact=True)

    def action_close(self) -> None:
        self.dismiss()

    def _content(self) -> Group:
        pal = self._palette
        keys = Table(title="Keys", title_justify="left", show_edge=False, expand=True,
                     title_style="bold")
        keys.add_column("key", style="bold", no_wrap=True)
        keys.add_column("does")
        for key, does in key_rows(self._key_bindings, self.app.get_key_display):
            keys.add_row(key, does)
        for key, does in EXTRA_KEYS:
            keys.add_row(key, does)

        th = Table(title="Thresholds behind the colours (settings: thresholds:)",
                   title_justify="left", show_edge=False, expand=True, title_style="bold")
        th.add_column("threshold", no_wrap=True)
        th.add_column("value", justify="right", no_wrap=True)
        th.add_column("colour", no_wrap=True)
        th.add_column("where")
        for name in Thresholds.names():
            unit, colour, where = THRESHOLD_HELP.get(name, ("", "", ""))
            value = getattr(self._thresholds, name)
            th.add_row(name, f"{value:g}{unit}", Text(colour, style=getattr(pal, colour, "")),
                       where)

        legend = Table(title="Other colours", title_justify="left", show_edge=False,
                       expand=True, title_style="bold")
        legend.add_column("colour", no_wrap=True)
        legend.add_column("means")
        for colour, means in FIXED_COLOURS:
            legend.add_row(Text(colour, style=getattr(pal, colour)), means)

        intro = Text.assemble(
            ("rltui help", "bold"),
            "  escape, ? or f1 closes. q, ctrl+c or ctrl+q quits (ctrl+c copies instead while "
            "text is selected). Severities are written as words (CRIT, WARN) as well as "
            "colours; t cycles the dark, light and colour-blind themes. Every page of the "
            "documentation: ",
            ("rltui docs", "bold"), " lists them, ", ("rltui docs screen", "bold"),
            " prints the one on this screen.\n",
        )
        return Group(intro, keys, Text(""), th, Text(""), legend)
