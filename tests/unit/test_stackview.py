"""The compare screen's view model (pure): class rows, the flattened tree, the diff, labels.

Reports are classified from the real saved dumps in fixtures/stacks/ (what ``rltui stacks DIR``
reads); the diff's corner cases use hand-made frames.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rltui.diagnosis.stacks import classify
from rltui.diagnosis.stackview import (
    DIFFER,
    LEFT_ONLY,
    LINE,
    LOST,
    RIGHT_ONLY,
    SAME,
    Side,
    StackView,
    class_labels,
    class_rows,
    diff_frames,
    divergence_keys,
    fit_frame,
    flatten,
    frame_text,
    members_text,
    path_keys,
    pattern_name,
)
from rltui.model import Frame, ProcessDump, ThreadStack
from rltui.parsing.pyspy import CUT, read_folder_entries
from tests.importcheck import forbidden_loaded

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "stacks"


def report_of(folder: str, **kwargs):
    files = [(p.name, p.read_text(errors="replace")) for p in sorted((FIXTURES / folder).iterdir())]
    dumps, _ = read_folder_entries(files)
    return classify(dumps, **kwargs)


def f(name: str, file: str = "app/train.py", line: int = 1) -> Frame:
    return Frame(name=name, filename=file, line=line)


# -- class rows and labels -------------------------------------------------------------------------

def test_class_rows_of_pattern_b_name_the_caller_of_the_shared_collective():
    rows = class_rows(report_of("collective-mismatch"))
    assert [(r.label, r.ranks, r.count, r.state) for r in rows] == [
        ("#1", "0", 1, "unknown"), ("#2", "1", 1, "unknown")]
    # Both wait in all_reduce: only the caller tells them apart.
    assert rows[0].where == "all_reduce ← FSDPActor.forward (trainer.py:158)"
    assert rows[1].where == "all_reduce ← FSDPActor.backward (trainer.py:169)"
    assert all(r.waiting and not r.teardown for r in rows)


def test_class_rows_of_pattern_a_mark_the_cleanup_class():
    rows = class_rows(report_of("cleanup-deadlock"))
    assert [(r.label, r.ranks, r.count) for r in rows] == [("#1", "0-1", 2), ("#2", "2", 1)]
    assert rows[1].teardown
    assert rows[1].where.startswith("[cleanup] destroy_process_group ← FSDPActor.destroy")


def test_class_labels_map_every_rank_to_its_class():
    assert class_labels(report_of("cleanup-deadlock")) == {0: "#1", 1: "#1", 2: "#2"}
    assert class_labels(report_of("stall")) == {0: "#1", 1: "#1", 2: "#1"}


def test_class_labels_leave_out_processes_without_a_rank():
    report = classify([ProcessDump(pid=812, threads=(ThreadStack(1, "MainThread", "idle",
                                                                 (f("main"),)),))])
    assert class_labels(report) == {}
    assert class_rows(report)[0].ranks == "pid 812"


def test_members_text_compacts_ranks_and_names_pids():
    assert members_text([0, 1, 2, 3, 5]) == "0-3,5"
    assert members_text([4, -1 - 812]) == "4 pid 812"
    assert members_text([-1 - p for p in (1, 2, 3, 4, 5)]) == "pids 1,2,3,4,…"


def test_pattern_names():
    assert pattern_name(report_of("collective-mismatch")) == "Pattern B: collective mismatch"
    assert pattern_name(report_of("cleanup-deadlock")) == "Pattern A: cleanup deadlock"
    assert pattern_name(report_of("stall")) == "Pattern C: same collective"
    # nobody in cleanup, the others wait for a rank that is gone: no "cleanup deadlock"
    assert pattern_name(report_of("stall", missing_ranks=[3])) == "Pattern A: a rank left"
    assert pattern_name(classify([])) == "No stacks"
    moving = [[ProcessDump(1, 0, (ThreadStack(1, "MainThread", "active", (f("a"),)),))],
              [ProcessDump(1, 0, (ThreadStack(1, "MainThread", "active", (f("b"),)),))]]
    assert pattern_name(classify(moving)) == "No hang"


# -- the tree --------------------------------------------------------------------------------------

def test_tree_rows_show_the_split_and_the_branches_with_guides():
    view = StackView(report_of("collective-mismatch"))
    rows = view.tree_rows()
    texts = [(r.depth, r.prefix, r.text, r.ranks) for r in rows]
    assert texts[0] == (0, "", "_run_module_as_main (<frozen runpy>:198)", "0-1")
    split = next(r for r in rows if r.divergence)
    assert split.text == "Trainer.train_step (trainer.py:249)"
    assert texts[6:] == [
        (6, "├╴", "FSDPActor.forward (trainer.py:158)", "0"),
        (7, "│ ", "all_reduce (dist.py:148)", "0"),
        (6, "└╴", "FSDPActor.backward (trainer.py:169)", "1"),
        (7, "  ", "all_reduce (dist.py:148)", "1"),
    ]
    # A chain of single children keeps one indentation.
    assert all(r.prefix == "" for r in rows[:6])


def test_collapsing_a_node_hides_its_subtree_and_counts_it():
    view = StackView(report_of("collective-mismatch"))
    rows = view.tree_rows()
    main = next(r for r in rows if r.frame.name == "main")
    shut = view.tree_rows({main.key})
    assert [r.text for r in shut][-1] == "main (rank.py:87)"
    assert shut[-1].collapsed and shut[-1].hidden == 6
    assert len(shut) == 4
    # A leaf in the collapsed set is drawn as a leaf: there is nothing to hide.
    leaf = rows[-1]
    assert not view.tree_rows({leaf.key})[-1].collapsed


def test_node_keys_survive_a_new_report_of_the_same_job():
    first = StackView(report_of("collective-mismatch")).tree_rows()
    second = StackView(report_of("collective-mismatch")).tree_rows()
    assert [r.key for r in first] == [r.key for r in second]
    assert len({r.key for r in first}) == len(first)  # the two all_reduce nodes differ


def test_class_path_reaches_its_deepest_node():
    view = StackView(report_of("cleanup-deadlock"))
    keys = {r.key: r for r in view.tree_rows()}
    deepest = keys[view.class_path(1)[-1]]
    assert deepest.frame.name == "destroy_process_group" and deepest.ranks == "2"


def test_divergence_keys_end_at_the_split_and_are_empty_without_one():
    view = StackView(report_of("cleanup-deadlock"))
    rows = {r.key: r for r in view.tree_rows()}
    assert rows[view.divergence_key].text == "main (rank.py:85)"
    assert divergence_keys(StackView(report_of("stall")).tree.root) == []


def test_a_deep_chain_flattens_without_recursion():
    frames = tuple(f(f"recurse{i}") for i in range(3000))
    report = classify([ProcessDump(1, 0, (ThreadStack(1, "MainThread", "idle", frames),))])
    rows = flatten(report.tree.root)
    assert len(rows) == 3000 and rows[-1].depth == 2999
    assert path_keys(tuple(reversed(frames)))[-1] == rows[-1].key


# -- the diff --------------------------------------------------------------------------------------

def test_diff_of_pattern_b_finds_the_line_then_the_function():
    view = StackView(report_of("collective-mismatch"))
    left, right = view.default_sides()
    assert (left, right) == (Side(member=0), Side(member=1))
    d = view.diff(left, right)
    assert [r.kind for r in d.rows] == [SAME] * 5 + [LINE, DIFFER, SAME]
    assert d.first == 5 and d.first_function == 6
    assert (d.rows[5].left.line, d.rows[5].right.line) == (249, 250)


def test_diff_aligns_frames_shared_again_below_the_split():
    left = [f("main"), f("train"), f("cleanup"), f("close"), f("barrier", "dist.py")]
    right = [f("main"), f("train"), f("step"), f("barrier", "dist.py")]
    d = diff_frames(left, right)
    assert [(r.left.name if r.left else None, r.right.name if r.right else None, r.kind)
            for r in d.rows] == [
        ("main", "main", SAME), ("train", "train", SAME), ("cleanup", "step", DIFFER),
        ("close", None, LEFT_ONLY), ("barrier", "barrier", SAME)]
    assert d.first == 2 == d.first_function


def test_diff_of_a_shorter_stack_ends_in_one_sided_rows():
    d = diff_frames([f("main")], [f("main"), f("work"), f("wait")])
    assert [r.kind for r in d.rows] == [SAME, RIGHT_ONLY, RIGHT_ONLY] and d.first == 1


def test_diff_of_equal_stacks_has_no_divergence():
    d = diff_frames([f("main", line=3)], [f("main", line=3)])
    assert d.identical and d.first is None and d.first_function is None
    assert diff_frames([], []).rows == ()


def test_diff_compares_files_without_their_site_packages_prefix():
    a = f("all_reduce", "/opt/env-a/lib/python3.11/site-packages/torch/distributed/c10d.py", 9)
    b = f("all_reduce", "/home/u/env-b/lib/python3.11/site-packages/torch/distributed/c10d.py", 9)
    assert diff_frames([a], [b]).rows[0].kind == SAME


def test_a_stack_cut_short_is_compared_by_its_known_frames():
    # The right one's dump was cut short in ``main``: what it lost is unknown, not another
    # function; below, the two are the same.
    left = [f("<module>"), f("main"), f("train"), f("step"), f("all_reduce", "dist.py")]
    right = [Frame(CUT, "", 0), f("train"), f("step"), f("all_reduce", "dist.py")]
    d = diff_frames(left, right)
    assert [(r.left.name if r.left else None, r.right.name if r.right else None, r.kind)
            for r in d.rows] == [
        ("<module>", CUT, LOST), ("main", None, LOST), ("train", "train", SAME),
        ("step", "step", SAME), ("all_reduce", "all_reduce", SAME)]
    assert d.first is None and d.first_function is None
    # the same, sides swapped; a difference below the cut is one
    swapped = [*right[:-1], f("barrier", "dist.py")]
    d = diff_frames(swapped, left)
    assert [r.kind for r in d.rows] == [LOST, LOST, SAME, SAME, DIFFER] and d.first == 4
    # the cut side's outermost known frame paired with another function: the marker alone
    d = diff_frames([f("main"), f("x"), f("wait")], [Frame(CUT, "", 0), f("y"), f("wait")])
    assert [r.kind for r in d.rows] == [LOST, DIFFER, LEFT_ONLY, SAME] and d.first == 1
    assert d.rows[0].left is None and d.rows[0].right.name == CUT


def test_a_huge_diff_is_compared_index_by_index():
    left = [f("main")] + [f(f"a{i}") for i in range(3000)]
    right = [f("main")] + [f(f"b{i}") for i in range(3000)]
    d = diff_frames(left, right)
    assert len(d.rows) == 3001 and d.first == 1


# -- sides -----------------------------------------------------------------------------------------

def test_stepping_walks_the_ranks_and_wraps():
    view = StackView(report_of("cleanup-deadlock"))
    side = Side(member=1)
    assert view.step(side, 1) == Side(member=2)
    assert view.step(Side(member=2), 1) == Side(member=0)
    assert view.step(Side(member=0), -1) == Side(member=2)
    cls = view.class_side(1)  # rank 2's class: the next stop is its own first member
    assert view.step(cls, 1) == Side(member=2)
    assert view.step(cls, -1) == Side(member=1)


def test_a_class_side_shows_its_signature_and_text():
    view = StackView(report_of("cleanup-deadlock"))
    side = view.class_side(0)
    assert view.side_text(side) == "class #1 (0-1)"
    assert view.frames_of(side)[-1].name == "recv_object_list"
    assert view.side_text(Side(member=2)) == "rank 2 (#2)"
    assert view.valid(side) and not view.valid(Side(member=9))


def test_a_rank_side_shows_its_own_lines():
    view = StackView(report_of("cleanup-deadlock"))
    assert [fr.line for fr in view.frames_of(Side(member=2))][3] == 84  # main, in its __exit__


# -- text ------------------------------------------------------------------------------------------

def test_fit_frame_keeps_the_file_and_line():
    frame = f("Trainer.train_step", "rltui/demo/trainer.py", 249)
    assert frame_text(frame) == "Trainer.train_step (trainer.py:249)"
    assert fit_frame(frame, 80) == "Trainer.train_step (trainer.py:249)"
    assert fit_frame(frame, 30) == "…r.train_step (trainer.py:249)"
    assert len(fit_frame(frame, 30)) == 30
    assert fit_frame(frame, 12) == "Trainer.tra…"  # no room for a name: cut at the end
    assert fit_frame(frame, 40, lead="all_reduce ← ").startswith("all_reduce ← …")
    assert frame_text(Frame("clone", "libc.so.6")) == "clone (libc.so.6)"


@pytest.mark.parametrize("folder", ["stall", "cleanup-deadlock", "collective-mismatch",
                                    "rank-exit", "loop", "mixed-python", "threads", "options"])
def test_every_saved_folder_gives_a_view(folder):
    view = StackView(report_of(folder))
    rows = view.tree_rows()
    assert rows and view.classes
    left, right = view.default_sides()
    assert view.diff(left, right).rows


def test_the_view_model_is_pure():
    """Like the other diagnosis modules, it imports neither the UI nor the outside world."""
    assert forbidden_loaded(["rltui.diagnosis.stackview"], ["textual", "rich", "pynvml", "psutil", "subprocess"]) == []
