"""The rank pane: one row per process of the job, and a dimmed row per rank that departed.

A departed rank keeps its row (dimmed, state ``exited``/``zombie``/``missing``) with the GPU and
role it had when last seen: in a hang the missing rank is the one to look at. Rows the OS could
only partly read are marked with ``*`` after the PID; the pane's message line says why.

``last_step`` and ``stack_class`` are the hooks the log and stack features fill; until then
they show ``-``.
"""

from __future__ import annotations

from typing import Sequence

from rltui.model import DepartedRank, ProcInfo
from rltui.ui.messages import View
from rltui.ui.widgets.cells import NOT_YET, Cell, HistoryCursor, na, percent
from rltui.ui.widgets.pane import Column, Row, TablePane

PARTIAL_MARK = "*"
_DEPARTED_STATE = {"exited": "exited", "zombie": "zombie", "missing from WORLD_SIZE": "missing"}


class RankPane(TablePane):
    COLUMNS = (
        Column("rank", "rank", 4, 0, right=True),
        Column("pid", "pid", 8, 1, right=True),
        Column("gpu", "GPU", 3, 2, right=True),
        Column("gpu_util", "GPU%", 4, 3, right=True),
        Column("cpu", "CPU%", 4, 4, right=True),
        Column("state", "state", 10, 5),
        Column("step", "last step", 9, 7, right=True),
        Column("stack", "stack", 12, 8),
        Column("role", "role", 12, 6),
    )

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Ranks"
        # The last thing seen of every pid, so a departed row can still show GPU and role. Fed
        # from every snapshot in the history (not only the drawn ones), so a replay that jumps
        # to its end knows as much as one played second by second.
        self._last_known: dict[int, ProcInfo] = {}
        self._cursor = HistoryCursor()
        self._utils: dict[int, float | None] = {}  # GPU util by index, for this view

    # -- hooks for later features -------------------------------------------------------------
    def last_step(self, proc: ProcInfo, view: View) -> str:
        """Hook for the log feature: the last training step this rank logged (``-`` until
        the logs source provides it)."""
        return NOT_YET

    def stack_class(self, proc: ProcInfo, view: View) -> str:
        """Hook for the stack feature: the class of this rank's py-spy stack (e.g. "collective
        wait", "cleanup"); ``-`` until the stacks source provides it."""
        return NOT_YET

    # -- rows -----------------------------------------------------------------------------------
    def rows(self, view: View) -> list[Row]:
        snap = view.snapshot
        self._utils = {g.index: g.util for g in snap.gpus}
        live = snap.live_procs
        for seen in self._cursor.new(view.history):
            for p in seen.live_procs:
                self._last_known[p.pid] = p
        departed = sorted(snap.departed, key=_order)
        # Departed rows sit among the live ones by rank: the gap in the ranks is the news.
        ordered = sorted([(_order(p), f"p{p.pid}", p) for p in live]
                         + [(_order(d), _departed_key(d), d) for d in departed],
                         key=lambda t: t[0])
        rows: list[Row] = [(key, item) for _, key, item in ordered]
        keep = {p.pid for p in live} | {d.pid for d in departed}
        self._last_known = {pid: p for pid, p in self._last_known.items() if pid in keep}
        self._titles(view, live, departed)
        return rows

    def _titles(self, view: View, live: Sequence[ProcInfo],
                departed: Sequence[DepartedRank]) -> None:
        title = f"Ranks ({len(live)} running"
        if departed:
            title += f", {len(departed)} departed"
        self.border_title = title + ")"
        partial = [p for p in live if p.partial]
        state = view.snapshot.source("procs")
        pal = view.palette
        if state is None:
            self.say("Waiting for the first process scan.", pal.dim)
        elif state.status != "ok":
            text = state.message or f"process source {state.status}"
            self.say(f"{text} {state.remedy}".strip(), pal.bad)
        elif not live and not departed:
            self.say("No training processes found (ranks are found by RANK/LOCAL_RANK in "
                     "their environment).", pal.dim)
        elif partial:
            reason = partial[0].partial_reason or "some fields could not be read"
            self.say(f"{PARTIAL_MARK} {len(partial)} process(es) only partly read: {reason}",
                     pal.warn)
        else:
            self.say()

    def cells(self, item: object) -> dict[str, Cell]:
        if isinstance(item, DepartedRank):
            return self._departed(item, self.view)
        assert isinstance(item, ProcInfo)
        return self._live(item, self._utils, self.view)

    def _live(self, p: ProcInfo, utils: dict[int, float | None], view: View) -> dict[str, Cell]:
        th, pal, dim = view.thresholds, view.palette, view.palette.dim
        if p.gpu_index is None:
            gpu, gpu_util = Cell("-", dim), Cell("-", dim)
        else:
            gpu = Cell(str(p.gpu_index))
            util = utils.get(p.gpu_index)
            gpu_util = percent(util, dim) if p.gpu_index in utils else Cell("-", dim)
            if util is not None:
                if util <= th.gpu_idle_pct:
                    gpu_util = Cell(gpu_util.text, pal.idle)
                elif util >= th.gpu_busy_pct:
                    gpu_util = Cell(gpu_util.text, pal.ok)
        cpu = percent(p.cpu_percent, dim)
        if p.cpu_percent is not None and p.cpu_percent >= th.cpu_busy_pct:
            cpu = Cell(cpu.text, pal.warn)
        return {
            "rank": Cell("-" if p.rank is None else str(p.rank)),
            "pid": Cell(f"{p.pid}{PARTIAL_MARK if p.partial else ''}",
                        pal.warn if p.partial else ""),
            "gpu": gpu,
            "gpu_util": gpu_util,
            "cpu": cpu,
            "state": _state(p.state, pal.bad, pal.warn, dim),
            "step": Cell(self.last_step(p, view)),
            "stack": Cell(self.stack_class(p, view)),
            "role": Cell(p.role or "-"),
        }

    def _departed(self, d: DepartedRank, view: View) -> dict[str, Cell]:
        dim = view.palette.dim
        seen = self._last_known.get(d.pid)
        return {
            "rank": Cell("-" if d.rank is None else str(d.rank), dim),
            "pid": Cell(str(d.pid) if d.pid else "-", dim),
            "gpu": Cell("-" if seen is None or seen.gpu_index is None else str(seen.gpu_index),
                        dim),
            "gpu_util": Cell("-", dim),
            "cpu": Cell("-", dim),
            "state": Cell(_DEPARTED_STATE.get(d.reason, d.reason), dim),
            "step": Cell(self.last_step(seen, view) if seen else NOT_YET, dim),
            "stack": Cell(NOT_YET, dim),
            "role": Cell((seen.role if seen else "") or "-", dim),
        }


def _order(p: ProcInfo | DepartedRank) -> tuple[bool, int, int]:
    return (p.rank is None, p.rank or 0, p.pid)


def _departed_key(d: DepartedRank) -> str:
    return f"d{d.pid}" if d.pid else f"m{d.rank}"


def _state(state: str, bad: str, warn: str, dim: str) -> Cell:
    if not state:
        return na(dim)
    if state in ("zombie", "dead"):
        return Cell(state, bad)
    if state in ("disk-sleep", "stopped", "tracing-stop"):
        return Cell(state, warn)
    return Cell(state)
