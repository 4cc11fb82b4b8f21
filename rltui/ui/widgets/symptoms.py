"""The symptoms pane: findings most severe first, and the highlighted one in full below.

The list gives one line per symptom (severity word and colour, title, ranks); the detail shows
evidence and next steps for the highlighted one. Enter zooms the pane to read it all. Severity
is written as a word as well as a colour, so no colour vision is needed to read it.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from rltui.diagnosis.copytext import evidence_text
from rltui.model import Symptom
from rltui.rankset import compact
from rltui.scrub import printable
from rltui.ui.messages import View
from rltui.ui.widgets.cells import set_title
from rltui.units import age

LABELS = {"critical": "CRIT", "warning": "WARN", "info": "INFO"}


def symptom_key(s: Symptom) -> str:
    return f"{s.id}:{compact(s.ranks)}"


OOM_SYMPTOMS = ("cuda-oom",)  # symptoms whose Enter opens the OOM triage


def by_incident(diagnosis) -> list[tuple[Symptom, str | None]]:
    """The symptoms in incident order: each root cause (titled with what happened, when it
    led to more) and under it its consequences (title None: drawn with their own, indented);
    symptoms no incident names keep their place at the end."""
    left = list(diagnosis.symptoms)
    rows: list[tuple[Symptom, str | None]] = []
    for incident in diagnosis.incidents:
        for n, wanted in enumerate(incident.symptoms):
            found = next((s for s in left if s.id == wanted and s.job == incident.job), None)
            if found is None:
                continue
            left.remove(found)
            rows.append((found, (incident.title if len(incident.symptoms) > 1
                                 else found.title) if n == 0 else None))
    rows += [(s, s.title) for s in left]
    return rows


class SymptomsPane(Vertical):
    ALLOW_MAXIMIZE = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Symptoms"
        self.options = OptionList(id="symptom-list")
        self.detail = Static("", id="symptom-detail")
        self._view: View | None = None
        self._list_key: tuple | None = None
        self._detail_key: tuple | None = None
        self._detail_shape: tuple | None = None  # what decides whether a layout pass is needed
        self._detail_rest: tuple = ()
        self._rows: list[tuple[Symptom, str | None]] = []

    def compose(self) -> ComposeResult:
        yield self.options
        with VerticalScroll(id="symptom-detail-scroll"):
            yield self.detail

    @property
    def symptoms(self) -> tuple[Symptom, ...]:
        return tuple(s for s, _ in self._rows) if self._view else ()

    @property
    def selected(self) -> Symptom | None:
        index = self.options.highlighted
        symptoms = self.symptoms
        if index is None or not symptoms or index >= len(symptoms):
            return symptoms[0] if symptoms else None
        return symptoms[index]

    def copy_text(self) -> tuple[str, Symptom] | None:
        """The selected symptom's evidence block as ``y`` copies it (rltui.diagnosis.copytext)."""
        s, view = self.selected, self._view
        if s is None or view is None:
            return None
        return evidence_text(s, view.snapshot.timestamp), s

    def show(self, view: View) -> None:
        palette_changed = self._view is None or self._view.palette is not view.palette
        previous = self.selected  # from the old list, to keep it highlighted in the new one
        self._view = view
        self._rows = by_incident(view.diagnosis)
        symptoms = view.diagnosis.symptoms
        set_title(self, f"Symptoms ({len(symptoms)})" if symptoms else "Symptoms")
        key = tuple((s.severity, title, s.ranks) for s, title in self._rows)
        if palette_changed or key != self._list_key:
            self._list_key = key
            self._rebuild_list(view, symptom_key(previous) if previous else None,
                               previous.job if previous else "")
        self._show_detail()

    def _rebuild_list(self, view: View, keep_key: str | None, keep_job: str = "") -> None:
        pal = view.palette
        options: list[Option] = []
        for s, title in self._rows:
            text = Text(no_wrap=True, overflow="ellipsis")
            if title is None:  # a consequence, under its root cause
                text.append(" └ ", style=pal.dim)
            text.append(f"{LABELS.get(s.severity, s.severity.upper())} ",
                        style=f"bold {pal.severity(s.severity)}")
            text.append(printable(title or s.title))
            options.append(Option(text, id=symptom_key(s) + f":{s.job}"))
        if not options:
            options.append(Option(Text("No symptoms: nothing rltui checks looks wrong.",
                                       style=pal.ok), disabled=True))
        self.options.set_options(options)
        keys = [symptom_key(s) + f":{s.job}" for s, _ in self._rows]
        keep_key = keep_key + f":{keep_job}" if keep_key is not None else None
        if keys:
            self.options.highlighted = keys.index(keep_key) if keep_key in keys else 0

    def _show_detail(self) -> None:
        view = self._view
        if view is None:
            return
        s = self.selected
        shown_age = age(view.snapshot.timestamp - s.since) if s and s.since else None
        key = (s, view.diagnosis.notes, shown_age, view.palette)
        if key == self._detail_key:
            return
        # The same symptom with the same number of lines (its age, or a "last heard N s ago"
        # in its evidence, ticking every second): redraw it without a layout pass of the whole
        # screen, which the default update asks for and which costs most of a refresh.
        shape = (s.id, len(s.evidence), len(s.next_steps)) if s else None
        same_shape = shape == self._detail_shape and key[1:2] + key[3:] == self._detail_rest
        self._detail_key, self._detail_shape = key, shape
        self._detail_rest = key[1:2] + key[3:]
        self.detail.update(self._detail_text(s, view), layout=not same_shape)

    def _detail_text(self, s: Symptom | None, view: View) -> Group:
        pal = view.palette
        parts: list[RenderableType] = []
        if s is not None:
            head = Text()
            head.append(f"{s.severity.upper()}  ", style=f"bold {pal.severity(s.severity)}")
            head.append(printable(s.title), style="bold")
            meta = [f"id {s.id}"]
            if s.ranks:
                meta.append(f"ranks {compact(s.ranks)}")
            if s.since is not None:
                meta.append(f"for {age(view.snapshot.timestamp - s.since)}")
            head.append("\n" + "  ".join(meta), style=pal.dim)
            parts.append(head)
            if s.evidence:
                parts.append(_items("Evidence", [("-", e) for e in s.evidence]))
            if s.next_steps:
                parts.append(_items("Next steps",
                                    [(f"{i}.", n) for i, n in enumerate(s.next_steps, 1)]))
        if view.diagnosis.notes:
            parts.append(_items("Not checked", [("-", n) for n in view.diagnosis.notes],
                                style=pal.info))
        return Group(*parts)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self._show_detail()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        # Enter: read the whole symptom; escape (or z) zooms back out. On an OOM, Enter opens
        # its triage (phase, config changes, patch) instead: what the symptom's next steps ask.
        event.stop()
        s = self.selected
        if s is not None and s.id in OOM_SYMPTOMS and self.app.check_action("oom_triage", ()):
            self.app.call_later(self.app.run_action, "oom_triage")
            return
        if self.screen.maximized is None:
            self.screen.maximize(self, container=False)


def _items(title: str, items: list[tuple[str, str]], style: str = "") -> Group:
    """A titled list whose wrapped lines stay indented under their own text."""
    grid = Table.grid(padding=(0, 0, 0, 1))
    grid.add_column(no_wrap=True, justify="right")
    grid.add_column(ratio=1)
    for mark, text in items:
        grid.add_row(Text(f" {mark}", style=style), Text(printable(text), style=style))
    return Group(Text(title, style=f"bold {style}".strip()), grid)
