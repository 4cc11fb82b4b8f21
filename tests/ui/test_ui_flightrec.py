"""The compare screen with the Flight Recorder read: each rank's pending collective beside its
stack, the title saying who decided the pattern, and ``f``, the groups with each rank's sequence
ids and the findings.

The report is the 4-rank cross-group ordering deadlock of ``flightrec_case``: py-spy and Flight
Recorder dumps shaped like the gloo job's, read by rltui's own parsers and diagnosis. Snapshots
at 80x24 and 200x60; update with ``pytest tests/ui/test_ui_flightrec.py --snapshot-update`` and
look at every changed SVG before keeping it."""

from __future__ import annotations

import pytest

from rltui.diagnosis.stackview import Side
from rltui.model import replace
from rltui.ui.screens.flightrec import FlightRecorderScreen
from rltui.ui.screens.stacks import StacksScreen
from rltui.ui.stacks_app import build_stacks_app
from tests.ui.flightrec_case import cross_group_report
from tests.ui.helpers import headers, plain
from tests.ui.test_ui_stacks import fake_source, report_of

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((200, 60), id="200x60")]
DEFAULT_PG = "all_reduce #4 of default_pg"
GROUP_1 = "all_reduce #4 of group 1"


def fr_app():
    return build_stacks_app(cross_group_report(), source_lines=fake_source, title="cross-group")


def screen_of(app) -> StacksScreen:
    assert isinstance(app.screen, StacksScreen)
    return app.screen


def rows_of(table) -> dict[str, dict[str, str]]:
    """Every row of a table as {column: text}, by row key."""
    return {k: {c: table.get_cell(k, c).text for c in table.columns} for k in table.row_keys}


def footer_keys(screen) -> set[str]:
    return {b.binding.action for b in screen.active_bindings.values() if b.enabled
            and b.binding.show}


# -- the compare screen ----------------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
async def test_each_rank_s_collective_beside_its_stack(size):
    """All four ranks share one stack (class #1 "2 kinds:"); under it one row per collective:
    ranks 0-1 "all_reduce #4 of default_pg", ranks 2-3 "all_reduce #4 of group 1" (with the
    tensors and the age where the width allows). The diff compares rank 0 with rank 2 (the first
    rank in another collective), and its headers name each side's collective."""
    app = fr_app()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        s = screen_of(app)
        table = s.class_pane.table
        assert "collective" in table.columns
        rows = list(rows_of(table).values())
        assert [(r["class"], r["ranks"], r["n"]) for r in rows] == \
            [("#1", "0-3", "4"), ("├╴", "0-1", "2"), ("└╴", "2-3", "2")]
        assert rows[0]["collective"] == "2 kinds:"
        assert rows[1]["collective"].startswith(DEFAULT_PG)
        assert rows[2]["collective"].startswith(GROUP_1)
        wide = size[0] >= 120
        assert (rows[1]["collective"] == f"{DEFAULT_PG} [4] Float, 12 s") is wide
        # the sides: rank 0 (default_pg, L) against rank 2 (group 1, R)
        assert (s.left, s.right) == (Side(member=0), Side(member=2))
        assert (rows[1]["side"], rows[2]["side"]) == ("L", "R")
        left, right = (headers(s.diff_pane.table)[c] for c in ("left", "right"))
        if wide:
            assert (left, right) == (f"rank 0 (#1) · {DEFAULT_PG}", f"rank 2 (#1) · {GROUP_1}")
        else:
            assert (left, right) == ("rank 0 · #4 of default_pg", "rank 2 · #4 of group 1")
        # a collective's row stands for its class: a puts the class on the left
        table.focus()
        await pilot.press("down", "a")
        assert s.left.is_class


