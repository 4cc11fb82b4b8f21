"""Percentiles, errors by type, invalid rewards and the sequential/concurrent comparison."""

from __future__ import annotations

import pytest

from rltui.checks.workflow import analysis
from rltui.checks.workflow.results import RunResult


def ok(run, prompt, reward, latency=0.1, step="concurrent"):
    return RunResult(step, run, prompt, "ok", latency_s=latency, reward=reward)


def err(run, kind, message, step="concurrent"):
    return RunResult(step, run, 0, "error", latency_s=0.01, error_type=kind, message=message,
                     traceback=f"Traceback ...\n{kind}: {message}")


@pytest.mark.parametrize("values, q, expected", [
    ([1.0], 0.5, 1.0),
    ([1.0, 2.0], 0.5, 1.5),
    ([3.0, 1.0, 2.0, 4.0], 0.5, 2.5),
    (list(range(1, 101)), 0.95, 95.05),
    (list(range(11)), 0.95, 9.5),
    ([5.0, 1.0], 1.0, 5.0),
    ([5.0, 1.0], 0.0, 1.0),
])
def test_percentile_interpolates_linearly(values, q, expected):
    assert analysis.percentile(values, q) == pytest.approx(expected)


def test_percentile_of_nothing_is_none():
    assert analysis.percentile([], 0.5) is None


def test_latency_counts_only_runs_that_returned():
    results = [ok(0, 0, 1.0, 0.1), ok(1, 0, 1.0, 0.3), err(2, "ValueError", "x"),
               RunResult("concurrent", 3, 0, "timeout", latency_s=9.0)]
    lat = analysis.latency(results)
    assert lat == {"p50": 0.2, "p95": pytest.approx(0.29), "max": 0.3}
    assert analysis.latency([err(0, "E", "m")]) == {"p50": None, "p95": None, "max": None}


def test_counts_by_status():
    results = [ok(0, 0, 1.0), err(1, "E", "m"), RunResult("concurrent", 2, 0, "timeout"),
               RunResult("concurrent", 3, 0, "unfinished"), ok(4, 1, "bad")]
    assert analysis.counts(results) == {"completed": 2, "errors": 1, "timeouts": 1,
                                        "unfinished": 1}


def test_errors_group_by_type_most_frequent_first_with_the_first_message():
    results = [err(0, "ValueError", "first"), err(1, "ConnectionError", "refused 1"),
               err(2, "ConnectionError", "refused 2"), ok(3, 0, 1.0),
               err(4, "ConnectionError", "refused 3")]
    groups = analysis.errors_by_type(results)
    assert list(groups) == ["ConnectionError", "ValueError"]
    assert groups["ConnectionError"]["count"] == 3
    assert groups["ConnectionError"]["message"] == "refused 1"
    assert groups["ConnectionError"]["runs"] == [1, 2, 4]
    assert "ConnectionError: refused 1" in groups["ConnectionError"]["traceback"]


def test_invalid_rewards_name_the_run_and_the_reason():
    bad = RunResult("concurrent", 5, 1, "ok", reward=None,
                    invalid={"reason": "str is not a number", "repr": "'1.0'"})
    assert analysis.invalid_rewards([ok(0, 0, 1.0), bad]) == [
        {"step": "concurrent", "run": 5, "prompt": 1, "reason": "str is not a number",
         "repr": "'1.0'"}]


def seq(prompt, reward):
    return ok(prompt, prompt, reward, step="sequential")


def test_agreement_when_every_concurrent_run_matches_its_sequential_run():
    agree, details = analysis.agreement(
        [seq(0, 1.0), seq(1, {"a": 0.5})],
        [ok(0, 0, 1.0), ok(1, 0, 1.0), ok(2, 1, {"a": 0.5}), ok(3, 1, {"a": 0.5})], 0)
    assert agree is True
    assert details["compared"] == 2 and details["disagreements"] == []


def test_a_leak_shows_as_disagreement_with_the_runs_that_differ():
    agree, details = analysis.agreement(
        [seq(0, 1.0), seq(1, 1.0)],
        [ok(0, 0, 1.0), ok(1, 0, 0.0), ok(2, 1, 1.0), ok(3, 1, 1.0)], 0.0)
    assert agree is False
    assert details["disagreements"] == [{"prompt": 0, "sequential": 1.0,
                                         "concurrent": [1.0, 0.0], "runs": [1]}]
    assert details["groups_differing"] == [0]


@pytest.mark.parametrize("sequential, concurrent, temperature, reason", [
    ([seq(0, 1.0)], [ok(0, 0, 1.0)], 0.7, "temperature is 0.7"),
    ([seq(0, 1.0)], [ok(0, 0, 1.0)], True, "temperature is True"),
    ([], [ok(0, 0, 1.0)], 0, "no sequential runs"),
    ([seq(0, 1.0)], [err(0, "E", "m")], 0, "no prompt has a valid reward"),
    ([seq(0, "bad")], [ok(0, 0, 1.0)], 0, None),
])
def test_agreement_is_null_with_a_reason_when_nothing_compares(sequential, concurrent,
                                                                temperature, reason):
    if reason is None:  # an invalid sequential reward: that prompt is not comparable
        sequential[0].invalid = {"reason": "str", "repr": "'bad'"}
        reason = "no prompt has a valid reward"
    agree, details = analysis.agreement(sequential, concurrent, temperature)
    assert agree is None
    assert reason in details["reason"]
