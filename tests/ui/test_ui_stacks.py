"""The stack compare screen, driven by keys, on reports classified from the real saved dumps in
fixtures/stacks/ (what ``rltui stacks DIR`` reads).

Snapshots at 80x24 and 200x60 for patterns A and B. Source lines come from a fake reader so the
pictures do not change when the demo's code does. Update with ``pytest tests/ui/test_ui_stacks.py
--snapshot-update`` and look at every changed SVG before keeping it."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App
from textual.binding import Binding

from rltui.diagnosis.stacks import classify
from rltui.diagnosis.stackview import Side
from rltui.model import ProcessDump
from rltui.parsing.pyspy import read_folder_entries
from rltui.ui.screens.stacks import StacksScreen
from rltui.ui.stacks_app import build_stacks_app
from tests.ui.helpers import plain, until_idle

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "stacks"
SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((200, 60), id="200x60")]


def report_of(folder: str, extra=(), **kwargs):
    files = [(p.name, p.read_text(errors="replace")) for p in sorted((FIXTURES / folder).iterdir())]
    dumps, problems = read_folder_entries(files)
    return classify([*dumps, *extra], **kwargs), problems


def fake_source(path: str, line: int) -> list[tuple[int, str]] | None:
    """Three made-up lines per frame, naming the file and line (no file is read)."""
    if path.startswith("<"):
        return None
    name = path.rsplit("/", 1)[-1]
    return [(line - 1, f"before()  # {name}"), (line, f"here()  # {name}:{line}"),
            (line + 1, "after()")]


def stacks_app(folder: str, source_lines=fake_source, **kwargs):
    report, problems = report_of(folder, **kwargs)
    return build_stacks_app(report, problems=problems, source_lines=source_lines, title=folder)


def screen_of(app) -> StacksScreen:
    assert isinstance(app.screen, StacksScreen)
    return app.screen


def header(pane) -> str:
    """A pane's border title as plain text."""
    return str(pane.border_title)


# -- opening ---------------------------------------------------------------------------------------

async def test_opens_on_the_divergence_with_the_classes_focused():
    app = stacks_app("collective-mismatch")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        s = screen_of(app)
        assert "Pattern B: collective mismatch" in str(s.title_bar.content)
        assert s.focused is s.class_pane.table
        assert (s.left, s.right) == (Side(member=0), Side(member=1))
        assert s.diff_pane.table.cursor_row == 5  # Trainer.train_step, other line
        assert "diverge at frame 5 (same function, other line), other function at 6" in \
            header(s.diff_pane)
        assert s.tree_pane.selected.divergence
        assert s.tree_pane.selected.text == "Trainer.train_step (trainer.py:249)"


async def test_the_divergence_row_is_on_screen_at_80x24():
    app = stacks_app("collective-mismatch")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = screen_of(app).diff_pane.table

        def shown() -> bool:
            top = int(table.scroll_y)
            return top <= 5 < top + table.size.height - 1

        # the table scrolls to the row once it has its size: on a loaded machine that can be a
        # few refreshes after the first pause (CI once looked at top 0 before it scrolled)
        await until_idle(pilot, shown, f"row 5 on screen ({table.scroll_y}, {table.size})")


# -- keys ------------------------------------------------------------------------------------------

async def test_brackets_step_the_right_hand_rank_and_braces_the_left():
    app = stacks_app("cleanup-deadlock")
    async with app.run_test(size=(80, 24)) as pilot:
        s = screen_of(app)
        assert (s.left, s.right) == (Side(member=0), Side(member=2))
        await pilot.press("right_square_bracket")
        assert s.right == Side(member=0)  # wraps around
        assert "same stack" in header(s.diff_pane)
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert s.right == Side(member=1)
        assert s.diff_pane.right_text == "rank 1 (#1)"
        await pilot.press("right_curly_bracket")
        assert s.left == Side(member=1)
        await pilot.press("left_curly_bracket", "left_curly_bracket")
        assert s.left == Side(member=2)
        assert "Compare rank 2 (#2) | rank 1 (#1)" in header(s.diff_pane)


