"""The OOM screen: the triage of the latest OOM, laid out to be acted on.

At the top what the triage stands on: the framework, where the job's config came from, the
error's numbers, the phase and the model. Then the changes, most direct first, each with the
key as the framework names it, the value the job runs with and the one proposed, and what the
memory estimate says the failing phase holds before and after. Then the patch in a block,
which ``y`` copies; then why each change helps and what it costs, the estimate, the notes.

The words come from ``rltui.diagnosis.oom.present``, the same as ``rltui oom`` prints, so the
screen and the command cannot disagree; ``text`` keeps the command's whole text.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from rltui import units
from rltui.diagnosis.oom import present
from rltui.diagnosis.oom.report import report_text
from rltui.diagnosis.oom.types import OomReport
from rltui.frameworks import FRAMEWORKS, by_name
from rltui.scrub import outgoing_text, printable
from rltui.ui.copying import CopyTarget

VALUE_WIDTH = 28  # "unknown (config not read)", "not set (default 16384)" whole; longer fold
NO_ESTIMATE = "no estimate (give --model-config PATH: the model's config.json)"


def _t(text: str, style: str = "") -> Text:
    """Outside strings (paths, keys, reasons) shown as outputs are: scrubbed, never markup."""
    return Text(outgoing_text(text), style=style)


def no_patch(r: OomReport) -> str:
    """Why there is no patch: no config read (the framework unknown, or one rltui patches), a
    framework rltui writes no patch for, or a config read whose values the changes cannot
    start from (a key set to null: half of nothing is no value)."""
    fw = by_name(r.framework)
    patched = fw is not None and fw.oom is not None and bool(fw.oom.patch_style)
    if not r.config_sources and (fw is None or patched):
        return ("No patch: no change names a key of the job's config (give --job-config FILE "
                "for exact keys).")
    if not patched:  # a config read changes nothing to that
        forms = " and ".join(f"{f.label}'s" for f in FRAMEWORKS if f.oom and f.oom.patch_style)
        return (f"No patch: rltui writes patches in {forms} forms only; the changes above say "
                "what to set in this job's config.")
    return ("No patch: the config read does not give the values these changes start from "
            "(a key left null or unset, with no default rltui knows); the changes above say "
            "what to set.")


def title_of(r: OomReport) -> str:
    return (f"OOM triage: {r.phase.phase} ({r.phase.confidence} confidence), "
            f"{r.framework}")


def summary(r: OomReport) -> Table:
    n = r.numbers
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    # a long path (the config's) folds onto the next line rather than losing its file name
    grid.add_column(overflow="fold")
    grid.add_row("Framework", _t(r.framework))
    grid.add_row("Config", _t(present.config_text(r)))
    error = f"{n.kind} on GPU {n.gpu if n.gpu is not None else '?'}"
    if n.requested is not None:
        error += f": tried to allocate {units.gib(n.requested)}"
    if n.free is not None or n.capacity is not None:
        error += f"; {units.gib(n.free)} free of {units.gib(n.capacity)}"
    short = present.shortfall(r)
    if short is not None:
        error += f"; short by {units.gib(short)}"
    grid.add_row("Error", _t(error))
    phase = f"{r.phase.phase}, {r.phase.confidence} confidence"
    phase += f" ({r.phase.role})" if r.phase.role else ""
    grid.add_row("Phase", _t(f"{phase}: {r.phase.reason or 'nothing decided it'}"))
    for pid, used in n.others:
        grid.add_row("", _t(f"process {pid} holds {units.gib(used)}"))
    if r.estimate:
        total = r.estimate.get("total")
        grid.add_row("Estimate", _t(f"{units.gib(total)} per GPU as configured"
                                    if isinstance(total, int) else "see below"))
    elif not present.has_estimate(r):
        grid.add_row("Estimate", _t(NO_ESTIMATE, "dim"))
    return grid


def changes(r: OomReport) -> Table | Text:
    if not r.suggestions:
        return _t("No suggestion: nothing in the config can be changed for this phase.")
    read = bool(r.config_sources)
    keyed = any(present.is_key(s) for s in r.suggestions)
    # The values as wide as they are (up to VALUE_WIDTH), the key takes the rest: whole where the
    # screen has room, folded on a narrow one (the patch below holds it whole, for pasting).
    table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold",
                  expand=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column(f"Key (as {r.framework} names it)" if keyed and r.framework != "unknown"
                     else "Change", ratio=1, overflow="fold")
    table.add_column("Current", min_width=len("Current"), max_width=VALUE_WIDTH,
                     overflow="fold")
    table.add_column("Proposed", min_width=len("Proposed"), max_width=VALUE_WIDTH,
                     overflow="fold")
    table.add_column("Estimate", no_wrap=True)
    for i, s in enumerate(r.suggestions, 1):
        table.add_row(str(i), _t(present.key_text(s)),
                      _t(present.current_text(s, read), "dim" if s.current_is_default else ""),
                      _t(present.proposed_text(s), "bold"),
                      _t(present.estimate_text(s) or "-"))
        for k, v in s.also:
            table.add_row("", _t(f"  with {k}"), "", _t(present.value_text(v), "bold"), "")
    return table


def details(r: OomReport) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column()
    short = present.shortfall(r)
    for i, s in enumerate(r.suggestions, 1):
        text = Text()
        if s.effect_bytes:
            text.append_text(_t(f"saves {present.saves_text(s)}"
                                + (f", enough for the {units.gib(short)} lacking"
                                   if short and s.effect_bytes >= short else "") + "; "))
        text.append_text(_t(f"why: {s.why}\n"))
        text.append_text(_t(f"trade-off: {s.tradeoff}", "dim"))
        grid.add_row(Text(f"{i}.", style="bold"), text)
    rest = _rest(r)
    if rest:
        grid.add_row("", rest)
    return grid


def _rest(r: OomReport) -> Text:
    out = Text()
    if r.estimate:
        out.append("\nMemory estimate per GPU, as configured:\n", style="bold")
        for name, value in (r.estimate.get("components") or {}).items():
            out.append_text(_t(f"  {name:16} {units.gib(value)}\n"))
    if r.notes:
        out.append("\n")
        for note in r.notes:
            out.append_text(_t(f"note: {note}\n", "dim"))
    out.rstrip()
    return out.lstrip() if not r.suggestions else out


class OomScreen(Screen):
    DEFAULT_CSS = """
    OomScreen .text-title { height: 1; background: $primary-background; padding: 0 1; }
    OomScreen .oom-summary, OomScreen .oom-details { padding: 0 1; }
    OomScreen .oom-heading { padding: 1 1 0 1; text-style: bold; }
    OomScreen .oom-changes { padding: 0 1; }
    OomScreen .oom-patch { border: round $accent; border-title-color: $accent; padding: 0 1;
                           margin: 1 1 0 1; height: auto; }
    OomScreen .oom-details { margin-top: 1; }
    """
    BINDINGS = [
        Binding("escape,q", "close", "Close", id="rltui.oom.close"),
        # the app's y, shown here: on this screen it copies the patch
        Binding("y", "app.copy", "Copy", id="rltui.oom.copy",
                tooltip="copy the patch (the whole triage where there is none)"),
    ]

    def __init__(self, report: OomReport) -> None:
        super().__init__(id="oom")
        self.report = report
        self.title_text = printable(title_of(report))
        self.text = outgoing_text(report_text(report))  # what `rltui oom` prints
        self.patch = outgoing_text(report.patch)

    def compose(self) -> ComposeResult:
        r = self.report
        yield Static(self.title_text, classes="text-title", markup=False)
        with VerticalScroll(classes="text-scroll"):
            yield Static(summary(r), classes="oom-summary")
            yield Static("Changes, most direct first (estimate: what the failing phase holds "
                         "on one GPU, before -> after)", classes="oom-heading", markup=False)
            yield Static(changes(r), classes="oom-changes")
            patch = Static(self.patch.rstrip("\n") or no_patch(r), classes="oom-patch",
                           markup=False)
            patch.border_title = "Patch (y copies it)" if self.patch else "Patch"
            yield patch
            yield Static(details(r), classes="oom-details")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one(".text-scroll").focus()

    def copy_target(self) -> CopyTarget | None:
        """``y``: the patch, ready to paste; with no patch the triage's whole text."""
        if self.patch:
            return CopyTarget(self.patch, "the OOM patch", "patch")
        return CopyTarget(self.text, "the OOM triage", "oom")

    def action_close(self) -> None:
        self.dismiss()
