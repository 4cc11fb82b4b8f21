"""rollout-check against the real ``transformers serve`` (started by the hf_serve fixtures) with
the same tiny model, or a perturbed one, loaded locally as the reference.

transformers serve refuses token-id prompts and returns no log-probs: the check must fall back
to text, say so in ``limits``, and still find agreement or the divergence and where it starts
(checked against two independent greedy runs in this process).
"""

from __future__ import annotations

import pytest

from rltui.checks.rollout import run
from tests.integration.test_rollout_check import divergences, expected_divergences, spec

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_same_model_served_by_transformers_agrees_and_names_its_limits(
        hf_serve, tiny_model, rollout_dataset):
    report = run(spec(rollout_dataset, tiny_model, hf_serve.v1))
    j = report.to_json()
    assert j["verdict"] == "consistent" and report.exit_code() == 0, report.to_text()
    assert j["agreement_rate"] == 1.0 and j["compared"] == 8 and j["refused"] == 0
    limits = " ".join(j["limits"])
    assert "did not take token ids" in limits and "prompt must be a string" in limits
    assert "the input went as text" in limits
    assert "returns no log-probs" in limits and "greedy decoding could not be verified" in limits
    assert "re-tokenised" in limits
    assert j["logprob_diff"] is None
    assert j["logprob_diff_reason"] == "no log-probs from the candidate"
    assert j["sent"]["candidate"]["form"] == ("text prompt, log-probs, no neutral sampling "
                                              "fields")
    # it refuses top_k, min_p and repetition_penalty; frequency_penalty 0 is what it reads as
    # repetition_penalty 1
    assert "refused the neutral sampling fields" in limits and "Unexpected fields" in limits
    assert j["sent"]["candidate"]["frequency_penalty"] == 0
    assert all(s["compared_on"] == "text" for s in j["per_sample"])
    # the server's own prompt token counts agree with the ids the reference built
    assert all(s["candidate"]["prompt_tokens"] == s["prompt_tokens"] for s in j["per_sample"])


def test_perturbed_model_served_by_transformers_diverges_where_greedy_does(
        hf_serve_perturbed, tiny_model, tiny_model_perturbed, rollout_dataset):
    report = run(spec(rollout_dataset, tiny_model, hf_serve_perturbed.v1))
    expected = expected_divergences(tiny_model, tiny_model_perturbed, rollout_dataset)
    assert expected and divergences(report) == expected
    assert report.verdict == "divergent" and report.exit_code() == 1


def test_transformers_chat_endpoint(hf_serve, hf_serve_perturbed, tiny_model,
                                    tiny_model_perturbed, rollout_dataset):
    report = run(spec(rollout_dataset, tiny_model, hf_serve.v1, api="chat"))
    assert report.agreement_rate == 1.0 and len(report.compared) == 7, report.to_text()
    assert any("chat endpoint" in line for line in report.limits)
    # transformers serve strips the chat content; the divergence is still placed right
    diverged = run(spec(rollout_dataset, tiny_model, hf_serve_perturbed.v1, api="chat"))
    assert divergences(diverged) == expected_divergences(
        tiny_model, tiny_model_perturbed, rollout_dataset, chat=True)


def test_wrong_model_name_at_transformers_serve(hf_serve, tiny_model, rollout_dataset):
    report = run(spec(rollout_dataset, tiny_model, hf_serve.v1, model="other/model"))
    assert report.exit_code() == 2 and hf_serve.model_name in report.error
