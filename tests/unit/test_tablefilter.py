"""The rank table's filter and the tables' sort order (rltui.tablefilter, tablesort): pure."""

from __future__ import annotations

import pytest

from rltui.tablefilter import FilterError, RowFacts, parse
from rltui.tablesort import cell_value, next_column, sort_rows

LIVE0 = RowFacts(rank=0, state="sleeping", node="node-a.cluster", stack_class=1,
                 stack_name="all_reduce", role="trainer")
LIVE5 = RowFacts(rank=5, state="running", node="node-b", stack_class=2,
                 stack_name="destroy_process_group", stalled=True, role="trainer")
GONE3 = RowFacts(rank=3, state="exited", departed=True, node="node-a.cluster")
LOST9 = RowFacts(rank=9, state="unknown", node="node-c")
ROWS = (LIVE0, LIVE5, GONE3, LOST9)


def shown(text: str) -> list[int | None]:
    f = parse(text)
    return [r.rank for r in ROWS if f.matches(r)]


@pytest.mark.parametrize("text, ranks", [
    ("", [0, 5, 3, 9]),  # nothing typed: every row
    ("0-3", [0, 3]),
    ("0-3,9", [0, 3, 9]),
    ("rank:5", [5]),
    ("stalled", [5]),
    ("exited", [3]),
    ("departed", [3]),
    ("live", [0, 5]),
    ("unknown", [9]),
    ("state:running", [5]),
    ("#2", [5]),
    ("class:1", [0]),
    ("class:destroy", [5]),
    ("node:node-a", [0, 3]),  # the short name of node-a.cluster
    ("node-b", [5]),  # a bare word: a node ...
    ("ALL_REDUCE", [0]),  # ... or a class's name, any case
    ("trainer", [0, 5]),  # ... or a role
    ("0-5 live", [0, 5]),  # words narrow: all must match
    ("node-a exited", [3]),
])
def test_filter_words(text, ranks):
    assert shown(text) == ranks


@pytest.mark.parametrize("text, says", [
    ("3-1", "not a rank set"),
    ("rank:x", "not a rank set"),
    ("state:sleepy", "unknown state"),
    ("#0", "numbered from #1"),
    ("#", "class number"),
    ("node:", "needs a value"),
])
def test_filter_errors_say_what_is_wrong(text, says):
    with pytest.raises(FilterError, match=says):
        parse(text)


def test_filter_text_is_kept_tidy():
    assert parse("  0-3   stalled ").text == "0-3 stalled"
    assert not parse("   ").active


@pytest.mark.parametrize("text, value", [
    ("61.4/80G", 61.4), ("98%", 98.0), ("8 · 20s", 8.0), ("4103*", 4103.0), ("-", None),
    ("N/A", None), ("", None), ("Sleeping", "sleeping"), ("-2", -2.0),
])
def test_cell_value(text, value):
    assert cell_value(text) == value


def test_sort_keeps_ties_in_order_and_missing_last_both_ways():
    values = {"a": 2.0, "b": None, "c": 1.0, "d": 2.0, "e": "x"}
    assert sort_rows(list(values), values.get) == ["c", "a", "d", "e", "b"]
    assert sort_rows(list(values), values.get, reverse=True) == ["e", "a", "d", "c", "b"]


def test_next_column_wraps_and_starts_from_the_first():
    cols = ("rank", "pid", "gpu")
    assert next_column(cols, None, 1) == "pid"
    assert next_column(cols, None, -1) == "gpu"
    assert next_column(cols, "gpu", 1) == "rank"
    assert next_column(cols, "gone", 1) == "pid"
    assert next_column((), None, 1) is None