async def test_the_title_says_the_flight_recorder_decided():
    """The verdict line: " Pattern B: collective mismatch " then "(Flight Recorder; stacks
    alone: C)" and the title without its own "(Flight Recorder)"."""
    app = fr_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        title = plain(screen_of(app).title_bar.content)
        assert title.startswith(" Pattern B: collective mismatch  (Flight Recorder; stacks "
                                "alone: C) Process groups entered in opposite orders  1 sample")


async def test_a_rank_with_nothing_pending_and_one_without_a_dump():
    """Rank 3 left no Flight Recorder dump and rank 2's dump holds nothing pending: their
    collectives read "no dump" and "nothing pending" (dimmed)."""
    report = cross_group_report()
    fa = report.flight_recorder
    waits = tuple((r, t) for r, t in fa.waits if r < 2)
    dumps = tuple(d for d in fa.dumps if d.rank != 3)
    report = replace(report, flight_recorder=replace(fa, waits=waits, dumps=dumps))
    app = build_stacks_app(report, source_lines=fake_source)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        table = screen_of(app).class_pane.table
        texts = [(r["ranks"], r["collective"]) for r in rows_of(table).values()]
        assert texts == [("0-3", "3 kinds:"), ("0-1", f"{DEFAULT_PG} [4] Float, 12 s"),
                         ("2", "nothing pending"), ("3", "no dump")]
        pal = app.palette
        assert table.get_cell(table.row_keys[3], "collective").style == pal.dim


async def test_without_the_flight_recorder_no_column_and_no_f():
    """A report with no Flight Recorder reading: the class list has no collective column, the
    diff's headers are the sides alone, the footer has no "f Groups" and f does nothing."""
    report, _ = report_of("collective-mismatch")
    app = build_stacks_app(report, source_lines=fake_source)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        s = screen_of(app)
        assert "collective" not in s.class_pane.table.columns
        assert headers(s.diff_pane.table)["left"] == "rank 0 (#1)"
        assert "flight_recorder" not in footer_keys(s)
        await pilot.press("f")
        assert app.screen is s


