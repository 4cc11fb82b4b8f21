"""The class list of the compare screen: one row per equivalence class of stacks.

Each row: the class label (``#1`` is the largest), its compact rank set and size, whether it
is stuck or moving across samples, which side of the diff shows it (``L``, ``R``), and where
it waits (the collective and its caller, else the deepest frame). Ranks with no stack follow,
dimmed: the ones missing from the dump (exited) and the processes py-spy could not read.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence

from rltui.diagnosis.stackview import ClassRow, Side, StackView, fit_frame, members_text
from rltui.rankset import compact
from rltui.ui.themes import Palette
from rltui.ui.widgets.cells import Cell
from rltui.ui.widgets.stack_table import StackPane, rest

MISSING = "missing"
UNREADABLE = "unreadable:"  # + status


@dataclass(frozen=True, slots=True)
class NoStackRow:
    """Ranks or processes that have no stack to compare."""

    label: str
    ranks: str
    count: int
    state: str
    where: str


class StackClassPane(StackPane):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Classes"
        self._rows: dict[str, ClassRow | NoStackRow] = {}
        self._sides: dict[int, str] = {}
        self._palette: Palette | None = None

    def show(self, view: StackView, left: Side, right: Side, palette: Palette) -> None:
        self._palette = palette
        rows: dict[str, ClassRow | NoStackRow] = {c.key: c for c in view.classes}
        report = view.report
        if report.missing_ranks:
            rows[MISSING] = NoStackRow("-", compact(report.missing_ranks),
                                       len(report.missing_ranks), "exited",
                                       "no stack: missing from the dump (exited?)")
        tree = view.tree
        unreadable = tree.unreadable if tree is not None else ()
        by_status: dict[str, list] = {}
        for d in unreadable:
            by_status.setdefault(d.status, []).append(d)
        for status, dumps in by_status.items():
            members = [d.rank if d.rank is not None else -1 - d.pid for d in dumps]
            message = next((d.message for d in dumps if d.message), "")
            rows[UNREADABLE + status] = NoStackRow(
                "?", members_text(members), len(dumps), status,
                f"no stack: py-spy {status}" + (f" ({message})" if message else ""))
        if tree is None and report.unreadable:  # no tree to say why: the pids alone
            rows[UNREADABLE] = NoStackRow("?", members_text(-1 - p for p in report.unreadable),
                                          len(report.unreadable), "unread", "no stack")
        self._rows = rows
        self._sides = {}
        for mark, side in (("L", left), ("R", right)):
            if side.is_class:
                i = view.class_index(side.class_key)
            else:
                i = view.class_of.get(side.member) if side.member is not None else None
            if i is not None:
                self._sides[i] = self._sides.get(i, "") + mark
        n = len(view.classes)
        self.set_pane_title(f"Classes ({n})" + (f" · no stack: {len(rows) - n} group(s)"
                                       if len(rows) > n else ""))
        self.set_rows(list(rows))

    @property
    def selected(self) -> ClassRow | None:
        key = self.table.cursor_key
        row = self._rows.get(key) if key is not None else None
        return row if isinstance(row, ClassRow) else None

    def select(self, index: int) -> None:
        for key, row in self._rows.items():
            if isinstance(row, ClassRow) and row.index == index:
                self.table.move_to_key(key)
                return

    def columns_for(self, width: int) -> list[tuple[str, str, int, bool]]:
        ranks = max([5, *(len(r.ranks) for r in self._rows.values())])
        ranks = min(ranks, 24)
        fixed = (3, ranks, 4, 7, 2)
        return [("class", "#", 3, False), ("ranks", "ranks", ranks, False),
                ("n", "n", 4, True), ("state", "state", 7, False), ("side", "", 2, False),
                ("where", "where it waits (collective ← caller) or deepest frame",
                 rest(width, *fixed), False)]

    def cells(self, key: str) -> Sequence[Cell]:
        pal = self._palette
        assert pal is not None
        row = self._rows[key]
        if isinstance(row, NoStackRow):
            return (Cell(row.label, pal.dim), Cell(row.ranks, pal.bad), Cell(str(row.count),
                                                                              pal.dim),
                    Cell(row.state, pal.bad), Cell(""), Cell(row.where, pal.dim))
        state_style = {"stuck": pal.bad, "moving": pal.ok}.get(row.state, pal.dim)
        where_style = pal.warn if row.teardown else ""
        return (Cell(row.label, "bold"), Cell(row.ranks), Cell(str(row.count)),
                Cell(row.state, state_style), Cell(self._sides.get(row.index, ""), "bold"),
                Cell(fit_frame(row.frame, self.width_of("where"), row.lead), where_style))