async def test_class_cursor_moves_and_a_b_pick_the_sides():
    app = stacks_app("cleanup-deadlock")
    async with app.run_test(size=(80, 24)) as pilot:
        s = screen_of(app)
        assert s.class_pane.selected.label == "#1"
        await pilot.press("down")
        assert s.class_pane.selected.label == "#2"
        await pilot.press("a")
        assert s.left == s.view.class_side(1)
        await pilot.press("up", "b")
        assert s.right == s.view.class_side(0)
        assert "Compare class #2 (2) | class #1 (0-1)" in header(s.diff_pane)
        await pilot.press("x")
        assert (s.left, s.right) == (s.view.class_side(0), s.view.class_side(1))
        # The sides are marked in the class list.
        assert s.class_pane.table.get_cell(s.view.classes[0].key, "side").text == "L"


async def test_g_jumps_back_to_the_divergence():
    app = stacks_app("collective-mismatch")
    async with app.run_test(size=(80, 24)) as pilot:
        s = screen_of(app)
        s.diff_pane.table.focus()
        await pilot.press("home")
        assert s.diff_pane.table.cursor_row == 0
        s.tree_pane.table.focus()
        await pilot.press("home", "enter")  # collapse the top frame: the split is hidden
        assert s.tree_pane.table.row_count == 1
        await pilot.press("g")
        assert s.diff_pane.table.cursor_row == 5
        assert s.tree_pane.selected.divergence
        assert s.tree_pane.table.row_count == 10


async def test_tree_expand_and_collapse():
    app = stacks_app("collective-mismatch")
    async with app.run_test(size=(200, 60)) as pilot:
        s = screen_of(app)
        tree = s.tree_pane
        await pilot.press("tab")
        assert s.focused is tree.table
        assert tree.selected.divergence and tree.table.row_count == 10
        await pilot.press("enter")  # collapse the split node
        assert tree.selected.collapsed and tree.table.row_count == 6
        assert tree.table.get_cell(str(tree.selected.key), "frame").text.endswith(
            "+4 frames  ◆ split")
        await pilot.press("space")
        assert not tree.selected.collapsed and tree.table.row_count == 10
        await pilot.press("left")
        assert tree.selected.collapsed
        await pilot.press("right")
        assert not tree.selected.collapsed
        await pilot.press("right")  # expanded: right goes to the first child
        assert tree.selected.text == "FSDPActor.forward (trainer.py:158)"
        await pilot.press("down")  # a leaf: left goes to the parent
        assert tree.selected.text == "all_reduce (dist.py:148)"
        await pilot.press("left")
        assert tree.selected.text == "FSDPActor.forward (trainer.py:158)"


async def test_enter_on_a_class_shows_it_in_the_tree():
    app = stacks_app("cleanup-deadlock")
    async with app.run_test(size=(80, 24)) as pilot:
        s = screen_of(app)
        top = s.tree_pane.table.row_keys[0]
        s.collapsed.add(int(top))
        s.show_report(s.report)
        await pilot.press("down", "enter")
        assert s.focused is s.tree_pane.table
        assert s.tree_pane.selected.text == "destroy_process_group (dist.py:194)"


async def test_source_follows_the_diff_cursor():
    calls = []

    def source(path, line):
        calls.append((path, line))
        return fake_source(path, line)

    app = stacks_app("collective-mismatch", source_lines=source)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        s = screen_of(app)
        body = plain(s.source_pane.body.content)
        assert "here()  # trainer.py:249" in body and "here()  # trainer.py:250" in body
        assert "Source rank 0 trainer.py:249 | rank 1 trainer.py:250" in header(s.source_pane)
        s.diff_pane.table.focus()
        await pilot.press("down")
        await pilot.pause()
        assert calls[-2:] == [("rltui/demo/trainer.py", 158), ("rltui/demo/trainer.py", 169)]
        await pilot.press("home")
        await pilot.pause()
        assert "no source for <frozen runpy>:198" in plain(s.source_pane.body.content)


