"""Token comparison: first divergence, EOS trimming, text-only candidates, log-prob statistics
on the shared prefix and verl's thresholds."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rltui.checks.rollout.compare import (
    Generation,
    compare,
    first_difference,
    logprob_stats,
    restore_leading_space,
    summarise,
    trim_eos,
    verdict,
)

EOS = 99


def gen(ids, lps=None, **kw) -> Generation:
    return Generation(token_ids=tuple(ids), text=kw.pop("text", " ".join(map(str, ids))),
                      logprobs=None if lps is None else tuple(lps), **kw)


def text_of(i: int) -> str:
    return f"<{i}>"


@pytest.mark.parametrize("a, b, expected", [
    ((), (), None), ((1, 2), (1, 2), None), ((1, 2), (1, 3), 1), ((5,), (6,), 0),
    ((1, 2), (1, 2, 3), 2), ((1, 2, 3), (1,), 1), ((), (4,), 0),
])
def test_first_difference(a, b, expected):
    assert first_difference(a, b) == expected
    assert first_difference(b, a) == expected


@pytest.mark.parametrize("ref, cand, index, ref_tok, cand_tok, ref_end, cand_end", [
    ((1, 2, 3), (1, 2, 4), 2, 3, 4, None, None),
    ((1, 2, 3), (7, 2, 3), 0, 1, 7, None, None),
    # one side shorter: it ended there, with its finish reason
    ((1, 2), (1, 2, 3), 2, None, 3, "stop", None),
    ((1, 2, 3), (1, 2), 2, 3, None, None, "length"),
])
def test_divergence_names_both_tokens_or_the_end(ref, cand, index, ref_tok, cand_tok, ref_end,
                                                 cand_end):
    result = compare(gen(ref, finish_reason="stop"), gen(cand, finish_reason="length"),
                     token_text=text_of)
    assert not result.match
    d = result.divergence
    assert d.index == index
    assert (d.reference.id if d.reference else None) == ref_tok
    assert (d.candidate.id if d.candidate else None) == cand_tok
    assert (d.reference_end, d.candidate_end) == (ref_end, cand_end)
    if d.reference:
        assert d.reference.text == f"<{ref_tok}>"
    assert f"token {index}" in d.describe()


def test_a_final_eos_on_one_side_only_is_not_a_divergence():
    ref = gen([1, 2, EOS], [-0.1, -0.2, -0.3], finish_reason="stop")
    cand = gen([1, 2], [-0.1, -0.2], finish_reason="stop")
    result = compare(ref, cand, eos_ids=[EOS])
    assert result.match and result.divergence is None
    assert result.reference_tokens == result.candidate_tokens == 2
    assert result.logprob.tokens == 2


def test_trim_eos_only_trims_the_last_token():
    assert trim_eos(gen([EOS, 1, EOS], [-1, -2, -3]), [EOS]) == ((EOS, 1), (-1, -2))
    assert trim_eos(gen([1, 2]), [EOS]) == ((1, 2), None)


def test_logprobs_are_compared_on_the_shared_prefix_only():
    ref = gen([1, 2, 3, 4], [-0.1, -0.2, -0.3, -0.4])
    cand = gen([1, 2, 9, 9], [-0.1, -0.5, -5.0, -5.0])
    result = compare(ref, cand)
    lp = result.logprob
    assert lp.tokens == 2
    assert lp.max == pytest.approx(0.3)
    assert lp.mean == pytest.approx(0.15)
    assert lp.prob_max == pytest.approx(abs(math.exp(-0.2) - math.exp(-0.5)))
    assert lp.prob_mean == pytest.approx(abs(math.exp(-0.2) - math.exp(-0.5)) / 2)


@pytest.mark.parametrize("ref_lp, cand_lp, ref_ids, cand_ids, missing", [
    (None, [-1.0], [1], [1], "no log-probs from the reference"),
    ([-1.0], None, [1], [1], "no log-probs from the candidate"),
    (None, None, [1], [1], "no log-probs from the reference and candidate"),
    ([-1.0], [-1.0], [1], [2], "no shared prefix"),
    ([-math.inf], [-1.0], [1], [1], "no finite log-probs"),
])
def test_why_there_is_no_logprob_comparison(ref_lp, cand_lp, ref_ids, cand_ids, missing):
    result = compare(gen(ref_ids, ref_lp), gen(cand_ids, cand_lp))
    assert result.logprob is None
    assert missing in result.logprob_missing


def test_a_text_only_candidate_matches_on_text_ignoring_surrounding_space():
    ref = gen([1, 2], [-0.1, -0.1], text=" one two")
    cand = Generation(token_ids=(77,), text="one two", tokens_from_text=True,
                      logprobs=(-0.1, -0.1))
    result = compare(ref, cand)
    assert result.match and result.basis == "text"
    assert "re-tokenised" in result.logprob_missing


def test_a_text_only_candidate_divergence_is_placed_by_re_tokenising():
    vocab = {" one": 1, " two": 2, " three": 3, "one": 10}

    def encode(text: str) -> list[int]:
        return [vocab[" " + w] for w in text.split()] if text.startswith(" ") else \
            [vocab[text.split()[0]]] + [vocab[" " + w] for w in text.split()[1:]]

    ref = gen([1, 2, 2], text=" one two two")
    # a chat endpoint stripped the leading space; the space is given back before encoding
    cand = Generation(token_ids=(10, 2, 3), text="one two three", tokens_from_text=True)
    result = compare(ref, cand, encode=encode)
    assert not result.match
    assert (result.divergence.index, result.divergence.reference.id,
            result.divergence.candidate.id) == (2, 2, 3)


@pytest.mark.parametrize("ref, cand, out", [
    (" a", "a", " a"), (" a", " a", " a"), ("a", "a", "a"), ("\n a", "b", "\n b"),
    ("a", " b", " b"),
])
def test_restore_leading_space(ref, cand, out):
    assert restore_leading_space(ref, cand) == out


@pytest.mark.parametrize("prob_mean, expected", [
    (0.0, "normal"), (0.0049, "normal"), (0.005, "elevated"), (0.01, "elevated"),
    (0.0101, "precision-problem"), (0.5, "precision-problem"),
])
def test_verl_thresholds(prob_mean, expected):
    assert verdict(prob_mean) == expected


def test_summary_is_token_weighted():
    a = logprob_stats((-0.1,) * 3, (-0.2,) * 3, 3)       # 3 tokens, |d| 0.1
    b = logprob_stats((-1.0,), (-1.5,), 1)                 # 1 token, |d| 0.5
    s = summarise([a, None, b])
    assert s.tokens == 4 and s.samples == 2
    assert s.mean == pytest.approx((0.3 + 0.5) / 4)
    assert s.max == pytest.approx(0.5)
    assert summarise([None, None]) is None


ids = st.lists(st.integers(0, 5), max_size=12)


@given(ids, ids)
def test_compare_properties(a, b):
    la = [-0.1 * (i + 1) for i in range(len(a))]
    lb = [-0.1 * (i + 1) - 0.01 for i in range(len(b))]
    result = compare(gen(a, la), gen(b, lb))
    assert result.match == (a == b)
    if a == b:
        assert result.divergence is None
    else:
        k = result.divergence.index
        assert a[:k] == b[:k]
        assert k == min(len(a), len(b)) or a[k] != b[k]
        # symmetric position
        assert compare(gen(b, lb), gen(a, la)).divergence.index == k
    if result.logprob is not None:
        assert result.logprob.tokens == (len(a) if a == b else result.divergence.index)
        assert result.logprob.max == pytest.approx(0.01)
        assert 0 <= result.logprob.prob_mean <= result.logprob.mean + 1e-12


@given(st.lists(st.floats(-20, 0), min_size=1, max_size=10),
       st.lists(st.floats(-20, 0), min_size=1, max_size=10))
def test_logprob_stats_bounds(a, b):
    s = logprob_stats(tuple(a), tuple(b), len(a))
    n = min(len(a), len(b))
    assert s.tokens == n
    assert 0 <= s.mean <= s.max
    assert 0 <= s.prob_mean <= s.prob_max <= 1
