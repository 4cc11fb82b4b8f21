"""The rollout-check test infrastructure, proved: the tiny model, its tokenizer, and both servers.

The rollout-consistency check is tested against these, so the facts it relies on are asserted
here: text round-trips through the tokenizer; the perturbed model diverges and the nudged one
keeps the tokens but moves the log-probs; and ``transformers serve`` answers text but refuses
token-id prompts and sampling fields outside OpenAI's schema, and returns no log-probs (if a
transformers release changes that, these tests say so, and the check's "limits" need a look).
The engine server (vLLM's and SGLang's formats) is proved in test_rollout_servers_engine.py.
"""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request
from functools import cache
from pathlib import Path

import pytest

from tests.fakes.tinylm import PRODUCIBLE, build_tiny_model, sample_dataset

pytestmark = pytest.mark.integration

MAX_NEW = 16


def _call(url: str, body: dict | None = None, headers: dict | None = None) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json",
                                                              **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, json.loads(raw) if raw else None


@cache
def _tokenizer(folder: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


@cache
def _model(folder: Path):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def _greedy(folder: Path, ids: list[int], n: int = MAX_NEW) -> tuple[list[int], list[float]]:
    """Reference greedy generation in this process: tokens and their log-probs."""
    import torch

    with torch.no_grad():
        out = _model(folder).generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False,
                                      output_logits=True, return_dict_in_generate=True)
    tokens = out.sequences[0, len(ids):].tolist()
    logprobs = [float(torch.log_softmax(step[0], -1)[t]) for step, t in zip(out.logits, tokens)]
    return tokens, logprobs


def _prompt_ids(folder: Path, record: dict) -> list[int]:
    if "input_ids" in record:
        return record["input_ids"]
    messages = record.get("messages") or [{"role": "user", "content": record["prompt"]}]
    encoded = _tokenizer(folder).apply_chat_template(messages, add_generation_prompt=True,
                                                     tokenize=True, return_dict=True)
    return list(encoded["input_ids"])


def _records(dataset: Path) -> list[dict]:
    return [json.loads(line) for line in dataset.read_text().splitlines()]


# ----- the tiny model and its tokenizer -----


def test_tokenizer_round_trips_text_and_producible_ids(tiny_model, rollout_dataset):
    from tokenizers import Tokenizer

    tok = _tokenizer(tiny_model)
    # transformers loads any qwen2 tokenizer with its own class; ours must survive that.
    assert type(tok).__name__ == "Qwen2Tokenizer"
    raw = Tokenizer.from_file(str(tiny_model / "tokenizer.json"))
    texts = ["what is 2 plus 3 ?", " in5 think or please", "hello  world\n\n1+1=2 ?!",
             tok.apply_chat_template([{"role": "user", "content": "is the sky blue ?"}],
                                     add_generation_prompt=True, tokenize=False)]
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.decode(ids) == text
        assert raw.encode(text, add_special_tokens=False).ids == ids
    producible = tok.convert_tokens_to_ids(PRODUCIBLE)
    assert tok.unk_token_id not in producible and len(set(producible)) == len(PRODUCIBLE)
    rng = random.Random(0)
    for _ in range(500):
        ids = [rng.choice(producible) for _ in range(rng.randint(1, 24))]
        text = tok.decode(ids, skip_special_tokens=True)
        assert tok.encode(text, add_special_tokens=False) == ids, text


def test_model_folder_is_a_qwen2_causal_lm(tiny_model):
    config = json.loads((tiny_model / "config.json").read_text())
    assert config["model_type"] == "qwen2"
    assert (config["hidden_size"], config["num_hidden_layers"]) == (64, 2)
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (4, 2)
    assert config["tie_word_embeddings"] is True
    tok = _tokenizer(tiny_model)
    assert tok.eos_token == "<|im_end|>" and config["eos_token_id"] == tok.eos_token_id
    assert "<|im_start|>" in tok.chat_template
    assert (tiny_model / "model.safetensors").exists()


def test_greedy_output_stays_in_the_producible_set(tiny_model, rollout_dataset):
    producible = set(_tokenizer(tiny_model).convert_tokens_to_ids(PRODUCIBLE))
    outputs = []
    for record in _records(rollout_dataset):
        tokens, _ = _greedy(tiny_model, _prompt_ids(tiny_model, record), 48)
        assert len(tokens) == 48 and set(tokens) <= producible
        outputs.append(tuple(tokens))
    assert len(set(outputs)) == len(outputs)  # prompts matter: no constant output


def test_build_is_deterministic(tmp_path):
    a = build_tiny_model(tmp_path / "a", seed=3)
    b = build_tiny_model(tmp_path / "b", seed=3)
    c = build_tiny_model(tmp_path / "c", seed=4)
    weights = [(m / "model.safetensors").read_bytes() for m in (a, b, c)]
    assert weights[0] == weights[1] != weights[2]
    assert (a / "tokenizer.json").read_text() == (c / "tokenizer.json").read_text()


def test_other_dtype_is_saved_as_asked(tmp_path):
    folder = build_tiny_model(tmp_path / "bf16", dtype="bfloat16")
    assert json.loads((folder / "config.json").read_text())["dtype"] == "bfloat16"