async def test_without_a_source_reader_there_is_no_source_pane():
    app = stacks_app("collective-mismatch", source_lines=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert screen_of(app).source_pane is None
        assert not app.screen.query("#stack-source")


async def test_zoom_and_escape_unzooms_before_closing():
    app = stacks_app("collective-mismatch")
    async with app.run_test(size=(80, 24)) as pilot:
        s = screen_of(app)
        await pilot.press("tab", "tab", "z")
        assert s.maximized is s.diff_pane
        await pilot.press("escape")
        assert s.maximized is None and app.is_running
        await pilot.press("escape")
    assert app.return_code == 0


class Host(App):
    """A plain app that opens the screen over its own (the monitor does the same)."""

    BINDINGS = [Binding("space", "pause", "Pause")]

    def __init__(self, report) -> None:
        super().__init__()
        self.report = report
        self.paused = 0

    def on_mount(self) -> None:
        self.push_screen(StacksScreen(self.report, subtitle="host"))

    def action_pause(self) -> None:
        self.paused += 1


async def test_escape_and_q_pop_the_screen_in_a_host_app():
    report, _ = report_of("collective-mismatch")
    app = Host(report)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, StacksScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, StacksScreen) and app.is_running
        app.push_screen(StacksScreen(report))
        await pilot.pause()
        await pilot.press("q")
        assert not isinstance(app.screen, StacksScreen) and app.is_running


async def test_space_outside_the_tree_reaches_the_host():
    report, _ = report_of("collective-mismatch")
    app = Host(report)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        s = screen_of(app)
        s.diff_pane.table.focus()
        await pilot.press("space")
        assert app.paused == 1
        s.tree_pane.table.focus()
        await pilot.press("space")
        assert app.paused == 1 and s.tree_pane.selected.collapsed


# -- live updates ----------------------------------------------------------------------------------

async def test_show_report_keeps_the_sides_collapsed_nodes_and_cursors():
    app = stacks_app("cleanup-deadlock")
    async with app.run_test(size=(80, 24)) as pilot:
        s = screen_of(app)
        await pilot.press("down", "b")  # class #2 on the right
        s.tree_pane.table.focus()
        await pilot.press("up", "enter")  # collapse <module>, above the split
        collapsed = set(s.collapsed)
        cursor = s.tree_pane.selected.key
        report, _ = report_of("cleanup-deadlock")
        s.show_report(report)
        await pilot.pause()
        assert s.report is report
        assert s.right == s.view.class_side(1) and s.left == Side(member=0)
        assert s.collapsed == collapsed and s.tree_pane.selected.key == cursor
        assert s.class_pane.selected.label == "#2"


async def test_show_report_falls_back_when_a_side_is_gone():
    app = stacks_app("cleanup-deadlock")
    async with app.run_test(size=(80, 24)) as pilot:
        s = screen_of(app)
        assert s.right == Side(member=2)
        report, _ = report_of("rank-exit", world_size=3)  # rank 2 has exited since
        s.show_report(report)
        await pilot.pause()
        assert s.right == Side(member=1) and s.left == Side(member=0)
        assert "same stack" in header(s.diff_pane)


# -- what has no stack -----------------------------------------------------------------------------

