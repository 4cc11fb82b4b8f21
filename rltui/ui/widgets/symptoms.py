"""The symptoms pane: findings most severe first, and the highlighted one in full below.

The list gives one line per symptom (severity word and colour, title, ranks); the detail shows
evidence and next steps for the highlighted one. Enter zooms the pane to read it all. Severity
is written as a word as well as a colour, so no colour vision is needed to read it.

Evidence lines can name something the app opens (a log line, a stack class, a rank, a frame:
the symptom's ``evidence_links``). Enter on a symptom that has such lines (or tab) focuses the
detail: those lines are marked ``›``, up and down move a cursor over them, and enter posts
``OpenEvidence``; the app opens the target (rltui.ui.evidence).
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from rltui.diagnosis.copytext import evidence_text
from rltui.diagnosis.evidence import describe, link_of
from rltui.model import EvidenceLink, Symptom
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


class OpenEvidence(Message):
    """Open what an evidence line names (posted by the symptoms pane; the app opens it)."""

    def __init__(self, link: EvidenceLink, symptom: Symptom) -> None:
        super().__init__()
        self.link = link
        self.symptom = symptom


class EvidenceDetail(VerticalScroll, can_focus=True):
    """The detail's scroll box; focused, its keys move the evidence cursor and open a line."""

    BINDINGS = [
        Binding("up,k", "evidence(-1)", "Prev evidence", show=False,
                id="rltui.evidence.previous", tooltip="the evidence line before that opens"),
        Binding("down,j", "evidence(1)", "Next evidence", show=False,
                id="rltui.evidence.next", tooltip="the next evidence line that opens"),
        Binding("enter", "open_evidence", "Open", id="rltui.evidence.open",
                tooltip="open what the evidence line names: the log at that line, the stack "
                        "class, the rank's row, the source at the frame"),
        Binding("escape", "leave", "Back", show=False, id="rltui.evidence.back",
                tooltip="back to the symptom list"),
    ]

    def action_evidence(self, step: int) -> None:
        pane = self.parent
        if isinstance(pane, SymptomsPane):
            pane.move_evidence(step)

    def action_open_evidence(self) -> None:
        pane = self.parent
        if isinstance(pane, SymptomsPane):
            pane.open_evidence()

    def action_leave(self) -> None:
        pane = self.parent
        if isinstance(pane, SymptomsPane):
            pane.options.focus()

    def watch_has_focus(self, has_focus: bool) -> None:
        super().watch_has_focus(has_focus)
        if isinstance(self.parent, SymptomsPane):  # the cursor shows while focused
            self.parent.evidence_focus_changed()


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
        self.evidence_box = EvidenceDetail(id="symptom-detail-scroll")
        # The evidence cursor: a line index of the selected symptom's evidence (a linked one),
        # kept while the same symptom stays selected through updates.
        self.evidence_cursor: int | None = None
        self._cursor_of: str | None = None  # the symptom (key and job) the cursor belongs to

    def compose(self) -> ComposeResult:
        yield self.options
        with self.evidence_box:
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
        self._keep_cursor(s)
        shown_age = age(view.snapshot.timestamp - s.since) if s and s.since else None
        key = (s, view.diagnosis.notes, shown_age, view.palette, self.evidence_cursor,
               self.evidence_box.has_focus)
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

    # -- the evidence cursor ----------------------------------------------------------------------
    def _linked(self, s: Symptom | None) -> list[int]:
        """The evidence lines of ``s`` that open something, in order."""
        if s is None:
            return []
        return sorted({k.evidence for k in s.evidence_links if 0 <= k.evidence < len(s.evidence)})

    def _keep_cursor(self, s: Symptom | None) -> None:
        who = symptom_key(s) + f":{s.job}" if s is not None else None
        linked = self._linked(s)
        if who != self._cursor_of or self.evidence_cursor not in linked:
            self._cursor_of = who
            self.evidence_cursor = linked[0] if linked else None

    def move_evidence(self, step: int) -> None:
        """The cursor to the next (``step`` 1) or previous (-1) evidence line that opens."""
        linked = self._linked(self.selected)
        if not linked:
            self.evidence_box.scroll_relative(y=step, animate=False)  # nothing to open: scroll
            return
        at = linked.index(self.evidence_cursor) if self.evidence_cursor in linked else 0
        self.evidence_cursor = linked[max(0, min(len(linked) - 1, at + step))]
        self._show_detail()
        self.call_after_refresh(self._cursor_into_view)

    def _cursor_into_view(self) -> None:
        # The cursor's row in the detail: the head (two lines), the Evidence title, then one
        # row per line before it (wrapped lines make it an estimate, so a little margin).
        s, cursor = self.selected, self.evidence_cursor
        if s is None or cursor is None:
            return
        y = 3 + cursor
        top, height = int(self.evidence_box.scroll_y), self.evidence_box.size.height
        if not top <= y < top + height - 1:
            self.evidence_box.scroll_to(y=max(0, y - height // 2), animate=False)

    def open_evidence(self) -> None:
        s, cursor = self.selected, self.evidence_cursor
        link = link_of(s, cursor) if s is not None and cursor is not None else None
        if s is None or link is None:
            self.notify("This symptom's evidence names no log line, stack class, rank or frame "
                        "to open.", timeout=4)
            return
        self.post_message(OpenEvidence(link, s))

    def evidence_focus_changed(self) -> None:
        self._show_detail()

    def focus_evidence(self) -> bool:
        """Focus the evidence cursor when the selected symptom has a line to open."""
        if self._linked(self.selected):
            self.evidence_box.focus()
            return True
        return False

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
                parts.append(self._evidence(s, pal))
            if s.next_steps:
                parts.append(_items("Next steps",
                                    [(f"{i}.", n) for i, n in enumerate(s.next_steps, 1)]))
        if view.diagnosis.notes:
            parts.append(_items("Not checked", [("-", n) for n in view.diagnosis.notes],
                                style=pal.info))
        return Group(*parts)

    def _evidence(self, s: Symptom, pal) -> Group:
        """The evidence list. While the detail has focus, ``›`` marks a line that opens, ``▶``
        (and reverse) the cursor, and the title says what enter opens; unfocused, it reads as
        plain text."""
        focused = self.evidence_box.has_focus
        cursor = self.evidence_cursor
        grid = Table.grid(padding=(0, 0, 0, 1))
        grid.add_column(no_wrap=True, justify="right")
        grid.add_column(ratio=1)
        for i, e in enumerate(s.evidence):
            link = link_of(s, i) if focused else None
            here = link is not None and i == cursor
            mark = "▶" if here else "›" if link is not None else "-"
            grid.add_row(Text(f" {mark}", style=f"bold {pal.info}" if link else ""),
                         Text(printable(e), style="reverse" if here else ""))
        title = Text("Evidence", style="bold")
        link = link_of(s, cursor) if focused and cursor is not None else None
        if link is not None:
            title.append(f"  enter opens {describe(link)}, escape goes back", style=pal.dim)
        return Group(title, grid)

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
        self.focus_evidence()  # the lines that open something are one key away


def _items(title: str, items: list[tuple[str, str]], style: str = "") -> Group:
    """A titled list whose wrapped lines stay indented under their own text."""
    grid = Table.grid(padding=(0, 0, 0, 1))
    grid.add_column(no_wrap=True, justify="right")
    grid.add_column(ratio=1)
    for mark, text in items:
        grid.add_row(Text(f" {mark}", style=style), Text(printable(text), style=style))
    return Group(Text(title, style=f"bold {style}".strip()), grid)
