"""The report: aggregate numbers, verdict and exit code, JSON shape, worst-first order, markdown
and text; the spec's settings and repr never carry a key; the CLI module imports nothing
heavy."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rltui.checks.dataset import SkippedLine
from rltui.checks.rollout.answers import check_answer
from rltui.checks.rollout.compare import Generation, compare
from rltui.checks.rollout.report import RolloutReport, SampleResult, SideResult, sorted_results
from rltui.checks.rollout.spec import RolloutSpec, SpecError

KEY = "sk-test-secret-123"


def side(text: str, expected: str | None) -> SideResult:
    return SideResult(text=text, tokens=3, finish_reason="length", latency_s=0.1,
                      answer=check_answer(text, expected) if expected else None)


def result(index: int, ref_ids, cand_ids, *, delta=0.0, expected=None, ref_text="x",
           cand_text="x") -> SampleResult:
    ref = Generation(tuple(ref_ids), ref_text, tuple(-0.1 for _ in ref_ids))
    cand = Generation(tuple(cand_ids), cand_text, tuple(-0.1 - delta for _ in cand_ids))
    c = compare(ref, cand)
    return SampleResult(index=index, line=index + 1, input="encoded prompt", prompt_tokens=4,
                        expected=expected, status="match" if c.match else "mismatch",
                        comparison=c, reference=side(ref_text, expected),
                        candidate=side(cand_text, expected))


def refused(index: int) -> SampleResult:
    return SampleResult(index=index, line=index + 1, input="chat template", prompt_tokens=4,
                        expected=None, status="refused", refused="the server counted 5 prompt "
                        "tokens where the reference tokenizer built 4: the inputs differ")


def errored(index: int) -> SampleResult:
    return SampleResult(index=index, line=index + 1, input="encoded prompt", prompt_tokens=4,
                        expected=None, status="error", error="server: no answer within 1 s")


def report(*results, **kw) -> RolloutReport:
    spec = RolloutSpec(dataset="d.jsonl", reference="ref", server="http://h/v1", api_key=KEY)
    return RolloutReport(settings=spec.settings(), results=list(results),
                         total=kw.pop("total", len(results)), **kw)


def test_aggregate_numbers():
    r = report(result(0, [1, 2, 3], [1, 2, 3], delta=0.001, expected="4", ref_text="4",
                      cand_text="4"),
               result(1, [1, 2, 3], [1, 5, 3], expected="4", ref_text="4", cand_text="5"),
               refused(2), errored(3))
    j = r.to_json()
    assert (j["samples"], j["compared"], j["matched"], j["mismatched"], j["refused"],
            j["errors"]) == (4, 2, 1, 1, 1, 1)
    assert j["agreement_rate"] == 0.5
    assert j["reference_accuracy"] == 1.0 and j["candidate_accuracy"] == 0.5
    lp = j["logprob_diff"]
    assert lp["tokens"] == 4 and lp["mean"] == pytest.approx(0.001 * 3 / 4)
    assert lp["verdict"] == "normal" and j["logprob_diff_reason"] is None
    assert j["verdict"] == "divergent" and r.exit_code() == 1
    assert j["usual_causes"]


def test_json_has_the_public_fields_and_survives_json():
    r = report(result(0, [1], [2]), skipped=[SkippedLine(3, "not JSON")],
               limits=["the server returns no log-probs"])
    j = json.loads(json.dumps(r.to_json()))
    for key in ("samples", "agreement_rate", "reference_accuracy", "candidate_accuracy",
                "logprob_diff", "limits", "per_sample", "partial", "settings"):
        assert key in j
    row = j["per_sample"][0]
    for key in ("index", "match", "first_divergence"):
        assert key in row
    assert row["first_divergence"]["index"] == 0
    assert row["first_divergence"]["reference"] == {"id": 1, "text": "1"}
    assert j["skipped"] == [{"line": 3, "reason": "not JSON"}]
    assert j["logprob_diff"] is None and "no shared prefix" in j["logprob_diff_reason"]


@pytest.mark.parametrize("results, kw, verdict, code", [
    ([result(0, [1], [1])], {}, "consistent", 0),
    ([result(0, [1], [1], delta=0.05)], {}, "divergent", 1),          # precision problem
    ([result(0, [1, 2], [1, 2], delta=0.007)], {}, "consistent", 0),  # elevated, not failing
    ([result(0, [1], [2])], {}, "divergent", 1),
    ([result(0, [1], [1]), errored(1)], {}, "incomplete", 3),
    ([errored(0)], {}, "incomplete", 3),
    ([refused(0)], {}, "nothing-compared", 2),
    ([], {"total": 0}, "nothing-compared", 2),
    ([result(0, [1], [1])], {"partial": True, "total": 3}, "incomplete", 3),
    # a divergence found is the answer even when the run was cut short (partial stays true)
    ([result(0, [1], [2])], {"partial": True, "total": 3}, "divergent", 1),
    ([result(0, [1], [1], delta=0.05)], {"partial": True, "cancelled": True, "total": 3},
     "divergent", 1),
    ([result(0, [1], [2]), errored(1)], {"partial": True, "stopped": "server down",
                                         "total": 3}, "divergent", 1),
    ([], {"error": "bad flag", "error_kind": "usage"}, "error", 2),
    ([], {"error": "server down", "error_kind": "server"}, "error", 3),
])
def test_verdict_and_exit_code(results, kw, verdict, code):
    r = report(*results, **kw)
    assert r.verdict == verdict
    assert r.exit_code() == code


def test_a_cut_short_divergence_stays_partial_in_the_json():
    j = report(result(0, [1], [2]), partial=True, stopped="cancelled", total=3).to_json()
    assert (j["verdict"], j["partial"], j["stopped"]) == ("divergent", True, "cancelled")
    assert "stopped" in report(result(0, [1], [2]), stopped="cancelled").to_text()


def test_the_logprob_verdict_names_the_value_it_is_on():
    r = report(result(0, [1, 2], [1, 2], delta=0.05))
    lp = r.to_json()["logprob_diff"]
    assert lp["thresholds"]["applies_to"] == "prob_mean"
    assert (lp["thresholds"]["normal_below"], lp["thresholds"]["problem_above"]) == (0.005, 0.01)
    assert "prob_mean" in lp["thresholds"]["meaning"]
    assert "log p" in lp["thresholds"]["meaning"]
    # |dlogp| = 0.05 would pass for "normal" had the verdict been on it; it is on |dp|
    assert lp["verdict"] == "precision-problem" and lp["prob_mean"] > 0.01
    assert "precision-problem by mean |dp| " in r.to_text()
    md = r.to_markdown()
    assert "precision-problem by mean \\|dp\\| " in md
    assert "| \\|dp\\| mean | \\|dlogp\\| mean / max |" in md


@pytest.mark.parametrize("expected, ref_text, cand_text, marks", [
    ("4", "4", "5", "yes/no"), ("4", "so 4", "4", "yes/yes"), (None, "4", "4", "-"),
])
def test_answer_marks(expected, ref_text, cand_text, marks):
    from rltui.checks.rollout.report import answer_marks

    r = result(0, [1], [1], expected=expected, ref_text=ref_text, cand_text=cand_text)
    assert answer_marks(r) == marks
    assert answer_marks(errored(1)) == "-"
    no_output = SampleResult(index=2, line=3, input="encoded prompt", prompt_tokens=4,
                             expected="4", status="error", error="server: down",
                             reference=side("4", "4"))
    assert answer_marks(no_output) == "yes/-"


def test_elevated_logprobs_name_the_usual_causes():
    r = report(result(0, [1, 2], [1, 2], delta=0.007))
    assert r.logprob.verdict == "elevated"
    assert any("bf16" in c for c in r.causes())
    assert report(result(0, [1], [1])).causes() == []


def test_sorted_results_worst_first():
    rows = [result(0, [1, 2, 3], [1, 2, 3], delta=0.001), result(1, [1, 2, 3], [1, 2, 9]),
            refused(2), result(3, [1, 2, 3], [7, 2, 3]), errored(4),
            result(5, [1, 2, 3], [1, 2, 3], delta=0.01)]
    order = [r.index for r in sorted_results(report(*rows))]
    assert order == [3, 1, 4, 2, 5, 0]


def test_markdown_is_ticket_ready():
    r = report(result(0, [1, 2], [1, 3]), refused(1),
               limits=["the server | pipes"], skipped=[SkippedLine(9, "not JSON")])
    md = r.to_markdown()
    assert md.startswith("# Rollout consistency: DIVERGENT")
    assert "## What the servers could not do" in md and "the server | pipes" in md
    assert "## Usual causes" in md
    assert "| 0 | 1 | mismatch | @1: '2' vs '3' |" in md
    assert "refused: the server counted 5 prompt tokens" in md
    assert "- line 9: not JSON" in md
    assert KEY not in md


def test_text_lists_the_worst_samples():
    text = report(result(0, [1, 2], [1, 3]), result(1, [1], [1])).to_text()
    assert text.splitlines()[0].startswith("rollout-check: DIVERGENT")
    assert "#0 (line 1): mismatch at token 1: reference '2' (id 2), candidate '3' (id 3)" in text
    assert "#1" not in text


def test_urls_are_shown_without_passwords_or_keys():
    server = "http://user:sk-url-password-123456@h:8000/v1?api_key=qs-secret-987"
    reference = "https://tok-secret-555@ref:9/v1"
    spec = RolloutSpec(dataset="d", reference=reference, server=server, tokenizer="t")
    r = RolloutReport(settings=spec.settings(), results=[result(0, [1], [1])], total=1)
    assert spec.settings()["server"] == "http://user:***@h:8000/v1?api_key=***"
    assert spec.settings()["reference"] == "https://***@ref:9/v1"
    for text in (repr(spec), json.dumps(r.to_json()), r.to_markdown(), r.to_text()):
        for secret in ("sk-url-password-123456", "qs-secret-987", "tok-secret-555"):
            assert secret not in text
    with pytest.raises(SpecError) as exc:
        RolloutSpec(dataset="d", reference="r", server="ftp://u:pw-secret-1@h").validate()
    assert "pw-secret-1" not in str(exc.value)


def test_the_key_never_appears():
    spec = RolloutSpec(dataset="d", reference="r", server="http://h/v1", api_key=KEY,
                       reference_api_key=KEY)
    assert KEY not in repr(spec)
    assert spec.settings()["api_key"] == "set"
    assert KEY not in json.dumps(report(result(0, [1], [1])).to_json())


@pytest.mark.parametrize("kw, message", [
    (dict(server="localhost:8000"), "--server must be an http"),
    (dict(api="grpc"), "--api must be one of"),
    (dict(max_new_tokens=0), "--max-new-tokens"),
    (dict(limit=0), "--limit"),
    (dict(concurrency=0), "--concurrency"),
    (dict(timeout_s=0), "--timeout"),
    (dict(reference_dtype="int4"), "--reference-dtype"),
    (dict(reference="http://ref:1/v1"), "needs --tokenizer"),
    (dict(reference_device="gpu0"), "--reference-device must be"),
])
def test_spec_validation(kw, message):
    base = dict(dataset="d", reference="r", server="http://h/v1")
    with pytest.raises(SpecError, match=message):
        RolloutSpec(**{**base, **kw}).validate()


def test_importing_the_cli_and_the_package_stays_light():
    code = ("import sys, json, rltui.checks.rollout.cli, rltui.checks.rollout\n"
            "print(json.dumps([m for m in ('torch', 'transformers', 'httpx', 'httpx2', 'openai',"
            " 'textual') if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout) == []
