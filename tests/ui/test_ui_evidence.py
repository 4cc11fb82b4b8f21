"""Evidence one key away: enter on a symptom focuses its evidence, up/down move over the lines
that name something, enter opens it (the log at the line, the class in the compare screen, the
source at the frame, the rank's row). Replays of recorded scenarios (tests/fakes/scenarios.py)
and a live app fed by fakes with real saved py-spy dumps."""

from __future__ import annotations

from rltui.diagnosis.evidence import FRAME, LOG_LINE, RANK, STACK_CLASS
from rltui.ui.screens import LogFileScreen
from rltui.ui.screens.stacks import StacksScreen
from tests.fakes.scenarios import LOG_DIR
from tests.fakes.sources import FakeStackSource
from tests.ui.helpers import dump_now, plain
from tests.ui.test_ui_stack_keys import make


async def open_symptom(app, pilot, symptom_id: str):
    """Highlight the symptom and press enter on it: the pane zooms, the evidence has focus."""
    pane = app.main_screen.symptoms
    index = [s.id for s in pane.symptoms].index(symptom_id)
    pane.options.focus()
    pane.options.highlighted = index
    await pilot.press("enter")
    await pilot.pause()
    assert pane.evidence_box.has_focus
    return pane


async def to_line(pilot, pane, kind: str) -> int:
    """Down until the cursor is on the first line of ``kind``; its evidence index."""
    want = next(k for k in pane.selected.evidence_links if k.kind == kind)
    while pane.evidence_cursor != want.evidence:
        before = pane.evidence_cursor
        await pilot.press("down")
        assert pane.evidence_cursor != before, "the cursor did not reach the line"
    return want.evidence


async def test_enter_on_a_traceback_line_opens_the_log_at_that_line(replay_app):
    app = replay_app("with_logs")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        pane = await open_symptom(app, pilot, "rank-exited")
        line = await to_line(pilot, pane, LOG_LINE)
        assert pane.selected.evidence[line].startswith(
            f"rank 3's last error: {LOG_DIR}/rank3.log:29-34: RuntimeError")
        detail = plain(pane.detail.content)
        assert "enter opens the log at line 29" in detail and "▶ rank 3's last error" in detail
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, LogFileScreen) and screen.label == "rank 3"
        await pilot.pause()
        entry = screen.log_view.buffer.at(screen.log_view.lines.cursor)
        assert (entry.path, entry.line_no) == (f"{LOG_DIR}/rank3.log", 29)
        assert entry.text.startswith("Traceback")
        assert screen.log_view.lines.visible(screen.log_view.lines.cursor)
        assert not screen.log_view.follow


async def test_enter_on_a_departed_rank_selects_its_row(replay_app):
    app = replay_app("with_logs")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        ranks = app.main_screen.ranks
        ranks.table.cursor_row = 0
        pane = await open_symptom(app, pilot, "rank-exited")
        await to_line(pilot, pane, RANK)
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is app.main_screen and app.main_screen.maximized is None
        assert app.main_screen.focused is ranks.table
        key = ranks.table.row_keys[ranks.table.cursor_row]
        assert ranks._items[key].rank == 3


async def test_enter_on_a_class_opens_it_in_the_compare_screen(replay_app):
    app = replay_app("cleanup_deadlock_with_stacks", paused=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        await pilot.pause()
        pane = await open_symptom(app, pilot, "hang-cleanup-deadlock")
        first = await to_line(pilot, pane, STACK_CLASS)
        await pilot.press("down")  # the second class: rank 2 in destroy_process_group
        assert pane.evidence_cursor == first + 1
        assert pane.selected.evidence[first + 1].startswith("rank 2: destroy_process_group")
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, StacksScreen)
        row = screen.class_pane.selected
        assert (row.label, row.members) == ("#2", (2,))
        assert screen.focused is screen.class_pane.table
        assert "destroy_process_group" in screen.tree_pane.selected.frame.name


async def test_enter_on_the_divergence_opens_the_source_at_the_frame(replay_app):
    app = replay_app("cleanup_deadlock_with_stacks", paused=True)
    app.source_lines = lambda path, line: [(n, f"line {n} of {path}") for n in
                                           range(line - 2, line + 3)]
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        await pilot.pause()
        pane = await open_symptom(app, pilot, "hang-cleanup-deadlock")
        line = await to_line(pilot, pane, FRAME)
        link = next(k for k in pane.selected.evidence_links if k.evidence == line)
        assert (link.path.rsplit("/", 1)[-1], link.line, link.name) == ("rank.py", 85, "main")
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, StacksScreen)
        row = screen.diff_pane.selected
        assert (row.left.filename, row.left.line) == (link.path, link.line)
        assert screen.focused is screen.diff_pane.table
        source = screen.source_pane
        assert "rank.py:85" in str(source.border_title)
        assert f"line 85 of {link.path}" in plain(source.body.content)


async def test_live_a_class_of_a_dump_taken_now(tmp_path):
    """Live: `d` dumps the fakes' real saved stacks; the new symptom's class opens."""
    app = make(tmp_path, FakeStackSource("collective-mismatch"))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.wait_for_evaluation(after=0)
        view = await dump_now(app, pilot, lambda v: any(
            s.id.startswith("hang-") for s in v.diagnosis.symptoms))
        await pilot.pause()
        hang = next(s for s in view.diagnosis.symptoms if s.id.startswith("hang-"))
        pane = await open_symptom(app, pilot, hang.id)
        line = await to_line(pilot, pane, STACK_CLASS)
        link = next(k for k in pane.selected.evidence_links if k.evidence == line)
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, StacksScreen)
        assert screen.class_pane.selected.members == link.ranks
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.main_screen


async def test_the_cursor_stops_at_the_last_line_and_escape_goes_back(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        pane = await open_symptom(app, pilot, "rank-exited")
        linked = sorted(k.evidence for k in pane.selected.evidence_links)
        await pilot.press("down", "down", "down", "down")  # stops at the last line that opens
        assert pane.evidence_cursor == linked[-1]
        await pilot.press("escape")  # the zoom first, as everywhere
        assert app.main_screen.maximized is None and pane.evidence_box.has_focus
        await pilot.press("escape")
        assert app.main_screen.focused is pane.options
        await pilot.pause()
        assert "▶" not in plain(pane.detail.content)  # the cursor shows only while focused
