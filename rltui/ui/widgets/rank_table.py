"""The rank pane: one row per process of the job, and a dimmed row per rank that departed.

A departed rank keeps its row (dimmed) with the GPU and role it had when last seen: in a hang the
missing rank is the one to look at. Its state says how it left, from the best witness at hand
(rltui.diagnosis.exits, as diagnose's JSON ``departed``): ``exit 1``, ``SIGKILL``, or
``exited``/``zombie``/``missing`` when nothing tells; ``left`` says how long ago it left.
``GPU mem`` is the memory NVML reports for the process itself (all its GPUs together). Rows the
OS could only partly read are marked with ``*`` after the PID; the pane's message line says why.

The log feature fills ``last step`` (the step and how long ago it was logged), ``step time``
(a sparkline of the seconds per step, then the last one) and ``ETA`` (when the log says how many
steps there are). A rank's log is found by its rank, else its pid, else its stdout/stderr path
(``LogIndex``); a departed rank keeps its last step. ``o`` opens the highlighted rank's log.
``stack`` is the rank's class in the latest py-spy rounds (``#1`` is the largest class, as on the
compare screen) and where it waits; red when the stacks show a hang and the rank is a suspect.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median

from textual import on
from textual.binding import Binding
from textual.events import Key
from textual.widgets import Input

from rltui.cluster.view import RANK_UNKNOWN, ClusterRank, local_gpu
from rltui.diagnosis.exits import Exit, exit_of
from rltui.diagnosis.stacktree import StackClass, short_name
from rltui.diagnosis.stackview import class_label
from rltui.model import DepartedRank, LogFileState, NodeSnapshot, ProcInfo
from rltui.tablefilter import FilterError, RowFacts, RowFilter, parse
from rltui.tablesort import Value
from rltui.tablesummary import Doing, groups
from rltui.ui.messages import View
from rltui.ui.widgets.cells import NOT_YET, Cell, HistoryCursor, na, percent, set_title, spark
from rltui.ui.widgets.log_facts import SPARK_STEPS, LogIndex, eta, log_index, step_times
from rltui.ui.widgets.log_view import OpenLog
from rltui.ui.widgets.pane import Column, Row, TablePane
from rltui.units import age, duration, gib

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
        Column("step", "last step", 11, 7, right=True),
        Column("gpu_mem", "GPU mem", 7, 9, right=True),
        Column("step_time", "step time", 8 + 1 + 5, 11),
        Column("eta", "ETA", 6, 12, right=True),
        Column("stack", "stack", 24, 10),
        Column("role", "role", 12, 8),
    )
    # With departed ranks, when each left comes right after the state (before the last step and
    # the role: at 80 columns the time a rank left matters more than its role).
    LEFT = Column("left", "left", 9, 6, right=True)
    # Across nodes the node comes right after the rank: which machine to log in to.
    NODE = Column("node", "node", 12, 1)
    CLUSTER_COLUMNS = COLUMNS[:1] + (NODE,) + COLUMNS[1:]
    BINDINGS = [
        Binding("o", "open_log", "Open log", id="rltui.ranks.open_log",
                tooltip="open the highlighted rank's log full screen"),
        # out of the footer, which must fit 80 columns; help (?) and the palette list it
        Binding("slash", "filter", "Filter", id="rltui.ranks.filter", show=False,
                tooltip="show only some ranks: a rank set (0-3,7), a state (stalled, exited), "
                        "a stack class (#2), a node; escape clears"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "Ranks"
        # The last thing seen of every pid, so a departed row can still show GPU and role. Fed
        # from every snapshot in the history (not only the drawn ones), so a replay that jumps
        # to its end knows as much as one played second by second.
        self._last_known: dict[tuple[str, int], ProcInfo] = {}  # by (host, pid)
        self._cursor = HistoryCursor()
        self._utils: dict[int, float | None] = {}  # GPU util by index, for this view
        self._logs: LogIndex | None = None  # log files of this view's snapshot
        self._stack_classes: dict[int, tuple[str, StackClass]] = {}  # member -> class
        self._job_views: dict[tuple[str, int], object] = {}  # several jobs: process -> its job
        self._job_names: dict[str, str] = {}  # several jobs: row key -> its job's name
        self._part_of: dict[int, NodeSnapshot] = {}  # several jobs: id(departed) -> its job's
        self._gpu_mem: dict[tuple[str, int], int] = {}  # (host, pid) -> bytes on its GPUs
        self._exits: dict[tuple[str, int, int | None], Exit] = {}  # departed -> how it left
        self._stalled: frozenset[int] = frozenset()  # ranks a stall or hang symptom names
        self.filter = RowFilter()
        # what the title counts, kept for a redraw when the filter changes
        self._live_rows: Sequence[ProcInfo] = ()
        self._departed_rows: Sequence[DepartedRank] = ()
        self._unknown_count = 0
        self.filter_error = ""  # what is wrong with the text typed, said in the title
        self.filter_input = Input(placeholder="/ ranks 0-3,7 · stalled · exited · #2 · a node",
                                  id="rank-filter", select_on_focus=False, compact=True)
        self.filter_input.display = False

    def compose(self):
        yield self.message
        yield self.summary
        yield self.filter_input
        yield self.table

    # -- the log feature ------------------------------------------------------------------------
    def log_of(self, proc: ProcInfo | None, rank: int | None = None,
               departed: DepartedRank | None = None) -> LogFileState | None:
        """The log speaking for a process (or, with no process, for a rank; ``departed``: the
        row's departed rank, whose job's files alone are looked in)."""
        index = self._logs
        if index is None:
            return None
        # several jobs: a rank's log is looked up among its own job's files only (rank 0 of
        # one job is not rank 0 of the other; a rank missing from one job's WORLD_SIZE has no
        # process, its job is the one whose view holds it)
        if proc is not None:
            mine = self._job_views.get((proc.host, proc.pid))
            return (log_index(mine.snapshot) if mine is not None else index).for_proc(proc)
        part = self._part_of.get(id(departed)) if departed is not None else None
        return (log_index(part) if part is not None else index).for_rank(rank)

    def stack_class(self, proc: ProcInfo, view: View) -> Cell:
        """The class of this rank's py-spy stack and where it waits: ``#1 all_reduce``."""
        report = view.stacks
        dim, pal = view.palette.dim, view.palette
        member = proc.rank if proc.rank is not None else -1 - proc.pid
        found = self._stack_classes.get(member)
        mine = self._job_views.get((proc.host, proc.pid))
        if mine is not None and view.stacks_job is not None and mine.key != view.stacks_job:
            found = None  # the classes shown are another job's
        if report is None or found is None:
            return Cell(NOT_YET, dim)
        label, c = found
        where = c.op or c.tip or c.deepest  # tip: the innermost Python frame
        text = f"{label} {short_name(where.name)}" if where is not None else label
        if report.hang and member in report.suspect_ranks:
            return Cell(text, pal.bad)
        if report.hang:
            return Cell(text, pal.warn)
        return Cell(text)

    def summary_text(self) -> str:
        """``16 ranks: 12 wait in all_reduce, 4 in destroy_process_group``: the rows shown,
        grouped by where their stacks are (while py-spy rounds are known), else by state."""
        if not self._items:
            return self._said[0] or "0 ranks"
        keys = self.keep(self._natural)
        if not self._job_names:
            return groups(("rank", "ranks"), [self._doing(self._items[k]) for k in keys])
        # several jobs: ``train_ppo 5 ranks: 3 running, 1 exited · eval 5 ranks: 5 running``
        by_job: dict[str, list[Doing]] = {}
        for k in keys:
            by_job.setdefault(self._job_names.get(k, "other"), []).append(
                self._doing(self._items[k]))
        return " · ".join(f"{name} {groups(('rank', 'ranks'), doing)}"
                          for name, doing in by_job.items())

    def _doing(self, item: object) -> Doing:
        view = self.view
        if isinstance(item, DepartedRank):
            return "", _departed_state(item, self._exits.get(_exit_key(item)))
        if isinstance(item, ClusterRank):
            return "", "unknown"
        assert isinstance(item, ProcInfo)
        member = item.rank if item.rank is not None else -1 - item.pid
        found = self._stack_classes.get(member)
        mine = self._job_views.get((item.host, item.pid))
        if mine is not None and view.stacks_job is not None and mine.key != view.stacks_job:
            found = None
        if view.stacks is not None and found is not None:
            c = found[1]
            where = c.op or c.tip or c.deepest
            if where is not None:
                return ("wait in" if view.stacks.hang else "in"), short_name(where.name)
        return "", item.state or "?"

    def columns(self, view: View) -> tuple[Column, ...]:
        columns = self.CLUSTER_COLUMNS if view.cluster is not None else self.COLUMNS
        if not any(v.snapshot.departed for v in view.jobs) and not view.snapshot.departed:
            return columns
        at = next(i for i, c in enumerate(columns) if c.key == "state") + 1
        return columns[:at] + (self.LEFT,) + columns[at:]

    # -- rows -----------------------------------------------------------------------------------
    def rows(self, view: View) -> list[Row]:
        snap = view.snapshot
        self._utils = {g.index: g.util for g in snap.gpus}
        self._logs = log_index(snap)
        self._stack_classes = ({m: (class_label(i), c) for i, c in enumerate(view.stacks.classes)
                                for m in c.members} if view.stacks is not None else {})
        self._gpu_mem = _gpu_memory(view)
        self._stalled = frozenset(r for s in view.diagnosis.symptoms
                                  if s.id == "steps-stalled" or s.id.startswith("hang-")
                                  for r in s.ranks)
        live = snap.live_procs
        for seen in self._cursor.new(view.history):
            for p in seen.live_procs:
                self._last_known[(p.host, p.pid)] = p
        for p in live:  # across nodes the history holds GPUs only
            self._last_known[(p.host, p.pid)] = p
        # A lost node's ranks: last seen alive, now unknown (across nodes only).
        unknown = [r for r in view.cluster.ranks if r.state == RANK_UNKNOWN] \
            if view.cluster is not None else []
        # Departed rows sit among the live ones by rank: the gap in the ranks is the news.
        # Several jobs: each job's rows together, worst job first (their ranks repeat), read
        # from the job's own view (its departed ranks, those missing from its WORLD_SIZE too).
        views = [v for v in view.jobs if v.job is not None]
        several = len(views) > 1 and view.focus is None  # with a focus: that job's alone
        parts = [v.snapshot for v in views] if several else [snap]
        self._job_views = {m: v for v in views for m in v.job.members} if several else {}
        ordered: list[tuple[tuple, str, object]] = []
        departed: list[DepartedRank] = []
        self._exits = {}
        self._part_of = {}
        for i, part in enumerate(parts):
            mine = sorted(part.departed, key=_order)
            departed += mine
            if several:
                self._part_of.update((id(d), part) for d in mine)
            for d in mine:  # from its own job's logs, as diagnose's JSON reads it
                self._exits[_exit_key(d)] = exit_of(part, d)
            ordered += [((i,) + _order(p), _live_key(p), p) for p in part.live_procs]
            # a missing rank has no pid: two jobs may each miss the same rank number
            suffix = f"@{i}" if len(parts) > 1 else ""
            ordered += [((i,) + _order(d), _departed_key(d) + ("" if d.pid else suffix), d)
                        for d in mine]
        ordered += [((len(parts),) + _order(r), f"u{r.host}:{r.pid}", r) for r in unknown]
        ordered.sort(key=lambda t: t[0])
        rows: list[Row] = [(key, item) for _, key, item in ordered]
        # several jobs: each row's job, so that the folded line counts per job, not all as one
        names = [v.job.name for v in views]  # two jobs of one script: told apart by their ids
        labels = [n if names.count(n) == 1 else v.job.id for n, v in zip(names, views)]
        self._job_names = ({key: labels[order[0]] for order, key, _ in ordered
                            if order[0] < len(views)} if several else {})
        keep = {(p.host, p.pid) for p in live} | {(_host(d), d.pid) for d in departed}
        self._last_known = {k: p for k, p in self._last_known.items() if k in keep}
        self._live_rows, self._departed_rows, self._unknown_count = live, departed, len(unknown)
        self._titles(view, live, departed, len(unknown))
        return rows

    def _titles(self, view: View, live: Sequence[ProcInfo],
                departed: Sequence[DepartedRank], unknown: int = 0) -> None:
        title = f"Ranks ({len(live)} running"
        if departed:
            title += f", {len(departed)} departed"
        if unknown:
            title += f", {unknown} unknown"
        title += ")"
        if self.filter_error:
            title += f" · filter: {self.filter_error}"
        elif self.filter.active:
            title += f" · {self.table.row_count} shown: /{self.filter.text}"
        set_title(self, title)
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
        if isinstance(item, ClusterRank):
            return self._unknown(item, self.view)
        assert isinstance(item, ProcInfo)
        return self._live(item, self._utils, self.view)

    def _live(self, p: ProcInfo, utils: dict[int, float | None], view: View) -> dict[str, Cell]:
        th, pal, dim = view.thresholds, view.palette, view.palette.dim
        if p.gpu_index is None:
            gpu, gpu_util = Cell("-", dim), Cell("-", dim)
        else:
            gpu = Cell(str(local_gpu(p.gpu_index)))
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
            "node": Cell(p.host or "-"),
            "pid": Cell(f"{p.pid}{PARTIAL_MARK if p.partial else ''}",
                        pal.warn if p.partial else ""),
            "gpu": gpu,
            "gpu_util": gpu_util,
            "cpu": cpu,
            "state": _state(p.state, pal.bad, pal.warn, dim),
            "gpu_mem": self._gpu_mem_cell(p, dim),
            "stack": self.stack_class(p, view),
            "role": Cell(p.role or "-"),
            **self._step_cells(self.log_of(p), view, ""),
        }

    def _departed(self, d: DepartedRank, view: View) -> dict[str, Cell]:
        dim = view.palette.dim
        seen = self._last_known.get((_host(d), d.pid))
        ex = self._exits.get(_exit_key(d))
        at = ex.at if ex is not None else d.gone_since
        return {
            "rank": Cell("-" if d.rank is None else str(d.rank), dim),
            "node": Cell(_host(d) or "-", dim),
            "pid": Cell(str(d.pid) if d.pid else "-", dim),
            "gpu": Cell("-" if seen is None or seen.gpu_index is None
                        else str(local_gpu(seen.gpu_index)), dim),
            "gpu_util": Cell("-", dim),
            "cpu": Cell("-", dim),
            "state": Cell(_departed_state(d, ex), view.palette.bad if ex and ex.crashed
                          else dim),
            "left": Cell("-" if at is None else age(max(0.0, view.snapshot.timestamp - at))
                         + " ago", dim),
            "gpu_mem": Cell("-", dim),
            "stack": Cell(NOT_YET, dim),
            "role": Cell((seen.role if seen else "") or "-", dim),
            **self._step_cells(self.log_of(seen, d.rank, d), view, dim),
        }

    def _gpu_mem_cell(self, p: ProcInfo, dim: str) -> Cell:
        used = self._gpu_mem.get((p.host, p.pid))
        if used is None:
            return Cell("-", dim)
        return Cell(gib(used, digits=1, unit="G"))

    def _unknown(self, r: ClusterRank, view: View) -> dict[str, Cell]:
        """A rank of a node that stopped answering: as last seen, dimmed, state unknown."""
        dim = view.palette.dim
        p = r.info
        return {
            "rank": Cell("-" if r.rank is None else str(r.rank), dim),
            "node": Cell(r.host, dim),
            "pid": Cell(str(r.pid), dim),
            "gpu": Cell("-" if r.gpu_index is None else str(r.gpu_index), dim),
            "gpu_util": Cell("-", dim),
            "cpu": Cell("-", dim),
            "state": Cell("unknown", view.palette.warn),
            "stack": Cell(NOT_YET, dim),
            "role": Cell((p.role if p else "") or "-", dim),
            "step": Cell("seen " + (age(max(0.0, view.snapshot.timestamp - r.last_seen))
                                    if r.last_seen is not None else "never"), dim),
        }

    def _step_cells(self, f: LogFileState | None, view: View, style: str) -> dict[str, Cell]:
        """Last step and its age, the step-time sparkline and the ETA (``style`` dims a
        departed rank's)."""
        dim = view.palette.dim
        if f is None or f.last_step is None:
            return {"step": Cell(NOT_YET, dim), "step_time": Cell(""), "eta": Cell(NOT_YET, dim)}
        times = step_times(f.recent_steps)[-SPARK_STEPS:]
        trend = ""
        if times:
            # Scaled to twice the median: a steady pace is a flat half-height line, and a
            # step that took twice as long or more stands out at full height.
            high = max(max(times), 2 * median(times)) or 1.0
            trend = f"{spark(times, high):>{SPARK_STEPS}} {duration(times[-1])}"
        left = eta(f)
        return {
            "step": Cell(_last_step(f, view.snapshot.timestamp), style),
            "step_time": Cell(trend, style or view.palette.spark),
            "eta": (Cell(NOT_YET, dim) if left is None
                    else Cell("done" if left == 0 else duration(left), style)),
        }

    def select_rank(self, rank: int) -> bool:
        """Cursor to ``rank``'s row (a symptom's evidence naming it); False when none shows."""
        for i, key in enumerate(self.table.row_keys):
            if getattr(self._items.get(key), "rank", None) == rank:
                self.table.cursor_row = i
                return True
        return False

    # -- sorting: the real value where the cell formats it ------------------------------------
    def sort_value(self, item: object, column: str) -> Value:
        if column == "gpu_mem":
            return self._gpu_mem.get((item.host, item.pid)) \
                if isinstance(item, ProcInfo) else None
        if column == "left":
            if not isinstance(item, DepartedRank):
                return None
            ex = self._exits.get(_exit_key(item))
            return ex.at if ex is not None and ex.at is not None else item.gone_since
        if column == "stack":
            if not isinstance(item, ProcInfo) or self.view.stacks is None:
                return None
            member = item.rank if item.rank is not None else -1 - item.pid
            found = self._stack_classes.get(member)
            return None if found is None else int(found[0].lstrip("#"))
        if column in ("step_time", "eta"):
            f = self._log_of_item(item)
            if f is None:
                return None
            if column == "eta":
                return eta(f)
            times = step_times(f.recent_steps)
            return times[-1] if times else None
        return super().sort_value(item, column)

    def _log_of_item(self, item: object) -> LogFileState | None:
        if isinstance(item, ProcInfo):
            return self.log_of(item)
        if isinstance(item, DepartedRank):
            return self.log_of(self._last_known.get((_host(item), item.pid)), item.rank, item)
        return None

    def successor(self, key: str) -> str | None:
        """A live rank that departs keeps the cursor: its row key turns from p… to d…."""
        return "d" + key[1:] if key.startswith("p") else None

    # -- the filter (``/``) ---------------------------------------------------------------------
    def facts(self, item: object) -> RowFacts:
        """What the filter reads of a row (rltui.tablefilter)."""
        # On one node a row names no host: it is on the node the header names, and
        # node:NAME (or NAME) finds it by that name.
        here = self._view.snapshot.host if self._view is not None else ""
        if isinstance(item, DepartedRank):
            word = _DEPARTED_STATE.get(item.reason, item.reason)
            return RowFacts(rank=item.rank, state=word, departed=True, node=_host(item) or here,
                            stalled=item.rank in self._stalled,
                            role=(item.info.role if item.info else "") or "")
        if isinstance(item, ClusterRank):
            return RowFacts(rank=item.rank, state="unknown", node=item.host,
                            stalled=item.rank in self._stalled)
        assert isinstance(item, ProcInfo)
        member = item.rank if item.rank is not None else -1 - item.pid
        found = self._stack_classes.get(member)
        number, name = None, ""
        if found is not None and self._view is not None and self.view.stacks is not None:
            label, c = found
            where = c.op or c.tip or c.deepest
            number, name = int(label.lstrip("#")), short_name(where.name) if where else ""
        return RowFacts(rank=item.rank, state=item.state, node=item.host or here,
                        stack_class=number, stack_name=name,
                        stalled=item.rank is not None and item.rank in self._stalled,
                        role=item.role or "")

    def keep(self, keys: list[str]) -> list[str]:
        if not self.filter.active:
            return keys
        items, match = self._items, self.filter.matches
        return [k for k in keys if match(self.facts(items[k]))]

    def set_filter(self, text: str) -> None:
        """Filter the rows by ``text`` (rltui.tablefilter); raises FilterError."""
        self.filter = parse(text)
        if self._view is not None:
            self._set_rows()
            self.table.invalidate()
            self._retitle()

    def _retitle(self) -> None:
        if self._view is not None:
            self._titles(self.view, self._live_rows, self._departed_rows, self._unknown_count)

    def show(self, view: View) -> None:
        super().show(view)
        if self.filter.active or self.filter_error:
            self._retitle()  # the count of rows shown is known only now

    def action_filter(self) -> None:
        self.filter_input.display = True
        self.filter_input.value = self.filter.text
        self.filter_input.focus()

    @on(Input.Changed, "#rank-filter")
    def _filter_typed(self, event: Input.Changed) -> None:
        event.stop()
        try:
            self.filter_error = ""
            self.set_filter(event.value)  # the rows shown keep the last filter that parsed
        except FilterError as exc:
            self.filter_error = str(exc)
            self._retitle()
        self.filter_input.set_class(bool(self.filter_error), "-invalid")

    @on(Input.Submitted, "#rank-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        event.stop()
        if not self.filter.active:
            self.filter_input.display = False
        self.table.focus()

    def on_key(self, event: Key) -> None:
        # escape in the filter's line clears it (before the screen's escape, unzoom)
        if event.key == "escape" and self.filter_input.has_focus:
            event.stop()
            event.prevent_default()
            self.clear_filter()

    def clear_filter(self) -> None:
        self.filter_input.value = ""
        self.filter_error = ""
        self.set_filter("")
        self.filter_input.remove_class("-invalid")
        self.filter_input.display = False
        self.table.focus()

    def action_open_log(self) -> None:
        keys = self.table.row_keys
        row = self.table.cursor_row
        item = self._items.get(keys[row]) if row < len(keys) else None
        if isinstance(item, DepartedRank):
            proc, rank = self._last_known.get((_host(item), item.pid)) or item.info, item.rank
        elif isinstance(item, ProcInfo):
            proc, rank = item, item.rank
        else:
            return
        f = self.log_of(proc, rank, item if isinstance(item, DepartedRank) else None)
        if rank is None and f is None:
            self.notify("No log found for this process: its stdout/stderr are not files. "
                        "Add one with --log PATH_OR_GLOB.", severity="warning")
            return
        self.post_message(OpenLog(rank, f.path if f is not None else None))


def _last_step(f: LogFileState, now: float) -> str:
    if f.last_step is None:
        return NOT_YET
    if f.last_step_time is None:
        return str(f.last_step)
    return f"{f.last_step} · {age(now - f.last_step_time)}"


def _order(p: ProcInfo | DepartedRank | ClusterRank) -> tuple[bool, int, int]:
    return (p.rank is None, p.rank or 0, p.pid)


def _gpu_memory(view: View) -> dict[tuple[str, int], int]:
    """Each process's GPU memory as NVML reports it, summed over its GPUs, by (host, pid):
    across nodes a GPU's processes are its node's pids."""
    used: dict[tuple[str, int], int] = {}
    cluster = view.cluster
    for g in view.snapshot.gpus:
        where = cluster.gpu_of(g.index) if cluster is not None else None
        host = where[0] if where is not None else ""
        for p in g.processes:
            if p.used_memory is not None and p.local:
                used[(host, p.pid)] = used.get((host, p.pid), 0) + p.used_memory
    return used


def _exit_key(d: DepartedRank) -> tuple[str, int, int | None]:
    return (_host(d), d.pid, d.rank)


def _departed_state(d: DepartedRank, ex: Exit | None) -> str:
    """``SIGKILL``, ``exit 1``, else how rltui saw it go: exited | zombie | missing."""
    if d.reason == "zombie" or ex is None:
        return _DEPARTED_STATE.get(d.reason, d.reason)
    if ex.signal:
        return ex.signal
    if ex.code is not None:
        return f"exit {ex.code}"
    return _DEPARTED_STATE.get(d.reason, d.reason)


def _host(d: DepartedRank) -> str:
    return d.info.host if d.info is not None else ""


def _on_host(host: str) -> str:
    # Row keys name (host, pid) across nodes; on one node they stay the bare pid.
    return f"{host}:" if host else ""


def _live_key(p: ProcInfo) -> str:
    return f"p{_on_host(p.host)}{p.pid}"


def _departed_key(d: DepartedRank) -> str:
    return f"d{_on_host(_host(d))}{d.pid}" if d.pid else f"m{d.rank}"


def _state(state: str, bad: str, warn: str, dim: str) -> Cell:
    if not state:
        return na(dim)
    if state in ("zombie", "dead"):
        return Cell(state, bad)
    if state in ("disk-sleep", "stopped", "tracing-stop"):
        return Cell(state, warn)
    return Cell(state)