# -- the groups ------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
async def test_f_shows_the_groups_with_the_ranks_behind_and_the_findings(size):
    """f on the compare screen: per (group, rank) the last completed and enqueued sequence ids
    and the pending op; in default_pg ranks 2,3 never entered #4 ("◀ behind"), in group 1 ranks
    0,1; above the table the cross-group finding. f again (and escape) goes back."""
    app = fr_app()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        s = screen_of(app)
        assert "flight_recorder" in footer_keys(s)
        await pilot.press("f")
        await pilot.pause()
        fr = app.screen
        assert isinstance(fr, FlightRecorderScreen)
        assert fr.focused is fr.groups.table
        rows = rows_of(fr.groups.table)
        table = [(r["group"], r["rank"], r["completed"], r["enqueued"], r["pending"], r["mark"])
                 for r in rows.values()]
        assert table == [
            ("default_pg", "0", "#3", "#4", "all_reduce #4", ""),
            ("default_pg", "1", "#3", "#4", "all_reduce #4", ""),
            ("default_pg", "2", "#3", "#3", "nothing pending", "◀ behind"),
            ("default_pg", "3", "#3", "#3", "nothing pending", "◀ behind"),
            ("group 1", "0", "#3", "#3", "nothing pending", "◀ behind"),
            ("group 1", "1", "#3", "#3", "nothing pending", "◀ behind"),
            ("group 1", "2", "#3", "#4", "all_reduce #4", ""),
            ("group 1", "3", "#3", "#4", "all_reduce #4", ""),
        ]
        assert rows["0:0"]["age"] == "12s"
        findings = plain(fr.findings.body.content)
        assert findings.replace("\n", " ").startswith(
            "cross-group-order: ranks 0-1 wait in all_reduce #4 of default_pg, ranks 2-3 wait "
            "in all_reduce #4 of group 1: the ranks enter the groups in opposite orders")
        assert "Pattern B: collective mismatch (Flight Recorder; stacks alone: C)" in \
            plain(fr.title_bar.content, width=300)
        await pilot.press("f")
        await pilot.pause()
        assert app.screen is s
        await pilot.press("f", "z")
        await pilot.pause()
        assert app.screen.maximized is not None
        await pilot.press("escape")
        assert app.screen.maximized is None and isinstance(app.screen, FlightRecorderScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is s


async def test_f_with_dumps_but_no_group_says_why():
    """The dumps were looked for but none could be read: no collective column (no group), f
    still opens the groups view, which says what was not read and that nothing was found."""
    report = cross_group_report()
    fa = replace(report.flight_recorder, groups=(), findings=(), waits=(), pattern=None,
                 problems=("fr_trace_rank_0: not a Flight Recorder dump (KeyError)",))
    report = replace(report, flight_recorder=fa)
    app = build_stacks_app(report, source_lines=fake_source)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert "collective" not in screen_of(app).class_pane.table.columns
        await pilot.press("f")
        await pilot.pause()
        fr = app.screen
        assert isinstance(fr, FlightRecorderScreen)
        assert fr.groups.table.row_count == 0
        text = plain(fr.findings.body.content).replace("\n", " ")
        assert "No finding" in text
        assert "Not read (1): fr_trace_rank_0: not a Flight Recorder dump (KeyError)" in text


# -- snapshots -------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
def test_snapshot_flight_recorder_compare(snap_compare, size):
    """The cross-group deadlock on the compare screen. Must be visible: the title " Pattern B:
    collective mismatch " (reverse, bad colour: confirmed by the 12 s wait) then "(Flight
    Recorder; stacks alone: C)" and "Process groups entered in opposite orders"; the explanation
    starting "Flight Recorder: ranks 0-1 wait in all_reduce #4 of default_pg, ranks 2-3 wait in
    all_reduce #4 of group 1"; the class list "Classes (1)" with a "collective" column: "#1 0-3 4
    unknown LR all_reduce ← ..." and "2 kinds:" (bold, warn), then "├╴ 0-1 2 L all_reduce #4 of
    default_pg" and "└╴ 2-3 2 R all_reduce #4 of group 1"; the merged tree (one path, 0-3 LR);
    the diff "Compare rank 0 (#1) | rank 2 (#1) · same stack" with the headers "rank 0 · #4 of
    default_pg" and "rank 2 · #4 of group 1" and the deepest frame all_reduce
    (distributed_c10d.py:2806); the footer starting "esc Close f Groups [ ] Right rank". At
    200x60 also the collective column headed "collective (Flight Recorder)" with "... [4]
    Float, 12 s", the headers "rank 0 (#1) · all_reduce #4 of default_pg" and "rank 2 (#1) ·
    all_reduce #4 of group 1", the whole explanation ("The stacks alone read pattern C; the
    Flight Recorder decides.") and the footer's "z Zoom" and "? Help"."""
    assert snap_compare(fr_app(), terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_snapshot_flight_recorder_groups(snap_compare, size):
    """f on the compare screen: the title " Flight Recorder " (reverse) "2 groups, 4 dumps"
    "Pattern B: collective mismatch (Flight Recorder; stacks alone: C)" (cut at 80); the
    finding "cross-group-order:" (bold, bad colour) "ranks 0-1 wait in all_reduce #4 of
    default_pg, ranks 2-3 wait in all_reduce #4 of group 1: ... which is why the stacks look
    alike." in full; the table "Groups (2) · each rank's sequence ids" with the columns group,
    rank, completed, enqueued, pending (oldest), for: default_pg ranks 0,1 "#3 #4 all_reduce #4
    12s", ranks 2,3 "#3 #3 nothing pending ◀ behind" (bold, bad colour); group 1 the other way
    round (ranks 0,1 behind, ranks 2,3 pending all_reduce #4); the group's name bold on its
    first row, dimmed below; the footer "esc Close z Zoom ? Help"."""
    assert snap_compare(fr_app(), terminal_size=size, press=["f"])
