"""rollout-check against a real HTTP server speaking vLLM's and SGLang's formats (the engine
server of tests/fakes) and the real tiny model loaded locally as the reference: agreement,
divergence, log-probs, the request each server gets. (Failing servers, bad input, concurrency
and cancel: test_rollout_check_failures.py; the real ``transformers serve``:
test_rollout_check_hf.py.)

What a run reports is checked against an independent greedy run in this process (plain
``generate``, ids from ``apply_chat_template(tokenize=True)``), not against the check's own code.

Why not llama.cpp's server (llama-cpp-python), a real server that takes token ids and returns
log-probs: PyPI has only its source (llama-cpp-python 0.3.36: a 76 MB sdist, no wheel), so
every CI run would first compile llama.cpp with CMake; and the model must become a GGUF file,
whose converter (the vendored convert_hf_to_gguf.py) identifies a BPE pre-tokenizer by the
sha256 of the ids it gives for a fixed text and refuses unknown ones ("BPE pre-tokenizer was not
recognized"): the test's locally trained tokenizer is unknown by construction. Writing the GGUF
by hand would test a hand-made file against one llama.cpp version. The engine server answers in
vLLM's and SGLang's documented formats instead, from the same real model.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from rltui.checks.rollout import RolloutSpec, run, sorted_results
from tests.fakes.engine_server import EngineServer

pytestmark = pytest.mark.integration

MAX_NEW = 16
KEY = "sk-rollout-test-4242"
NEUTRAL = {"repetition_penalty": 1, "top_k": -1, "min_p": 0, "frequency_penalty": 0,
           "presence_penalty": 0}


@cache
def tokenizer(folder: Path):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(folder)


@cache
def model(folder: Path):
    import torch
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def prompt_ids(folder: Path, record: dict, chat: bool = False) -> list[int]:
    if "input_ids" in record:
        return record["input_ids"]
    if "prompt" in record and not chat:
        return list(tokenizer(folder)(record["prompt"])["input_ids"])
    messages = record.get("messages") or [{"role": "user", "content": record["prompt"]}]
    return list(tokenizer(folder).apply_chat_template(messages, add_generation_prompt=True,
                                                      tokenize=True, return_dict=True)
                ["input_ids"])


@cache
def greedy(folder: Path, ids: tuple[int, ...], n: int = MAX_NEW) -> list[int]:
    import torch
    with torch.no_grad():
        out = model(folder).generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False)
    return out.sequences[0, len(ids):].tolist() if hasattr(out, "sequences") else \
        out[0, len(ids):].tolist()


def records(dataset: Path) -> list[dict]:
    return [json.loads(line) for line in dataset.read_text().splitlines() if line.strip()]


def expected_divergences(reference: Path, candidate: Path, dataset: Path,
                         chat: bool = False) -> dict[int, tuple[int, int, int]]:
    """index -> (position, reference token, candidate token) from two independent greedy runs."""
    out = {}
    for i, record in enumerate(records(dataset)):
        if chat and "input_ids" in record:
            continue
        ids = tuple(prompt_ids(reference, record, chat))
        a, b = greedy(reference, ids), greedy(candidate, ids)
        k = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), None)
        if k is not None:
            out[i] = (k, a[k], b[k])
    return out


def spec(dataset, reference, server, **kw) -> RolloutSpec:
    return RolloutSpec(dataset=str(dataset), reference=str(reference), server=server,
                       max_new_tokens=kw.pop("max_new_tokens", MAX_NEW), **kw)


def divergences(report) -> dict[int, tuple[int, int, int]]:
    return {r.index: (r.first_divergence.index, r.first_divergence.reference.id,
                      r.first_divergence.candidate.id)
            for r in report.results if r.first_divergence is not None}


@pytest.fixture(scope="module")
def engine_server_nudged(tiny_model_nudged):
    with EngineServer(tiny_model_nudged) as server:
        yield server


# ----- agreement, divergence, log-probs -----


def test_same_model_over_completions_with_token_ids(engine_server, tiny_model, rollout_dataset):
    before = len(engine_server.requests)
    report = run(spec(rollout_dataset, tiny_model, engine_server.v1))
    j = report.to_json()
    assert j["verdict"] == "consistent" and report.exit_code() == 0, report.to_text()
    assert j["samples"] == j["compared"] == j["matched"] == 8
    assert j["agreement_rate"] == 1.0
    assert j["limits"] == []
    assert j["logprob_diff"]["tokens"] == 8 * MAX_NEW
    assert j["logprob_diff"]["max"] < 1e-4 and j["logprob_diff"]["verdict"] == "normal"
    assert j["sent"]["candidate"]["form"] == "token-id prompt, log-probs, token ids out"
    assert j["sent"]["reference"]["device"] in ("cpu", "cuda")  # auto resolved
    # the server got exactly the ids an independent tokenisation gives, greedy, same limit
    sent = engine_server.requests[before:]
    expected = sorted(prompt_ids(tiny_model, r) for r in records(rollout_dataset))
    assert sorted(b["prompt"] for b in sent) == expected
    assert all(b["temperature"] == 0 and b["max_tokens"] == MAX_NEW and b["top_p"] == 1
               for b in sent)
    # and the neutral values of every sampling field vLLM would otherwise take from the
    # model's generation_config.json
    assert all({k: b.get(k) for k in NEUTRAL} == NEUTRAL for b in sent)
    assert {k: j["sent"]["candidate"][k] for k in NEUTRAL} == NEUTRAL
    # both sides are scored on the expected answers (the random model is mostly wrong)
    assert j["reference_accuracy"] == j["candidate_accuracy"]
    assert all(s["reference"]["text"] == s["candidate"]["text"] for s in j["per_sample"])


def test_perturbed_model_diverges_where_independent_greedy_runs_do(
        engine_server_perturbed, tiny_model, tiny_model_perturbed, rollout_dataset):
    report = run(spec(rollout_dataset, tiny_model, engine_server_perturbed.v1))
    expected = expected_divergences(tiny_model, tiny_model_perturbed, rollout_dataset)
    assert expected, "the perturbed model must diverge somewhere"
    assert divergences(report) == expected
    assert report.verdict == "divergent" and report.exit_code() == 1
    assert report.agreement_rate == (8 - len(expected)) / 8
    worst = sorted_results(report)[0]
    assert worst.first_divergence.index == min(k for k, _, _ in expected.values())
    assert report.causes()
    md = report.to_markdown()
    assert "DIVERGENT" in md and f"@{worst.first_divergence.index}:" in md


def test_nudged_model_keeps_the_tokens_and_moves_the_logprobs(
        engine_server_nudged, tiny_model, rollout_dataset):
    report = run(spec(rollout_dataset, tiny_model, engine_server_nudged.v1))
    j = report.to_json()
    assert j["agreement_rate"] == 1.0
    lp = j["logprob_diff"]
    assert 0 < lp["mean"] < 0.005 and lp["max"] > 0 and lp["verdict"] == "normal"
    assert all(s["logprob"]["tokens"] == MAX_NEW for s in j["per_sample"])


def test_sglang_generate_same_and_perturbed(engine_server, engine_server_perturbed, tiny_model,
                                            tiny_model_perturbed, rollout_dataset):
    same = run(spec(rollout_dataset, tiny_model, engine_server.url + "/generate"))
    assert same.agreement_rate == 1.0 and same.sent["candidate"]["endpoint"] == "generate"
    assert same.logprob.max < 1e-4 and same.limits == []
    sent = [b for b, p in zip(engine_server.requests, engine_server.paths) if p == "/generate"]
    assert sent and all(b["sampling_params"]["temperature"] == 0 and "input_ids" in b
                        and b["sampling_params"]["max_new_tokens"] == MAX_NEW for b in sent)
    assert all({k: b["sampling_params"][k] for k in NEUTRAL} == NEUTRAL for b in sent)
    diverged = run(spec(rollout_dataset, tiny_model, engine_server_perturbed.url, api="generate"))
    assert divergences(diverged) == expected_divergences(tiny_model, tiny_model_perturbed,
                                                         rollout_dataset)


def test_chat_endpoint_says_it_re_templates(engine_server, engine_server_perturbed, tiny_model,
                                           tiny_model_perturbed, rollout_dataset):
    before = len(engine_server.requests)
    report = run(spec(rollout_dataset, tiny_model, engine_server.v1, api="chat"))
    sent = engine_server.requests[before:]
    assert sent and all({k: b.get(k) for k in NEUTRAL} == NEUTRAL and "messages" in b
                        for b in sent)
    j = report.to_json()
    assert j["agreement_rate"] == 1.0 and j["compared"] == 7
    assert any("chat endpoint" in line and "chat template" in line for line in j["limits"])
    # the input_ids-only sample cannot go to a chat endpoint: skipped, with the reason
    assert [s["line"] for s in j["skipped"]] == [3]
    assert "chat endpoint takes messages" in j["skipped"][0]["reason"]
    diverged = run(spec(rollout_dataset, tiny_model, engine_server_perturbed.v1, api="chat"))
    assert divergences(diverged) == expected_divergences(
        tiny_model, tiny_model_perturbed, rollout_dataset, chat=True)


def test_a_second_endpoint_as_the_reference(engine_server, engine_server_perturbed, tiny_model,
                                            rollout_dataset):
    same = run(spec(rollout_dataset, engine_server.v1, engine_server.url + "/generate",
                    tokenizer=str(tiny_model)))
    assert same.agreement_rate == 1.0 and same.logprob.max < 1e-4
    assert same.sent["reference"]["endpoint"] == "completions"
    other = run(spec(rollout_dataset, engine_server.v1, engine_server_perturbed.v1,
                     tokenizer=str(tiny_model)))
    assert other.verdict == "divergent"


def test_no_logprobs_and_refused_token_ids_are_limits(tiny_model, rollout_dataset):
    with EngineServer(tiny_model, no_logprobs=True, refuse_token_ids=True) as server:
        report = run(spec(rollout_dataset, tiny_model, server.v1))
    j = report.to_json()
    assert j["agreement_rate"] == 1.0, report.to_text()
    assert j["logprob_diff"] is None and "no log-probs from the candidate" in \
        j["logprob_diff_reason"]
    limits = " ".join(j["limits"])
    assert "did not take token ids" in limits and "prompt must be a string" in limits
    assert "returns no log-probs" in limits
    assert j["sent"]["candidate"]["form"] == "text prompt, log-probs, token ids out"
    # vLLM's return_token_ids still gives the output ids: nothing re-tokenised
    assert "re-tokenised" not in limits
    assert all(s["compared_on"] == "token ids" for s in j["per_sample"])


def test_a_prompt_whose_text_re_tokenises_differently_is_refused(tiny_model, tmp_path):
    tok = tokenizer(tiny_model)
    # "cat" spelt as three byte tokens: decodes to "cat", which the server encodes as one token
    odd = tok.convert_tokens_to_ids(["c", "a", "t"]) + tok(" is", add_special_tokens=False)[
        "input_ids"]
    dataset = tmp_path / "d.jsonl"
    dataset.write_text(json.dumps({"input_ids": odd}) + "\n"
                       + json.dumps({"prompt": "what is 2 plus 3 ?"}) + "\n")
    with EngineServer(tiny_model, refuse_token_ids=True) as server:
        report = run(spec(dataset, tiny_model, server.v1))
        only_odd = tmp_path / "odd.jsonl"
        only_odd.write_text(json.dumps({"input_ids": odd}) + "\n")
        nothing = run(spec(only_odd, tiny_model, server.v1))
    refused = [r for r in report.results if r.status == "refused"]
    assert [r.index for r in refused] == [0]
    assert f"counted {len(odd) - 2} prompt tokens where the reference tokenizer built " \
           f"{len(odd)}" in refused[0].refused
    assert report.results[1].status == "match" and report.exit_code() == 0
    assert nothing.verdict == "nothing-compared" and nothing.exit_code() == 2


# ----- what each server is sent, and what it could not take -----


def test_a_strict_openai_server_is_asked_without_the_neutral_fields(tiny_model, rollout_dataset):
    """A server that refuses fields outside OpenAI's schema (as the OpenAI API and transformers
    serve do) gets the request without them, and limits say what greedy then rests on."""
    with EngineServer(tiny_model, strict_openai=True) as server:
        report = run(spec(rollout_dataset, tiny_model, server.v1))
    j = report.to_json()
    assert j["agreement_rate"] == 1.0 and report.exit_code() == 0, report.to_text()
    assert j["sent"]["candidate"]["form"] == ("token-id prompt, log-probs, no neutral sampling "
                                              "fields")
    assert not {"repetition_penalty", "top_k", "min_p"} & set(j["sent"]["candidate"])
    assert j["sent"]["candidate"]["frequency_penalty"] == 0
    line = next(x for x in j["limits"] if "refused the neutral sampling fields" in x)
    assert "Unexpected fields in the request" in line and "min_p" in line
    assert "rests on the server's own defaults" in line
    # two refused forms (with the vLLM fields, then with the neutral ones), then the samples
    first, second, *accepted = server.requests
    assert "return_token_ids" in first and "top_k" in second and "return_token_ids" not in second
    assert len(accepted) == 8 and all(
        not {"top_k", "min_p", "repetition_penalty"} & set(b) and b["frequency_penalty"] == 0
        and b["presence_penalty"] == 0 and b["temperature"] == 0 for b in accepted)


def test_model_is_said_unused_for_a_native_generate(engine_server, tiny_model, rollout_dataset):
    report = run(spec(rollout_dataset, tiny_model, engine_server.url + "/generate",
                      model="my-model", limit=2))
    assert report.exit_code() == 0
    assert any(line.startswith("--model 'my-model' was not used: a native /generate")
               for line in report.limits)
    assert report.sent["candidate"]["model"] is None


@pytest.mark.parametrize("limit, lines, skipped", [
    (4, [1, 2, 4, 5], [3]),   # line 3 holds only input_ids: not for a chat endpoint
    (2, [1, 2], []),          # the limit is reached before line 3 is looked at
])
def test_limit_counts_the_samples_that_can_be_sent(engine_server, tiny_model, rollout_dataset,
                                                   limit, lines, skipped):
    report = run(spec(rollout_dataset, tiny_model, engine_server.v1, api="chat", limit=limit))
    j = report.to_json()
    assert [s["line"] for s in j["per_sample"]] == lines and j["samples"] == limit
    assert [s["line"] for s in j["skipped"]] == skipped
    assert report.exit_code() == 0
