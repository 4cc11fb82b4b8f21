"""Answer matching: the rules in order (boxed, stated, last number, substring), normalising,
and numbers compared by value."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rltui.checks.rollout.answers import (
    as_number,
    check_answer,
    equivalent,
    last_boxed,
    normalise,
    stated_answer,
)


@pytest.mark.parametrize("text, expected, match, method, found", [
    # boxed wins over everything, the last one counts, nested braces kept
    (r"so \boxed{4}", "4", True, "boxed", "4"),
    (r"\boxed{3} no wait \boxed{4}", "4", True, "boxed", "4"),
    (r"\boxed{\frac{1}{2}}", "0.5", True, "boxed", r"\frac{1}{2}"),
    (r"the answer is 5 but \boxed{6}", "5", False, "boxed", "6"),
    (r"\fbox{yes}", "Yes", True, "boxed", "yes"),
    # an unclosed box (cut at max tokens) does not count; the stated answer does
    (r"The answer is 7. \boxed{7", "7", True, "stated", "7"),
    # stated answers: the last one
    ("The answer is 3.5.", "3.5", True, "stated", "3.5"),
    ("the answer is: $1,000.", "1000", True, "stated", "$1,000"),
    ("answer is 2\nanswer is 9", "9", True, "stated", "9"),
    ("reasoning...\n#### 72", "72", True, "stated", "72"),
    ("#### 72\nthe answer is 71", "72", False, "stated", "71"),
    # numeric expected answer: the last number in the text
    ("2 plus 3 makes 5", "5", True, "last-number", "5"),
    ("5 or maybe 6", "5", False, "last-number", "6"),
    ("it has 1,200 legs", "1200", True, "last-number", "1,200"),
    ("no digits here", "5", False, "none", None),
    ("-3 degrees", "-3", True, "last-number", "-3"),
    # otherwise a substring after normalising
    ("The sky is Blue today", "blue", True, "substring", None),
    ("the sky is green", "blue", False, "substring", None),
    ("anything", "", False, "substring", None),
])
def test_check_answer(text, expected, match, method, found):
    result = check_answer(text, expected)
    assert (result.match, result.method, result.extracted) == (match, method, found)


@pytest.mark.parametrize("text, expected, match", [
    # whole words only: a shorter answer inside a longer word or a negation is not found
    ("I do not know", "no", False),
    ("yesterday it rained", "yes", False),
    ("fourteen apples", "four", False),
    ("nobody knows", "no", False),
    ("so: no.", "no", True),
    ("Yes! it is", "yes", True),
    ("four apples", "four", True),
    ("it is blue-green", "blue", True),       # a hyphen ends a word
    ("the (a) option", "(a)", True),          # no word character at the ends: plain search
    ("f(a) holds", "(a)", True),
    ("x+1 here", "x+1", True),
    ("x+12 here", "x+1", False),
])
def test_substring_rule_matches_whole_words(text, expected, match):
    result = check_answer(text, expected)
    assert (result.method, result.match) == ("substring", match)


@pytest.mark.parametrize("text, found", [
    ("the answer is yes, of course", "yes"),
    ("The answer is 5 because 2 + 3 = 5", "5"),
    ("the answer is 12; the rest follows", "12"),
    ("the answer is blue! right", "blue"),
    ("the answer is 42 since it is", "42"),
    ("the answer is: $1,000.", "$1,000"),     # a thousands separator is not a clause end
    ("the answer is 1,234,567, I think", "1,234,567"),
    ("The answer is 3.5.", "3.5"),
    ("the answer is as follows: 7", "as follows: 7"),
])
def test_a_stated_answer_is_its_first_clause(text, found):
    assert stated_answer(text) == found


@pytest.mark.parametrize("text, expected, match, found", [
    ("numbers 1,2,3", "123", False, "3"),     # a list, not one hundred and twenty-three
    ("numbers 1,2,3", "3", True, "3"),
    ("it has 1,200 legs", "1200", True, "1,200"),
    ("a total of 1,234,567 people", "1234567", True, "1,234,567"),
    ("1,000, then 2,000", "2000", True, "2,000"),
    ("12,3456", "3456", True, "3456"),        # not the 1,234 form: two numbers
    ("1234,567", "1234567", False, "567"),
])
def test_thousands_separators_only_in_the_1_234_form(text, expected, match, found):
    result = check_answer(text, expected)
    assert (result.method, result.match, result.extracted) == ("last-number", match, found)


@pytest.mark.parametrize("text, value", [
    ("1,234", 1234), ("-1,234.5", -1234.5), ("1,2,3", None), ("12,34", None), ("1,000,000", 10**6),
])
def test_as_number_reads_only_real_thousands_separators(text, value):
    assert as_number(text) == value


@pytest.mark.parametrize("a, b, same", [
    ("4", "4.0", True), ("1,000", "1000", True), ("$5", "5", True), ("50%", "50", True),
    (r"\frac{3}{4}", "0.75", True), (r"\dfrac{3}{4}", "3/4", True), (r"\text{yes}", "Yes", True),
    ("'yes'", "yes", True), ("Yes.", "yes", True), ("  a   b ", "A B", True),
    ("4", "5", False), ("1/0", "0", False), ("yes", "no", False), ("12", "1.2", False),
])
def test_equivalent(a, b, same):
    assert equivalent(a, b) is same
    assert equivalent(b, a) is same


def test_helpers_on_edge_cases():
    assert last_boxed("nothing") is None
    assert last_boxed(r"\boxed{a{b}c}") == "a{b}c"
    assert stated_answer("The answer is .") == "."  # the bare stop is what the text states
    assert as_number("nan") is None and as_number("inf") is None
    assert as_number("abc") is None
    assert normalise(r"$\text{5}$.") == "5"


@given(st.integers(-10**9, 10**9))
def test_any_integer_is_found_boxed_stated_and_last(n):
    for text in (rf"\boxed{{{n}}}", f"The answer is {n}.", f"so we get {n:,}", f"#### {n}"):
        assert check_answer(text, str(n)).match, text
    assert not check_answer(rf"\boxed{{{n + 1}}}", str(n)).match


@given(st.text(alphabet=st.characters(categories=["L", "N", "Zs"]), max_size=30))
def test_normalise_is_idempotent(text):
    once = normalise(text)
    assert normalise(once) == once


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6))
def test_a_number_equals_itself_written_out(x):
    assert equivalent(repr(x), str(x))
