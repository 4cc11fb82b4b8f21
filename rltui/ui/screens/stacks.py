"""The stack compare screen: how the ranks' py-spy stacks differ, all by keyboard.

From top to bottom: the verdict (pattern and title), its explanation with the ranks that have
no stack, the class list, then the merged tree and the side-by-side diff of two stacks (beside
each other from 120 columns, one above the other below that) with the source lines of the
diff's cursor row. With the Flight Recorder read, the title says when it decided the pattern,
the class list and the diff's headers name each rank's pending collective, and ``f`` opens its
groups (``FlightRecorderScreen``). Opened from the monitor (``s``) or by ``rltui stacks DIR``;
``show_report``
takes a newer report while it is open and keeps what the user was looking at: the sides of the
diff, the collapsed nodes and each cursor, as long as they still exist.

``reveal`` shows what a symptom's evidence line names (enter in the symptoms pane): a class
(the class list's cursor on it, the tree opened down to it) or a frame (the diff's cursor on
it, a rank that has it brought to the left side when neither side has it, so the source pane
shows its lines).

The screen never reads a file: source lines come from the ``source_lines`` callable it is
given (none given: no source pane).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer, Static

from rltui.diagnosis.copytext import stack_class_text
from rltui.diagnosis.evidence import FRAME, STACK_CLASS
from rltui.diagnosis.stacks import HANG, PROGRESSING, WORKING, StackReport
from rltui.diagnosis.stackview import Side, StackView, member_text, pattern_name, pattern_source
from rltui.model import EvidenceLink, Frame
from rltui.ui.copying import CopyTarget
from rltui.ui.screens.flightrec import FlightRecorderScreen
from rltui.ui.themes import Palette, palette_of
from rltui.ui.widgets.stack_classes import StackClassPane
from rltui.ui.widgets.stack_diff import StackDiffPane
from rltui.ui.widgets.stack_source import SourceLines, StackSourcePane
from rltui.ui.widgets.stack_summary import StackSummary
from rltui.ui.widgets.stack_table import StackTable, pane_css, short_pane_css
from rltui.ui.widgets.stack_tree import StackTreePane
from rltui.ui.zoom import toggle_zoom

RIGHT_RANK = Binding.Group("Right rank")
LEFT_RANK = Binding.Group("Left rank")  # in the help; the footer has no room for it at 80
SHORT = 40  # rows: below it the panes lose their side borders and the source shows 3 lines


class StacksScreen(Screen):
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (SHORT, "-tall")]
    BINDINGS = [
        Binding("escape,q", "close", "Close", id="rltui.stacks.close",
                tooltip="zoom out, else close the compare screen"),
        Binding("f", "flight_recorder", "Groups", id="rltui.stacks.flight_recorder",
                tooltip="the Flight Recorder's groups: each rank's sequence ids, the ranks "
                        "behind, the findings (when its dumps were read)"),
        Binding("left_square_bracket", "step_right(-1)", "Prev right rank", group=RIGHT_RANK,
                id="rltui.stacks.right_prev",
                tooltip="the rank before on the right-hand side of the diff"),
        Binding("right_square_bracket", "step_right(1)", "Next right rank", group=RIGHT_RANK,
                id="rltui.stacks.right_next",
                tooltip="the next rank on the right-hand side of the diff"),
        Binding("left_curly_bracket", "step_left(-1)", "Prev left rank", group=LEFT_RANK,
                show=False,
                id="rltui.stacks.left_prev",
                tooltip="the rank before on the left-hand side of the diff"),
        Binding("right_curly_bracket", "step_left(1)", "Next left rank", group=LEFT_RANK,
                show=False,
                id="rltui.stacks.left_next",
                tooltip="the next rank on the left-hand side of the diff"),
        Binding("g", "divergence", "Divergence", id="rltui.stacks.divergence",
                tooltip="cursor to the first frame where the two sides differ, and the tree "
                        "to the node where the ranks part"),
        Binding("a", "pick('left')", "Class left", id="rltui.stacks.class_left",
                tooltip="the highlighted class on the left-hand side of the diff"),
        Binding("b", "pick('right')", "Class right", id="rltui.stacks.class_right",
                tooltip="the highlighted class on the right-hand side of the diff"),
        Binding("x", "swap", "Swap", show=False, id="rltui.stacks.swap",
                tooltip="swap the two sides of the diff"),
        Binding("enter,space", "toggle", "Expand/collapse", show=False,
                id="rltui.stacks.toggle",
                tooltip="tree: expand or collapse the node; classes: show the class in the tree"),
        Binding("right,l", "expand", "Expand", show=False, id="rltui.stacks.expand",
                tooltip="tree: expand the node, or go to its first child"),
        Binding("left,h", "collapse", "Collapse", show=False, id="rltui.stacks.collapse",
                tooltip="tree: collapse the node, or go to its parent"),
        Binding("z", "zoom", "Zoom", id="rltui.stacks.zoom",
                tooltip="fill the screen with the focused pane; again or escape to return"),
    ]
    DEFAULT_CSS = """
    StacksScreen #stacks-title {
        height: 1;
        background: $panel;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    StacksScreen #stacks-summary-body {
        padding: 0 1;
    }
    StacksScreen #stacks-summary {
        height: auto;
        max-height: 10;
        scrollbar-size-vertical: 1;
        /* The scrollbar's column is always kept, so the text wraps the same with or
           without a bar (the height is measured at that width, see StackSummary). */
        scrollbar-gutter: stable;
    }
    StacksScreen #stacks-summary:focus {
        background: $primary 15%;
    }
    """ + pane_css("StacksScreen") + """
    StacksScreen #stack-classes {
        height: auto;
        max-height: 30%;
    }
    StacksScreen #stack-classes > StackTable {
        height: auto;
        max-height: 100%;
    }
    StacksScreen #stacks-main {
        height: 1fr;
        layout: horizontal;
    }
    StacksScreen #stack-tree {
        width: 2fr;
    }
    StacksScreen #stacks-compare {
        width: 3fr;
    }
    StacksScreen #stack-source {
        height: auto;
        max-height: 9;
    }
    StacksScreen #stack-source-body {
        padding: 0 1;
    }
    StacksScreen.-narrow #stacks-main {
        layout: vertical;
    }
    StacksScreen.-narrow #stack-tree, StacksScreen.-narrow #stacks-compare {
        width: 100%;
        height: 2fr;
    }
    StacksScreen.-narrow #stacks-compare {
        height: 3fr;
    }
    """ + short_pane_css("StacksScreen") + """
    StacksScreen.-short #stacks-summary {
        max-height: 3;
    }
    StacksScreen.-short #stack-classes {
        max-height: 6;
    }
    StacksScreen.-short #stack-source {
        max-height: 4;
    }
    /* Zoomed (z): the pane's caps above no longer apply. */
    StacksScreen #stacks-summary.-maximized,
    StacksScreen.-short #stacks-summary.-maximized,
    StacksScreen #stack-classes.-maximized,
    StacksScreen.-short #stack-classes.-maximized,
    StacksScreen #stack-source.-maximized,
    StacksScreen.-short #stack-source.-maximized {
        max-height: 100%;
    }
    """

    def __init__(self, report: StackReport, *, source_lines: SourceLines | None = None,
                 subtitle: str = "", problems: Sequence[str] = ()) -> None:
        super().__init__(id="stacks")
        self.report = report
        self.view = StackView(report)
        self.source_lines = source_lines
        self.subtitle = subtitle
        self.problems = tuple(problems)
        self.left, self.right = self.view.default_sides()
        self.collapsed: set[int] = set()
        self.title_bar = Static("", id="stacks-title", markup=False)
        self.summary_pane = StackSummary(id="stacks-summary")
        self.class_pane = StackClassPane(id="stack-classes")
        self.tree_pane = StackTreePane(id="stack-tree")
        self.diff_pane = StackDiffPane(id="stack-diff")
        self.source_pane = (StackSourcePane(source_lines, id="stack-source") if source_lines
                            else None)
        self._ready = False
        self._reveal: EvidenceLink | None = None  # asked for before the screen was drawn

    def compose(self) -> ComposeResult:
        yield self.title_bar
        yield self.summary_pane
        yield self.class_pane
        with Container(id="stacks-main"):
            yield self.tree_pane
            with Vertical(id="stacks-compare"):
                yield self.diff_pane
                if self.source_pane is not None:
                    yield self.source_pane
        # The footer's room goes to this screen's keys (the palette stays on ctrl+p).
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.watch(self.app, "theme", self._theme_changed, init=False)
        self._draw(first=True)
        self.class_pane.table.focus()
        self._ready = True
        if self._reveal is not None:
            link, self._reveal = self._reveal, None
            self.reveal(link)

    # -- an evidence line's target ----------------------------------------------------------------
    def reveal(self, link: EvidenceLink) -> None:
        """Show the class or frame a symptom's evidence line names (see the module's text)."""
        if not self._ready:
            self._reveal = link
        elif link.kind == STACK_CLASS:
            self._reveal_class(link)
        elif link.kind == FRAME:
            self._reveal_frame(link)

    def _reveal_class(self, link: EvidenceLink) -> None:
        # By its members first: a newer report may number the classes otherwise.
        classes = self.view.classes
        index = next((c.index for c in classes if set(c.members) == set(link.ranks)), None)
        if index is None and link.stack_class is not None and link.stack_class < len(classes):
            index = link.stack_class
        if index is None:
            self.notify("That stack class is no longer in the stacks: they changed since.",
                        severity="warning")
            return
        self.class_pane.table.move_to_key(classes[index].key)
        path = self.view.class_path(index)
        self.collapsed.difference_update(path[:-1])
        self._draw_tree()
        if path:
            self.tree_pane.select(path[-1])
        self.class_pane.table.focus()

    def _reveal_frame(self, link: EvidenceLink) -> None:
        def here(f: Frame | None) -> bool:
            return f is not None and f.filename == link.path and f.line == link.line

        def row_of() -> int | None:
            rows = self.diff_pane.diff.rows
            return next((i for i, r in enumerate(rows) if here(r.left) or here(r.right)), None)

        row = row_of()
        if row is None:  # neither side has it: the first rank whose stack does, on the left
            member = next((m for m in self.view.members
                           if any(here(f) for f in self.view.frames_of_member(m))), None)
            if member is not None:
                self.left = Side(member=member)
                self._sides_changed()
                row = row_of()
        if row is None:
            self.notify(f"No stack has {link.name or 'the frame'} at "
                        f"{link.path.rsplit('/', 1)[-1]}:{link.line} any more.",
                        severity="warning")
            return
        self.diff_pane.table.show_row(row)
        self._draw_source()
        self.diff_pane.table.focus()

    # -- what the owner calls ---------------------------------------------------------------------
    def show_report(self, report: StackReport) -> None:
        """A newer report (live updates): the sides, collapsed nodes and cursors stay where
        they were when they still exist."""
        self.report = report
        self.view = StackView(report)
        left, right = self.view.default_sides()
        if not self.view.valid(self.left):
            self.left = left
        if not self.view.valid(self.right):
            self.right = right
        if self.is_mounted:
            self._draw()

    @property
    def palette(self) -> Palette:
        """The app's palette (the monitor and the stacks app keep one), else the theme's."""
        pal = getattr(self.app, "palette", None)
        if isinstance(pal, Palette):
            return pal
        return palette_of(self.app.current_theme)

    # -- drawing ----------------------------------------------------------------------------------
    def _draw(self, first: bool = False) -> None:
        pal = self.palette
        self.title_bar.update(self._title(pal))
        self.summary_pane.show(self.report, pal, self.problems)
        self.class_pane.show(self.view, self.left, self.right, pal)
        self._draw_tree()
        if first and self.view.divergence_key is not None:
            self.tree_pane.select(self.view.divergence_key)
        self._draw_diff(to_divergence=first)

    def _title(self, pal: Palette) -> Text:
        report = self.report
        colour = (pal.bad if report.confirmed else pal.warn) if report.verdict == HANG else \
            pal.ok if report.verdict in (PROGRESSING, WORKING) else pal.info
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(f" {pattern_name(report)} ", style=f"bold reverse {colour}")
        source = pattern_source(report)
        title = report.title
        if source:
            out.append(f" ({source})", style=f"bold {colour}")
            title = title.removesuffix(" (Flight Recorder)")
        out.append(f" {title}", style="bold")
        samples = f"{report.samples} sample{'s' if report.samples != 1 else ''}"
        out.append(f"  {samples}", style=pal.dim)
        if self.subtitle:
            out.append(f"  {self.subtitle}", style=pal.dim)
        return out

    def _draw_tree(self) -> None:
        self.tree_pane.show(self.view, self.collapsed, self.left, self.right, self.palette)

    def _draw_diff(self, to_divergence: bool = False) -> None:
        changed = self.diff_pane.show(self.view, self.left, self.right, self.palette)
        if (to_divergence or changed) and not self.diff_pane.to_divergence():
            # The same stack on both sides: where they wait (the deepest frame) matters.
            self.diff_pane.table.cursor_row = max(0, self.diff_pane.table.row_count - 1)
        self._draw_source()

    def _draw_source(self) -> None:
        if self.source_pane is None:
            return
        row = self.diff_pane.selected
        self.source_pane.show(row.left if row else None, row.right if row else None,
                              self.palette, self._side_name(self.left),
                              self._side_name(self.right))

    def _side_name(self, side: Side) -> str:
        if side.is_class:
            i = self.view.class_index(side.class_key)
            return self.view.classes[i].label if i is not None else "?"
        return member_text(side.member) if side.member is not None else "?"

    def _sides_changed(self) -> None:
        self.class_pane.show(self.view, self.left, self.right, self.palette)
        self._draw_tree()
        self._draw_diff(to_divergence=True)

    def _theme_changed(self, _theme: str) -> None:
        self._draw()

    def on_stack_table_cursor_moved(self, message: StackTable.CursorMoved) -> None:
        if message.table is self.diff_pane.table:
            self._draw_source()

    def on_resize(self, event: Resize) -> None:
        if self.source_pane is not None:
            context = 1 if event.size.height < SHORT else 2
            if context != self.source_pane.context:
                self.source_pane.context = context
                self.source_pane.redraw()

    # -- actions ----------------------------------------------------------------------------------
    def _focused_in(self, pane) -> bool:
        focused = self.focused
        return focused is not None and pane in focused.ancestors_with_self

    def action_close(self) -> None:
        if self.maximized is not None:
            self.minimize()
        elif len(self.app.screen_stack) > 1:
            self.dismiss()
        else:
            self.app.exit()

    def action_step_right(self, delta: int) -> None:
        self.right = self.view.step(self.right, delta)
        self._sides_changed()

    def action_step_left(self, delta: int) -> None:
        self.left = self.view.step(self.left, delta)
        self._sides_changed()

    def action_swap(self) -> None:
        self.left, self.right = self.right, self.left
        self._sides_changed()

    def action_pick(self, which: str) -> None:
        row = self.class_pane.selected
        if row is None:
            self.notify("That row has no stack to compare: pick a class (#1, #2 ...).",
                        severity="warning")
            return
        side = self.view.class_side(row.index)
        if which == "left":
            self.left = side
        else:
            self.right = side
        self._sides_changed()

    def action_divergence(self) -> None:
        path = self.view.divergence_path
        if path:
            self.collapsed.difference_update(path)
            self._draw_tree()
            self.tree_pane.select(path[-1])
        if not self.diff_pane.to_divergence():
            what = ("the two sides have the same stack" if self.diff_pane.diff.rows
                    else "no stack to compare")
            self.notify(f"No divergence: {what}." + ("" if path else
                                                     " All ranks share one path."))

    def action_toggle(self) -> None:
        if self._focused_in(self.tree_pane):
            row = self.tree_pane.selected
            if row is None or not row.has_children:
                return
            if row.collapsed:
                self.collapsed.discard(row.key)
            else:
                self.collapsed.add(row.key)
            self._draw_tree()
        elif self._focused_in(self.class_pane):
            row = self.class_pane.selected
            if row is None:
                return
            path = self.view.class_path(row.index)
            self.collapsed.difference_update(path[:-1])
            self._draw_tree()
            if path:
                self.tree_pane.select(path[-1])
            self.tree_pane.table.focus()
        else:
            raise SkipAction()  # space keeps its meaning elsewhere (pause in the monitor)

    def action_expand(self) -> None:
        if not self._focused_in(self.tree_pane):
            raise SkipAction()
        row = self.tree_pane.selected
        if row is None or not row.has_children:
            return
        if row.collapsed:
            self.collapsed.discard(row.key)
            self._draw_tree()
        else:
            self.tree_pane.table.action_cursor(1)  # the first child is the next row

    def action_collapse(self) -> None:
        if not self._focused_in(self.tree_pane):
            raise SkipAction()
        row = self.tree_pane.selected
        if row is None:
            return
        if row.has_children and not row.collapsed:
            self.collapsed.add(row.key)
            self._draw_tree()
        elif self.tree_pane.row(row.parent) is not None:
            self.tree_pane.select(row.parent)

    def action_zoom(self) -> None:
        toggle_zoom(self)

    def copy_target(self) -> CopyTarget | None:
        """``y``: the class under the class list's cursor, as py-spy prints a thread."""
        row = self.class_pane.selected
        if row is None:
            return None
        return CopyTarget(stack_class_text(self.report, row.index),
                          f"stack class {row.label} ({row.ranks})", "stack")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "flight_recorder":  # in the footer only when the dumps were read
            return self.report.flight_recorder is not None
        return True

    def action_flight_recorder(self) -> None:
        fa = self.report.flight_recorder
        if fa is None:
            return
        source = pattern_source(self.report)
        pattern = f"{pattern_name(self.report)}" + (f" ({source})" if source else "")
        self.app.push_screen(FlightRecorderScreen(fa, self.palette, pattern=pattern))