async def test_missing_and_unreadable_ranks_are_listed():
    denied = ProcessDump(pid=4242, rank=3, status="denied", message="ptrace: operation not "
                         "permitted")
    report, _ = report_of("rank-exit", extra=[denied], world_size=4)
    app = build_stacks_app(report, problems=["rank9.txt: not a py-spy dump"],
                           source_lines=fake_source)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        s = screen_of(app)
        text = plain(s.summary_pane.body.content)
        assert "Missing (exited, no stack): rank 2" in text
        assert "Unreadable (alive, no stack): pid 4242 (rank 3) denied: ptrace" in text
        assert "Reading the dumps (1 problem): rank9.txt: not a py-spy dump" in text
        table = s.class_pane.table
        assert table.get_cell("missing", "ranks").text == "2"
        assert table.get_cell("missing", "state").text == "exited"
        assert table.get_cell("unreadable:denied", "ranks").text == "3"
        # Neither row can be put on a side of the diff.
        s.class_pane.table.focus()
        await pilot.press("end", "a")
        assert s.left == Side(member=0)


async def test_a_process_of_no_rank_that_crashed_is_listed_missing_by_pid():
    """Dumps of processes with no rank (faulthandler in logs with no rank label), one of
    them a crash: the compare screen lists pid 102 as missing (exited), not only the title."""
    from rltui.model import CRASHED, Frame, ThreadStack
    wait = (Frame("all_reduce", "torch/distributed/distributed_c10d.py", 2501),
            Frame("train", "train.py", 40), Frame("<module>", "train.py", 90))
    dumps = [ProcessDump(pid=p, threads=(ThreadStack(thread_id=1, name="MainThread", status="idle",
                                                     frames=wait),)) for p in (100, 101)]
    crash = ProcessDump(pid=102, status=CRASHED, message="Fatal Python error: Segmentation fault",
                        threads=(ThreadStack(thread_id=1, name="MainThread", status="idle",
                                             frames=wait),))
    report = classify([*dumps, crash])
    app = build_stacks_app(report, source_lines=fake_source)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        s = screen_of(app)
        assert "Missing (exited, no stack): pid 102" in plain(s.summary_pane.body.content)
        assert s.class_pane.table.get_cell("missing", "ranks").text == "pid 102"


async def test_a_rank_whose_dump_was_cut_short_is_compared_by_its_known_frames():
    """Rank 3's file ends mid-line: beside rank 0 its lost frames are marked, not taken for
    other functions, and the source pane says what the marker is (no file to read)."""
    from rltui.model import replace
    from rltui.parsing.pyspy import CUT, parse_any
    body = ('Thread {pid} (idle): "MainThread"\n'
            "    all_reduce (torch/distributed/distributed_c10d.py:2501)\n"
            "    train_step (train.py:50)\n    train (train.py:30)\n    main (train.py:10)\n"
            "    <module> (train.py:100)\n")
    dumps = []
    for rank in range(4):
        text = f"Process {900 + rank}: python train.py\n\n" + body.format(pid=900 + rank)
        if rank == 3:
            text = text[:text.index("    main (") + 7]
        found, _ = parse_any(text, f"rank{rank}.txt")
        dumps.append(replace(found[0], rank=rank))
    app = build_stacks_app(classify(dumps), source_lines=fake_source)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        s = screen_of(app)
        assert [c.members for c in s.view.report.classes] == [(0, 1, 2, 3)]
        await pilot.press("right_square_bracket", "right_square_bracket")
        await pilot.pause()
        assert (s.left, s.right) == (Side(member=0), Side(member=3))
        assert "same where both are known" in header(s.diff_pane)
        table = s.diff_pane.table
        assert table.get_cell("0", "mark").text == "?"
        assert s.diff_pane.diff.rows[0].right.name == CUT
        table.focus()
        await pilot.press("home")
        await pilot.pause()
        source = plain(s.source_pane.body.content)
        assert "cut short" in source and "no source for" not in source


async def test_theme_change_repaints_with_the_new_palette():
    app = stacks_app("collective-mismatch")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("t")
        assert app.theme == "light"
        s = screen_of(app)
        first = s.diff_pane.table.get_cell("5", "i")
        assert first.text == "▶5" and app.palette.warn in first.style


