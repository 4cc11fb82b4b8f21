"""The UI's pure helpers: column fitting, sparklines, ages, source labels, theme files."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from rltui.config import THEMES
from rltui.model import GpuSample, NodeSnapshot, SourceState
from rltui.ui.themes import Palette, ThemeFileError, load_theme, next_theme, parse_theme, theme_text
from rltui.ui.widgets.cells import BLOCKS, SparkSeries, spark
from rltui.ui.widgets.gpu_table import GpuPane
from rltui.ui.widgets.header import source_label
from rltui.ui.widgets.pane import Column, column_widths, fit_columns, header_label
from rltui.ui.widgets.rank_table import RankPane
from rltui.units import age

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("width, expected", [
    (10, ("a",)),  # the first column always shows
    (24, ("a", "c")),  # b (priority 2) does not fit, c (narrower, priority 3) does
    (42, ("a", "b", "c")),  # 4 chrome + 6 + 22 + 10
])
def test_fit_columns_by_priority_in_display_order(width, expected):
    cols = (Column("a", "a", 4, 0), Column("b", "b", 20, 2), Column("c", "c", 8, 3))
    assert fit_columns(cols, width) == expected


def test_tables_fit_80_and_200_columns():
    gpu80 = fit_columns(GpuPane.COLUMNS, 80)
    assert {"index", "util", "mem", "temp", "power"} <= set(gpu80)
    assert fit_columns(GpuPane.COLUMNS, 200) == tuple(c.key for c in GpuPane.COLUMNS)
    ranks80 = fit_columns(RankPane.COLUMNS, 80)
    assert {"rank", "pid", "gpu", "gpu_util", "cpu", "state"} <= set(ranks80)
    assert fit_columns(RankPane.COLUMNS, 200) == tuple(c.key for c in RankPane.COLUMNS)


def test_spare_width_goes_to_the_columns_that_grow():
    cols = (Column("a", "a", 4, 0), Column("name", "name", 16, 1, grow=24), Column("c", "c", 8, 2))
    # 4 chrome + 6 + 18 + 10 = 38: at 50 the name takes the 12 cells left, at 200 its 24
    assert column_widths(cols, ("a", "name", "c"), 50) == {"a": 4, "name": 28, "c": 8}
    assert column_widths(cols, ("a", "name", "c"), 200)["name"] == 40
    assert column_widths(cols, ("a", "c"), 200) == {"a": 4, "c": 8}


def test_the_sort_mark_is_kept_whole():
    assert header_label("util", 5, "▲") == "util▲"
    assert header_label("util", 4, "▼") == "uti▼"
    assert header_label("util", 4) == "util"


def test_spark_scales_and_marks_gaps():
    assert spark([0, 50, 100, None]) == BLOCKS[0] + BLOCKS[4] + BLOCKS[-1] + " "


def _snap(t: float, util: float) -> NodeSnapshot:
    return NodeSnapshot(timestamp=t, gpus=(GpuSample(0, "g", "u", util=util),))


def _util(snap: NodeSnapshot):
    return [(g.index, g.util) for g in snap.gpus]


def test_spark_series_is_independent_of_how_often_it_was_evaluated():
    sparse = SparkSeries(4, 1.0, _util)
    dense = SparkSeries(4, 1.0, _util)
    sparse.feed([_snap(10.0, 0), _snap(11.0, 100), _snap(12.0, 50)])
    dense.feed([_snap(10.0, 0), _snap(10.4, 0), _snap(11.0, 100), _snap(11.7, 100),
                _snap(12.0, 50), _snap(12.2, 50)])
    assert sparse.line(0, 12.5) == dense.line(0, 12.5) == " " + BLOCKS[0] + BLOCKS[-1] + BLOCKS[4]


def test_spark_series_reads_only_new_snapshots():
    series = SparkSeries(3, 1.0, _util)
    history = [_snap(1.0, 100)]
    series.feed(history)
    history.append(_snap(2.0, 0))
    series.feed(history)  # the first snapshot is not counted twice
    assert series.line(0, 2.0) == " " + BLOCKS[-1] + BLOCKS[0]
    assert series.line(0, 5.0) == "   "  # old buckets scroll out


@pytest.mark.parametrize("seconds, text", [(0.42, "0.4s"), (12.2, "12s"), (300, "5m"),
                                           (7200, "2h"), (-1, "0.0s")])
def test_age(seconds, text):
    assert age(seconds) == text


def test_source_label_kinds():
    ok = SourceState("gpus", "ok", last_reading=100.0, last_ok=100.0)
    assert source_label(ok, 100.5, 1.0, 3.0) == ("gpus ok 0.5s", "ok")
    assert source_label(ok, 104.0, 1.0, 3.0) == ("gpus stale 4.0s", "stale")
    failed = SourceState("gpus", "unavailable", last_reading=100.0)
    assert source_label(failed, 100.0, 1.0, 3.0) == ("gpus unavailable 0.0s", "failed")
    assert source_label(SourceState("logs", "ok"), 1.0, None, 3.0)[1] == "waiting"


@pytest.mark.parametrize("name", THEMES)
def test_every_theme_file_loads_with_a_full_palette(name):
    theme = load_theme(name)
    assert theme.textual.name == name
    pal = theme.palette
    colours = {pal.ok, pal.warn, pal.bad, pal.idle}
    assert len(colours) == 4  # the states are told apart
    assert theme.textual.variables["rltui-bad"] == pal.bad


def test_colorblind_theme_uses_okabe_ito_not_red_green():
    pal = load_theme("colorblind").palette
    okabe_ito = {"#e69f00", "#56b4e9", "#009e73", "#f0e442", "#0072b2", "#d55e00", "#cc79a7"}
    assert {pal.ok, pal.warn, pal.bad, pal.idle, pal.spark} <= okabe_ito
    assert pal.ok in {"#0072b2", "#56b4e9"}  # ok is blue, not green
    assert pal.bad == "#d55e00"  # bad is vermillion, not red


def test_theme_cycle_wraps():
    assert [next_theme(t) for t in THEMES] == [*THEMES[1:], THEMES[0]]
    assert next_theme("nord") == THEMES[0]


def test_bad_theme_files_are_reported():
    text = theme_text("dark").replace("  bad:", "  bda:")
    with pytest.raises(ThemeFileError, match=r"line 18: palette.bda: unknown colour"):
        parse_theme(text, "dark")
    # A shipped file must set every key (a user's file takes the rest from a shipped one).
    text = theme_text("dark").replace('  bad: "#ff5f5f"', "")
    with pytest.raises(ThemeFileError, match="missing palette.bad"):
        parse_theme(text, "dark", strict=True)
    assert set(Palette.__dataclass_fields__) == {"ok", "warn", "bad", "idle", "dim", "spark",
                                                 "info", "ranks"}


def test_only_the_ui_package_imports_textual():
    offenders = []
    for path in (ROOT / "rltui").rglob("*.py"):
        rel = path.relative_to(ROOT / "rltui").as_posix()
        if rel.startswith("ui/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(re.match(r"textual(\.|$)", n) for n in names):
                offenders.append(rel)
    assert offenders == []



def test_log_index_matches_a_log_by_pid_on_its_own_node_only():
    """Across nodes pids repeat: node-a's rankless launcher log (pid 4100) must not become the
    log of node-b's rank 4, whose process is also pid 4100."""
    from rltui.model import LogFileState, ProcInfo
    from rltui.ui.widgets.log_facts import LogIndex
    launcher = ProcInfo(pid=4100, host="node-a")
    rank4 = ProcInfo(pid=4100, rank=4, host="node-b")
    log = LogFileState(path="node-a:/job/launcher.log", pid=4100, host="node-a")
    index = LogIndex(NodeSnapshot(timestamp=0.0, procs=(launcher, rank4), logs=(log,)))
    assert index.for_proc(launcher) is log
    assert index.for_proc(rank4) is None
    assert index.rank_of_path == {}  # the launcher has no rank: the file is no rank's
