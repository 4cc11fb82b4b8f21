"""The tables folded to one line per group (rltui.tablesummary)."""

from __future__ import annotations

from rltui.tablesummary import GIB, gib_range, gpu_groups, groups

RANKS = ("rank", "ranks")


def test_ranks_by_where_they_wait_largest_first_verb_said_once():
    doing = [("wait in", "destroy_process_group")] * 4 + [("wait in", "all_reduce")] * 12
    assert groups(RANKS, doing) == "16 ranks: 12 wait in all_reduce, 4 in destroy_process_group"


def test_states_have_no_verb_and_ties_keep_first_seen_order():
    doing = [("", "running"), ("", "exited"), ("", "running"), ("", "exit 1")]
    assert groups(RANKS, doing) == "4 ranks: 2 running, 1 exited, 1 exit 1"


def test_verb_said_again_after_a_group_without_it():
    doing = [("wait in", "all_reduce")] * 3 + [("", "exited")] * 2 + [("wait in", "barrier")]
    assert groups(RANKS, doing) == "6 ranks: 3 wait in all_reduce, 2 exited, 1 wait in barrier"


def test_many_groups_end_in_a_count_of_the_rest():
    doing = [("in", f"f{i}") for i in range(7) for _ in range(7 - i)]
    assert groups(RANKS, doing) == "28 ranks: 7 in f0, 6 f1, 5 f2, 4 f3, 6 other"


def test_one_group_past_the_limit_is_named_not_counted():
    doing = [("", f"s{i}") for i in range(5)]
    assert groups(RANKS, doing) == "5 ranks: 1 s0, 1 s1, 1 s2, 1 s3, 1 s4"


def test_singular_and_empty():
    assert groups(RANKS, [("", "running")]) == "1 rank: 1 running"
    assert groups(RANKS, []) == "0 ranks"


def test_gpus_busy_idle_between_and_memory_range():
    utils = [100.0] * 6 + [0.0, 1.0]
    used = [61 * GIB, 78 * GIB] + [70 * GIB] * 6
    assert gpu_groups(utils, used, 5.0, 50.0) == "8 GPUs: 6 busy, 2 idle, 61-78 GiB"
    assert gpu_groups([20.0, 40.0, None], [], 5.0, 50.0) == \
        "3 GPUs: 2 at 20-40%, 1 no reading"
    assert gpu_groups([30.0], [GIB], 5.0, 50.0, errors=1) == \
        "2 GPUs: 1 at 30%, 1 unreadable, 1 GiB"


def test_thresholds_are_inclusive_as_the_table_colours_them():
    assert gpu_groups([5.0, 50.0], [], 5.0, 50.0) == "2 GPUs: 1 busy, 1 idle"


def test_gib_range():
    assert gib_range([]) == ""
    assert gib_range([int(61.2 * GIB), int(60.8 * GIB)]) == "61 GiB"