def test_every_binding_has_an_id_and_a_description():
    ids = set()
    for b in StacksScreen.BINDINGS:
        assert isinstance(b, Binding)
        assert b.id and b.id.startswith("rltui.stacks.") and b.description, b
        ids.add(b.id)
    assert len(ids) == len(StacksScreen.BINDINGS)


# -- snapshots -------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", SIZES)
def test_snapshot_pattern_b(snap_compare, size):
    """Two ranks calling all_reduce from FSDPActor.forward (rank 0) and FSDPActor.backward
    (rank 1). Must be visible: the title " Pattern B: collective mismatch " (reverse, warn: one
    sample) with "Ranks wait in different collectives or call si..."; the start of the
    explanation ("All ranks are inside the loop but wait at different places ..."); the class
    list "#1 0 1 unknown L all_reduce ← …DPActor.forward (trainer.py:158)" and "#2 1 1 unknown
    R all_reduce ← …PActor.backward (trainer.py:169)"; the merged tree scrolled to "▾
    Trainer.train_step (trainer.py:249)  ◆ split" (bold, warn) with "├╴▾ FSDPActor.forward"
    (rank 0, L) below it; the diff "Compare rank 0 (#1) | rank 1 (#2) · diverge at frame 5 (same
    function, other line)..." scrolled to its row "▶5" (bold, warn) "~" between
    trainer.py:249 and trainer.py:250, and row 6 "≠" (bad colour) forward vs backward; the
    source pane "Source rank 0 trainer.py:249 | rank 1 trainer.py:250" with the fake lines
    "here()  # trainer.py:249" and ":250" marked "▶"; the footer (esc Close, [ ] Right rank,
    g Divergence, a Class left, b Class right, z Zoom, ? Help). At 200x60 also the whole
    explanation, "One sample only: dump again ...", "1 sample  collective-mismatch" in the
    title, the whole tree beside the diff (both all_reduce leaves, "└╴▾ FSDPActor.backward"
    marked R), all 8 diff rows and the title "... other function at 6"."""
    assert snap_compare(stacks_app("collective-mismatch"), terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_snapshot_pattern_a(snap_compare, size):
    """Ranks 0-1 wait in recv_object_list while rank 2 sits in destroy_process_group from
    Trainer.__exit__. Must be visible: the title " Pattern A: cleanup deadlock " with "Cleanup
    deadlock: rank 2 in teardown, ranks 0-1 w..." and the start of the explanation ("rank 2
    sits in cleanup in destroy_process_group ..."); the class list "#1 0-1 2 unknown L
    recv_object_list ← …inference (trainer.py:190)" and "#2 2 1 unknown R [cleanup]
    destroy_process_group ← FSDPActor.d…" (warn colour); the tree's split "main (rank.py:85)  ◆
    split" (bold, warn) above "├╴▾ Trainer.train" (0-1); the diff "Compare rank 0 (#1) | rank 2
    (#2) · diverge at frame 3 (same function, other line) ..." with "▶3" on main (rank.py:85)
    "~" main (rank.py:84), then row 4 "≠" Trainer.train vs Trainer.__exit__ (bad colour); the
    source pane "Source rank 0 rank.py:85 | rank 2 rank.py:84" with the fake lines 85 and 84
    marked "▶". At 200x60 also the whole explanation and "One sample only: dump again ...",
    the class rows in full ("recv_object_list ← PipelineSchedule._shape_inference
    (trainer.py:190)", "[cleanup] destroy_process_group ← FSDPActor.destroy (trainer.py:174)"),
    both branches of the tree down to recv_object_list (0-1, L) and destroy_process_group (2,
    R), and all 9 diff rows, rows 4-7 "≠" and row 8 "<" (recv_object_list, only rank 0's
    side has a 9th frame)."""
    assert snap_compare(stacks_app("cleanup-deadlock"), terminal_size=size)
