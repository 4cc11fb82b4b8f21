"""Compact rank sets: [0, 1, 2, 3, 5, 7, 8] <-> "0-3,5,7-8"."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rltui.rankset import compact, expand

CASES = [
    ([], ""),
    ([0], "0"),
    ([0, 1], "0-1"),
    ([0, 1, 2, 3, 5, 7, 8], "0-3,5,7-8"),
    ([8, 7, 5, 3, 2, 1, 0], "0-3,5,7-8"),
    ([1, 1, 2, 2], "1-2"),
    ([0, 2, 4], "0,2,4"),
    ([1023, 1024, 1025, 7], "7,1023-1025"),
]


@pytest.mark.parametrize(("ranks", "text"), CASES)
def test_compact(ranks, text):
    assert compact(ranks) == text


def test_compact_skips_none_and_takes_any_iterable():
    assert compact([None, 3, None, 2]) == "2-3"
    assert compact(r for r in (4, 5, 6)) == "4-6"
    assert compact({9}) == "9"


@pytest.mark.parametrize(("ranks", "text"), CASES)
def test_expand_inverts_compact(ranks, text):
    assert expand(text) == sorted(set(ranks))


@pytest.mark.parametrize(("text", "ranks"), [
    (" 1 , 3-4 ", [1, 3, 4]),
    ("3,1,2", [1, 2, 3]),
    ("1-3,2-4", [1, 2, 3, 4]),
    ("5-5", [5]),
    ("1,,2,", [1, 2]),
])
def test_expand_is_lenient_about_spacing_order_and_overlap(text, ranks):
    assert expand(text) == ranks


@pytest.mark.parametrize("text", ["3-1", "a", "1-b", "-1", "1-", "1.5", "0-3-5"])
def test_expand_rejects_malformed_input(text):
    with pytest.raises(ValueError):
        expand(text)


def test_expand_names_a_descending_range():
    with pytest.raises(ValueError, match="descending range '3-1'"):
        expand("0,3-1")


@settings(max_examples=100, deadline=None, database=None)
@given(st.lists(st.integers(min_value=0, max_value=5000), max_size=40))
def test_round_trip_property(ranks):
    text = compact(ranks)
    assert expand(text) == sorted(set(ranks))
    assert compact(expand(text)) == text
    assert " " not in text