def test_perturbed_model_diverges_and_nudged_model_only_moves_logprobs(
        tiny_model, tiny_model_perturbed, tiny_model_nudged, rollout_dataset):
    for record in _records(rollout_dataset):
        ids = _prompt_ids(tiny_model, record)
        tokens, logprobs = _greedy(tiny_model, ids)
        perturbed, _ = _greedy(tiny_model_perturbed, ids)
        nudged, nudged_logprobs = _greedy(tiny_model_nudged, ids)
        assert perturbed != tokens, record
        assert perturbed[:8] != tokens[:8], record  # diverges early, not just at the end
        assert nudged == tokens, record
        deltas = [abs(a - b) for a, b in zip(logprobs, nudged_logprobs)]
        # Measurably different, yet "normal" by verl's rule (mean |delta| below 0.005).
        assert sum(deltas) > 0 and sum(deltas) / len(deltas) < 0.005, (record, deltas)


def test_sample_dataset_mixes_prompt_kinds_deterministically(tmp_path, tiny_model):
    first = sample_dataset(tmp_path / "a.jsonl")
    second = sample_dataset(tmp_path / "b.jsonl", n=8)
    assert first.read_bytes() == second.read_bytes()
    records = _records(first)
    assert len(records) == 8 and all(isinstance(r["answer"], str) for r in records)
    kinds = [next(k for k in ("prompt", "messages", "input_ids") if k in r) for r in records]
    assert kinds.count("input_ids") == 1 and kinds.count("prompt") >= 2
    assert kinds.count("messages") >= 2
    ids = next(r["input_ids"] for r in records if "input_ids" in r)
    text = _tokenizer(tiny_model).decode(ids)
    assert text.startswith("<|im_start|>user\n") and text.endswith("<|im_start|>assistant\n")
    assert len(_records(sample_dataset(tmp_path / "c.jsonl", n=20))) == 20


# ----- the real transformers serve -----


@pytest.mark.slow
def test_transformers_serve_answers_text_that_re_encodes_to_local_greedy(
        hf_serve, tiny_model, rollout_dataset):
    tok = _tokenizer(tiny_model)
    status, body = _call(hf_serve.v1 + "/models")
    assert status == 200 and [m["id"] for m in body["data"]] == [hf_serve.model_name]
    for record in _records(rollout_dataset):
        ids = _prompt_ids(tiny_model, record)
        status, body = _call(hf_serve.v1 + "/completions", {
            "model": hf_serve.model_name, "prompt": tok.decode(ids), "max_tokens": MAX_NEW,
            "temperature": 0})
        assert status == 200, body
        assert body["usage"]["prompt_tokens"] == len(ids)
        text = body["choices"][0]["text"]
        assert tok.encode(text, add_special_tokens=False) == _greedy(tiny_model, ids)[0]


@pytest.mark.slow
def test_transformers_serve_limits_the_check_relies_on(hf_serve, tiny_model):
    prompt = "what is 2 plus 3 ?"
    # Token-id prompts are refused.
    status, body = _call(hf_serve.v1 + "/completions",
                         {"prompt": _tokenizer(tiny_model).encode(prompt), "max_tokens": 4})
    assert (status, body) == (400, {"detail": "prompt must be a string."})
    # Log-probs are accepted in the request and silently not returned.
    status, body = _call(hf_serve.v1 + "/completions", {
        "prompt": prompt, "max_tokens": 4, "temperature": 0, "logprobs": 1})
    assert status == 200 and body["choices"][0].get("logprobs") is None
    status, chat = _call(hf_serve.v1 + "/chat/completions", {
        "messages": [{"role": "user", "content": prompt}], "max_tokens": 4, "temperature": 0,
        "logprobs": True, "top_logprobs": 1})
    assert status == 200 and chat["choices"][0].get("logprobs") is None
    # A chat answer loses its leading space: its text does not re-encode to the same tokens.
    status, completion = _call(hf_serve.v1 + "/completions", {
        "prompt": _tokenizer(tiny_model).apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False),
        "max_tokens": 4, "temperature": 0})
    text = completion["choices"][0]["text"]
    assert text.startswith(" ") and chat["choices"][0]["message"]["content"] == text.lstrip()
    # Fields outside OpenAI's schema are refused (engine_server's strict_openai copies this);
    # frequency_penalty 0 is taken (it sets repetition_penalty 1).
    status, body = _call(hf_serve.v1 + "/completions", {
        "prompt": prompt, "max_tokens": 2, "temperature": 0, "top_k": -1, "min_p": 0,
        "repetition_penalty": 1})
    assert status == 422 and body["detail"].startswith("Unexpected fields in the request")
    status, _ = _call(hf_serve.v1 + "/completions", {
        "prompt": prompt, "max_tokens": 2, "temperature": 0, "top_p": 1, "frequency_penalty": 0,
        "presence_penalty": 0})
    assert status == 200
    # A wrong model name is a 400 naming the pinned model (vLLM says 404).
    status, body = _call(hf_serve.v1 + "/completions",
                         {"model": "nope", "prompt": prompt, "max_tokens": 2})
    assert status == 400 and "pinned" in body["detail"]


@pytest.mark.slow
def test_transformers_serve_of_the_perturbed_model_diverges(hf_serve_perturbed, tiny_model,
                                                            rollout_dataset):
    tok = _tokenizer(tiny_model)
    for record in _records(rollout_dataset):
        ids = _prompt_ids(tiny_model, record)
        status, body = _call(hf_serve_perturbed.v1 + "/completions", {
            "prompt": tok.decode(ids), "max_tokens": MAX_NEW, "temperature": 0})
        assert status == 200
        got = tok.encode(body["choices"][0]["text"], add_special_tokens=False)
        assert got != _greedy(tiny_model, ids)[0]
