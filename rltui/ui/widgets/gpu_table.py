"""The GPU pane: one row per device, coloured by the thresholds the help screen lists.

When the gpus source is not OK the pane says so in one line (what is wrong and what to do) and
hides its table; every other pane keeps working. A job in another PID namespace gets one line
too, since none of its GPU processes can be matched to ranks from here.
"""

from __future__ import annotations

from dataclasses import replace

from rltui.cluster.view import GPU_STRIDE, local_gpu
from rltui.model import OK, GpuSample, NodeSnapshot
from rltui.tablesummary import gpu_groups
from rltui.ui.messages import View
from rltui.ui.widgets.cells import NA, Cell, SparkSeries, na, percent, set_title
from rltui.ui.widgets.pane import Column, Row, TablePane
from rltui.units import GIB

SPARK_WIDTH = 12
NAME_MAX = 40  # cells a GPU's name may take where there is room


def _gpu_values(snap: NodeSnapshot):
    for g in snap.gpus:
        yield ("util", g.index), g.util
        yield ("mem", g.index), g.mem_percent


class GpuPane(TablePane):
    COLUMNS = (
        Column("index", "GPU", 3, 0, right=True),
        Column("name", "name", 16, 5),  # "H100 80GB HBM3"; longer names grow (columns)
        Column("util", "util", 4, 1, right=True),
        Column("util_spark", "util history", SPARK_WIDTH, 6),
        Column("mem", "memory", 11, 2, right=True),
        Column("mem_spark", "mem history", SPARK_WIDTH, 7),
        Column("power", "power", 9, 4, right=True),
        Column("temp", "temp", 4, 3, right=True),
        Column("sm", "SM MHz", 6, 10, right=True),
        Column("throttle", "throttle", 16, 9),
        Column("ecc", "ECC", 4, 8, right=True),
    )

    # Across nodes the table is grouped by node: the node's name on its first GPU's row.
    CLUSTER_COLUMNS = (Column("node", "node", 12, 0),) + COLUMNS

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "GPUs"
        self._sparks: SparkSeries | None = None
        self._group_heads: dict[int, str] = {}  # merged GPU index -> its node, first of each

    def columns(self, view: View) -> tuple[Column, ...]:
        """A longer name than the column's 16 cells ("Simulated GPU (demo)", "NVIDIA RTX
        PRO 6000 Blackwell Server Edition") takes what the other columns leave, up to
        NAME_MAX: cut only where there is no room."""
        columns = self.CLUSTER_COLUMNS if view.cluster is not None else self.COLUMNS
        longest = max((len(_name(g)) for g in view.snapshot.gpus if not g.error), default=0)
        grow = min(NAME_MAX, longest) - 16
        if grow <= 0:
            return columns
        return tuple(replace(c, grow=grow) if c.key == "name" else c for c in columns)

    def rows(self, view: View) -> list[Row]:
        snap = view.snapshot
        self._title(view)
        self._message(view)
        if self._sparks is None:
            bucket = view.intervals.get("gpus", 1.0) or 1.0
            self._sparks = SparkSeries(SPARK_WIDTH, bucket, _gpu_values)
        self._sparks.feed(view.history)
        self._group_heads = {}
        if view.cluster is not None:
            for node in view.cluster.nodes:
                if node.merged and node.gpus:
                    self._group_heads[node.slot * GPU_STRIDE + node.gpus[0].index] = node.host
        return [(f"gpu{g.index}", g) for g in snap.gpus]

    def _title(self, view: View) -> None:
        snap = view.snapshot
        title = f"GPUs ({len(snap.gpus)})" if snap.gpus else "GPUs"
        if view.cluster is not None and snap.gpus:
            nodes = sum(1 for n in view.cluster.nodes if n.merged and n.gpus)
            title = f"GPUs ({len(snap.gpus)} on {nodes} node{'s' if nodes != 1 else ''})"
        if snap.gpu_simulated:
            title += " simulated"
        set_title(self, title)

    def _message(self, view: View) -> None:
        snap, pal = view.snapshot, view.palette
        state = snap.source("gpus")
        if state is None:
            self.show_table(False)
            self.say("Waiting for the first GPU reading.", pal.dim)
            return
        if state.status != OK:
            # One message instead of a table of N/A: what is wrong, then what to do about it.
            text = state.message or f"GPU source {state.status}"
            if state.remedy:
                text += f". {state.remedy}" if not text.endswith(".") else f" {state.remedy}"
            # Across nodes one node's failure must not hide the other nodes' GPUs.
            self.show_table(view.cluster is not None and bool(snap.gpus))
            self.say(text, pal.bad)
            return
        self.show_table(True)
        if snap.foreign_gpu_pids:
            n = len(snap.foreign_gpu_pids)
            self.say(f"{n} GPU process(es) are not visible here: the job runs in another PID "
                     "namespace (a container without --pid=host); GPUs cannot be matched to "
                     "ranks by PID.", pal.warn)
        else:
            self.say()

    def summary_text(self) -> str:
        """``8 GPUs: 6 busy, 2 idle, 61-78 GiB``; with no table, what the message says."""
        if not self.table_wanted:
            return self._said[0]
        th = self.view.thresholds
        gpus = [g for g in self.view.snapshot.gpus if not g.error]
        return gpu_groups([g.util for g in gpus], [g.mem_used for g in gpus if g.mem_used],
                          th.gpu_idle_pct, th.gpu_busy_pct,
                          errors=len(self.view.snapshot.gpus) - len(gpus))

    def cells(self, item: object) -> dict[str, Cell]:
        assert isinstance(item, GpuSample)
        g, view = item, self.view
        th, pal, dim = view.thresholds, view.palette, view.palette.dim
        index = str(local_gpu(g.index))
        node = Cell(self._group_heads.get(g.index, ""), "bold")
        if g.error:
            return {"node": node, "index": Cell(index, pal.bad), "name": Cell(g.error, pal.bad)}
        util = percent(g.util, dim)
        if g.util is not None:
            if g.util <= th.gpu_idle_pct:
                util = Cell(util.text, pal.idle)
            elif g.util >= th.gpu_busy_pct:
                util = Cell(util.text, pal.ok)
        cells = {
            "node": node,
            "index": Cell(index),
            "name": Cell(_name(g)),
            "util": util,
            "mem": _mem(g, th.gpu_mem_warn_pct, pal.warn, dim),
            "power": _power(g, dim),
            "temp": (na(dim) if g.temperature_c is None else
                     Cell(f"{g.temperature_c:.0f}C",
                          pal.warn if g.temperature_c >= th.gpu_temp_warn_c else "")),
            "sm": na(dim) if g.sm_clock_mhz is None else Cell(str(g.sm_clock_mhz)),
            "throttle": _throttle(g, pal.warn, dim),
            "ecc": (na(dim) if g.ecc_errors is None else
                    Cell(str(g.ecc_errors), pal.bad if g.ecc_errors else "")),
        }
        if self._sparks is not None and ("util_spark" in self._shown
                                         or "mem_spark" in self._shown):
            now = view.snapshot.timestamp
            cells["util_spark"] = Cell(self._sparks.line(("util", g.index), now), pal.spark)
            cells["mem_spark"] = Cell(self._sparks.line(("mem", g.index), now), pal.spark)
        return cells


def _name(g: GpuSample) -> str:
    return g.name.removeprefix("NVIDIA ")


def _mem(g: GpuSample, warn_pct: float, warn: str, dim: str) -> Cell:
    if g.mem_used is None:
        return na(dim)
    used = g.mem_used / GIB
    if not g.mem_total:
        return Cell(f"{used:.1f}G")
    pct = g.mem_percent or 0.0
    return Cell(f"{used:.1f}/{g.mem_total / GIB:.0f}G", warn if pct >= warn_pct else "")


def _power(g: GpuSample, dim: str) -> Cell:
    if g.power_w is None:
        return na(dim)
    if g.power_limit_w:
        return Cell(f"{g.power_w:.0f}/{g.power_limit_w:.0f}W")
    return Cell(f"{g.power_w:.0f}W")


def _throttle(g: GpuSample, warn: str, dim: str) -> Cell:
    if g.throttle_reasons is None:
        return Cell(NA, dim)
    if not g.throttle_reasons:
        return Cell("-", dim)
    return Cell(",".join(g.throttle_reasons), warn)
