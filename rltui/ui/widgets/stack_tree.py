"""The merged stack tree of the compare screen (STAT-style): one row per frame, with the ranks
that went through it.

``▾`` expanded, ``▸`` collapsed (with how many frames it hides), ``·`` a leaf. A chain of single
children stays at one indentation so a 40-frame stack fits 80 columns; a branch draws ``├╴`` /
``└╴`` guides. The node where the ranks part is marked ``◆ split``. The ``side`` column says
which side of the diff passes through the node (``L``, ``R``). The screen owns the collapsed
set and the keys; this pane draws.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rltui.diagnosis.stackview import Side, StackView, TreeRow, fit_frame
from rltui.ui.themes import Palette
from rltui.ui.widgets.cells import Cell
from rltui.ui.widgets.stack_table import StackPane, rest

MAX_GUIDE = 24  # cells of tree guides before they are cut from the left


class StackTreePane(StackPane):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Merged stacks"
        self._rows: dict[str, TreeRow] = {}
        self._left: Collection[int] = ()
        self._right: Collection[int] = ()
        self._palette: Palette | None = None

    def show(self, view: StackView, collapsed: Collection[int], left: Side, right: Side,
             palette: Palette) -> None:
        self._palette = palette
        rows = view.tree_rows(collapsed)
        self._rows = {str(r.key): r for r in rows}
        self._left = self._members(view, left)
        self._right = self._members(view, right)
        total = len(view.members)
        hidden = sum(1 for r in rows if r.collapsed)
        self.set_pane_title(f"Merged stacks ({total} stack{'s' if total != 1 else ''}, "
                   f"{len(view.classes)} path{'s' if len(view.classes) != 1 else ''})"
                   + (f" · {hidden} collapsed" if hidden else ""))
        self.set_rows(list(self._rows))

    @staticmethod
    def _members(view: StackView, side: Side) -> Collection[int]:
        if side.is_class:
            i = view.class_index(side.class_key)
            return frozenset(view.report.classes[i].members) if i is not None else ()
        return (side.member,) if side.member is not None else ()

    @property
    def selected(self) -> TreeRow | None:
        key = self.table.cursor_key
        return self._rows.get(key) if key is not None else None

    def row(self, key: int) -> TreeRow | None:
        return self._rows.get(str(key))

    def select(self, key: int) -> bool:
        try:
            self.table.show_row(self.table.get_row_index(str(key)))
        except KeyError:
            return False
        return True

    def columns_for(self, width: int) -> list[tuple[str, str, int, bool]]:
        ranks = min(24, max([5, *(len(r.ranks) for r in self._rows.values())]))
        return [("frame", "frame (function, file:line)", rest(width, ranks, 4, 2), False),
                ("ranks", "ranks", ranks, False), ("n", "n", 4, True), ("side", "", 2, False)]

    def cells(self, key: str) -> Sequence[Cell]:
        pal = self._palette
        assert pal is not None
        r = self._rows[key]
        guide = r.prefix if len(r.prefix) <= MAX_GUIDE else "…" + r.prefix[-(MAX_GUIDE - 1):]
        mark = "▸" if r.collapsed else ("▾" if r.has_children else "·")
        tail = f"  +{r.hidden} frame{'s' if r.hidden != 1 else ''}" if r.collapsed else ""
        style = ""
        if r.divergence:
            tail += "  ◆ split"
            style = f"bold {pal.warn}"
        elif r.frame.native:
            style = pal.dim
        lead = f"{guide}{mark} "
        text = fit_frame(r.frame, max(0, self.width_of("frame") - len(tail)), lead) + tail
        side = ("L" if any(m in r.members for m in self._left) else "") + \
               ("R" if any(m in r.members for m in self._right) else "")
        return (Cell(text, style), Cell(r.ranks), Cell(str(r.count)), Cell(side, "bold"))
