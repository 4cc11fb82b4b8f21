"""The class list of the compare screen: one row per equivalence class of stacks.

Each row: the class label (``#1`` is the largest), its compact rank set and size, whether it
is stuck or moving across samples, which side of the diff shows it (``L``, ``R``), and where
it waits (the collective and its caller, else the deepest frame). Ranks with no stack follow,
dimmed: the ones missing from the dump (exited) and the processes py-spy could not read.

With the Flight Recorder read, a last column says which collective the class's ranks are
pending in (``all_reduce #4 of default_pg [4] Float, 12 s``; cut to ``all_reduce #4 of
default_pg`` when narrow). When ranks with one stack wait in different collectives (two groups
entered in opposite orders look alike to py-spy) the class says ``2 kinds:`` and one row per
collective follows under it (``├╴``/``└╴``) with its ranks; such a row stands for its class
(``a``, ``b``, ``enter``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rltui.diagnosis.stackview import (
    ClassRow,
    Pending,
    Side,
    StackView,
    fit_first,
    fit_frame,
    members_text,
    pending_kinds,
)
from rltui.ui.themes import Palette
from rltui.ui.widgets.cells import Cell
from rltui.ui.widgets.stack_table import StackPane, rest

MISSING = "missing"
UNREADABLE = "unreadable:"  # + status
KIND = ":fr:"  # class key + KIND + index: a row per pending collective under a class
MAX_KINDS = 6  # rows per class; the rest are counted on the last one
COLLECTIVE_MAX = 60  # the column's widest
WHERE_MIN = 20  # the where column keeps this much while the collective's texts can shrink
WHERE_LEAST = 12  # and gives up to this for the collective alone (``all_reduce #4 of ...``)


@dataclass(frozen=True, slots=True)
class NoStackRow:
    """Ranks or processes that have no stack to compare."""

    label: str
    ranks: str
    count: int
    state: str
    where: str
    members: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class KindRow:
    """Ranks of a class pending in one collective (the Flight Recorder's), under the class."""

    parent: ClassRow
    ranks: str
    count: int
    members: tuple[int, ...]
    texts: list[str]  # longest first
    waiting: bool
    last: bool


class StackClassPane(StackPane):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Classes"
        self._rows: dict[str, ClassRow | NoStackRow | KindRow] = {}
        self._pending: dict[str, tuple[list[str], str]] = {}
        self._sides: dict[int, str] = {}
        self._side_members: dict[str, int | None] = {}
        self._palette: Palette | None = None

    def show(self, view: StackView, left: Side, right: Side, palette: Palette) -> None:
        self._palette = palette
        fa = view.fr
        rows: dict[str, ClassRow | NoStackRow | KindRow] = {}
        self._pending: dict[str, tuple[list[str], str]] = {}  # key -> (texts, style)
        for c in view.classes:
            rows[c.key] = c
            if fa is None:
                continue
            kinds = pending_kinds(fa, c.members)
            if len(kinds) == 1:
                self._pending[c.key] = self._texts(kinds[0][0], palette)
            elif kinds:
                self._pending[c.key] = ([f"{len(kinds)} kinds:"], f"bold {palette.warn}")
                shown = kinds[:MAX_KINDS]
                for j, (p, members) in enumerate(shown):
                    more = len(kinds) - len(shown) if j == len(shown) - 1 else 0
                    if more:  # the last row stands for the rest too
                        members = tuple(sorted({m for _, ms in kinds[j:] for m in ms}))
                        texts = [f"{p.what} and {more} more kinds"]
                    else:
                        texts = self._texts(p, palette)[0]
                    key = f"{c.key}{KIND}{j}"
                    rows[key] = KindRow(c, members_text(members), len(members), members,
                                        texts, p.waiting, j == len(shown) - 1)
        report = view.report
        # ranks missing from the dump, and processes of no rank whose crash dump says they left
        gone = (*report.missing_ranks, *(-1 - p for p in report.missing_pids))
        if gone:
            rows[MISSING] = NoStackRow("-", members_text(gone), len(gone), "exited",
                                       "no stack: missing from the dump (exited?)", gone)
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
                f"no stack: py-spy {status}" + (f" ({message})" if message else ""),
                tuple(members))
        if tree is None and report.unreadable:  # no tree to say why: the pids alone
            rows[UNREADABLE] = NoStackRow("?", members_text(-1 - p for p in report.unreadable),
                                          len(report.unreadable), "unread", "no stack")
        if fa is not None:  # ranks py-spy could not read may still have a Flight Recorder dump
            for key, row in rows.items():
                if isinstance(row, NoStackRow):
                    kinds = pending_kinds(fa, row.members)
                    if len(kinds) == 1:
                        self._pending[key] = self._texts(kinds[0][0], palette)
                    elif kinds:
                        self._pending[key] = ([f"{len(kinds)} kinds"], palette.warn)
        self._rows = rows
        self._sides = {}
        self._side_members = {"L": left.member, "R": right.member}
        for mark, side in (("L", left), ("R", right)):
            if side.is_class:
                i = view.class_index(side.class_key)
            else:
                i = view.class_of.get(side.member) if side.member is not None else None
            if i is not None:
                self._sides[i] = self._sides.get(i, "") + mark
        n = len(view.classes)
        no_stack = sum(1 for r in rows.values() if isinstance(r, NoStackRow))
        self.set_pane_title(f"Classes ({n})" + (f" · no stack: {no_stack} group(s)"
                                                if no_stack else ""))
        self.set_rows(list(rows))

    @staticmethod
    def _texts(p: Pending, palette: Palette) -> tuple[list[str], str]:
        return p.texts(), "" if p.waiting else palette.dim

    @property
    def selected(self) -> ClassRow | None:
        """The class under the cursor (a collective's row under a class stands for it)."""
        key = self.table.cursor_key
        row = self._rows.get(key) if key is not None else None
        if isinstance(row, KindRow):
            return row.parent
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
        columns = [("class", "#", 3, False), ("ranks", "ranks", ranks, False),
                   ("n", "n", 4, True), ("state", "state", 7, False), ("side", "", 2, False)]
        where = "where it waits (collective ← caller) or deepest frame"
        if not self._pending:
            return columns + [("where", where, rest(width, *fixed), False)]
        lists = [ts for ts, _ in self._pending.values()] + \
            [r.texts for r in self._rows.values() if isinstance(r, KindRow)]
        longest = min(COLLECTIVE_MAX, max(10, *(len(ts[0]) for ts in lists)))
        least = min(COLLECTIVE_MAX, max(10, *(len(ts[-1]) for ts in lists)))
        room = rest(width, *fixed) - 2  # the where column and this one, less its padding
        collective = min(longest, room - WHERE_MIN)
        if collective < least:  # the collective alone wins over the frame's name
            collective = max(8, min(least, room - WHERE_LEAST))
        wheres = [len(r.where) for r in self._rows.values() if not isinstance(r, KindRow)]
        need = max(WHERE_MIN, len(where), *wheres)
        if room - collective > need:  # room to spare: the last column takes it
            collective = room - need
        head = "collective (Flight Recorder)" if collective >= 28 else "collective"
        return columns + [("where", where, rest(width, *fixed, collective), False),
                          ("collective", head, collective, False)]

    def cells(self, key: str) -> Sequence[Cell]:
        pal = self._palette
        assert pal is not None
        row = self._rows[key]
        texts, style = self._pending.get(key, ([""], ""))
        collective = (Cell(fit_first(texts, self.width_of("collective")), style),) \
            if self._pending else ()
        if isinstance(row, KindRow):
            side = "".join(mark for mark, m in self._side_members.items()
                           if m is not None and m in row.members)
            return (Cell("└╴" if row.last else "├╴", pal.dim), Cell(row.ranks),
                    Cell(str(row.count)), Cell(""), Cell(side, "bold"), Cell(""),
                    Cell(fit_first(row.texts, self.width_of("collective")),
                         "" if row.waiting else pal.dim))
        if isinstance(row, NoStackRow):
            return (Cell(row.label, pal.dim), Cell(row.ranks, pal.bad), Cell(str(row.count),
                                                                              pal.dim),
                    Cell(row.state, pal.bad), Cell(""), Cell(row.where, pal.dim), *collective)
        state_style = {"stuck": pal.bad, "moving": pal.ok}.get(row.state, pal.dim)
        where_style = pal.warn if row.teardown else ""
        return (Cell(row.label, "bold"), Cell(row.ranks), Cell(str(row.count)),
                Cell(row.state, state_style), Cell(self._sides.get(row.index, ""), "bold"),
                Cell(fit_frame(row.frame, self.width_of("where"), row.lead), where_style),
                *collective)
