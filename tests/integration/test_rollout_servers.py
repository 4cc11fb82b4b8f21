"""The rollout-check test infrastructure, proved: the tiny model, its tokenizer, and both servers.

The rollout-consistency check is tested against these, so the facts it relies on are asserted
here: text round-trips through the tokenizer; the perturbed model diverges and the nudged one
keeps the tokens but moves the log-probs; the engine server speaks vLLM's and SGLang's formats
and generates what local transformers generates; and ``transformers serve`` answers text but
refuses token-id prompts and returns no log-probs (if a transformers release changes that, these
tests say so, and the check's "limits" need a look).
"""

from __future__ import annotations

import json
import random
import threading
import urllib.error
import urllib.request
from functools import lru_cache
from pathlib import Path

import pytest

from tests.fakes.engine_server import EngineServer
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


@lru_cache(maxsize=None)
def _tokenizer(folder: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


@lru_cache(maxsize=None)
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


# ----- the engine server (vLLM / SGLang formats) -----


def test_engine_server_lists_its_model_and_answers_health(engine_server, tiny_model):
    status, body = _call(engine_server.url + "/health")
    assert status == 200
    status, body = _call(engine_server.v1 + "/models")
    assert status == 200 and body["object"] == "list"
    assert body["data"][0]["id"] == str(tiny_model) and body["data"][0]["object"] == "model"


def test_engine_completions_match_local_greedy(engine_server, tiny_model, rollout_dataset):
    tok = _tokenizer(tiny_model)
    for record in _records(rollout_dataset)[:4]:
        ids = _prompt_ids(tiny_model, record)
        expected, expected_lp = _greedy(tiny_model, ids)
        for prompt in (ids, tok.decode(ids)):
            status, body = _call(engine_server.v1 + "/completions", {
                "model": str(tiny_model), "prompt": prompt, "max_tokens": MAX_NEW,
                "temperature": 0, "logprobs": 2, "return_tokens_as_token_ids": True,
            })
            assert status == 200, body
            choice = body["choices"][0]
            assert choice["finish_reason"] == "length"
            assert choice["text"] == tok.decode(expected)
            logprobs = choice["logprobs"]
            assert set(logprobs) == {"tokens", "token_logprobs", "top_logprobs", "text_offset"}
            assert [int(t.removeprefix("token_id:")) for t in logprobs["tokens"]] == expected
            assert logprobs["token_logprobs"] == pytest.approx(expected_lp, abs=1e-5)
            assert all(len(top) == 2 and logprobs["tokens"][i] in top
                       for i, top in enumerate(logprobs["top_logprobs"]))
            assert body["usage"]["prompt_tokens"] == len(ids)
            assert body["usage"]["completion_tokens"] == MAX_NEW


def test_engine_completion_tokens_as_text_and_token_ids(engine_server, tiny_model):
    tok = _tokenizer(tiny_model)
    status, body = _call(engine_server.v1 + "/completions", {
        "prompt": "what is 2 plus 3 ?", "max_tokens": 4, "temperature": 0, "logprobs": 0,
        "return_token_ids": True})
    assert status == 200
    choice = body["choices"][0]
    assert choice["prompt_token_ids"] == tok.encode("what is 2 plus 3 ?")
    assert choice["logprobs"]["tokens"] == [tok.decode([t]) for t in choice["token_ids"]]
    assert all(len(top) == 1 for top in choice["logprobs"]["top_logprobs"])


def test_engine_chat_matches_local_greedy_over_the_chat_template(engine_server, tiny_model):
    messages = [{"role": "system", "content": "think step by step ."},
                {"role": "user", "content": "what is 9 minus 4 ?"}]
    expected, expected_lp = _greedy(tiny_model, _prompt_ids(tiny_model, {"messages": messages}))
    status, body = _call(engine_server.v1 + "/chat/completions", {
        "model": str(tiny_model), "messages": messages, "max_tokens": MAX_NEW, "temperature": 0,
        "logprobs": True, "top_logprobs": 3, "return_tokens_as_token_ids": True})
    assert status == 200, body
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == _tokenizer(tiny_model).decode(expected)
    content = choice["logprobs"]["content"]
    assert [int(c["token"].removeprefix("token_id:")) for c in content] == expected
    assert [c["logprob"] for c in content] == pytest.approx(expected_lp, abs=1e-5)
    assert all(set(c) == {"token", "logprob", "bytes", "top_logprobs"} for c in content)
    assert all(len(c["top_logprobs"]) == 3 for c in content)
    assert body["usage"]["completion_tokens"] == MAX_NEW


def test_engine_sglang_generate_matches_local_greedy(engine_server, tiny_model):
    ids = _prompt_ids(tiny_model, {"prompt": "is the apple red ?"})
    expected, expected_lp = _greedy(tiny_model, ids)
    status, body = _call(engine_server.url + "/generate", {
        "input_ids": ids, "return_logprob": True,
        "sampling_params": {"temperature": 0, "max_new_tokens": MAX_NEW}})
    assert status == 200, body
    assert body["output_ids"] == expected
    assert body["text"] == _tokenizer(tiny_model).decode(expected)
    meta = body["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": MAX_NEW}
    assert (meta["prompt_tokens"], meta["completion_tokens"]) == (len(ids), MAX_NEW)
    assert [entry[1] for entry in meta["output_token_logprobs"]] == expected
    assert [entry[0] for entry in meta["output_token_logprobs"]] == pytest.approx(expected_lp,
                                                                                  abs=1e-5)
    assert all(entry[2] is None for entry in meta["output_token_logprobs"])
    status, by_text = _call(engine_server.url + "/generate", {
        "text": _tokenizer(tiny_model).decode(ids),
        "sampling_params": {"temperature": 0, "max_new_tokens": MAX_NEW}})
    assert status == 200 and by_text["output_ids"] == expected
    assert "output_token_logprobs" not in by_text["meta_info"]


def test_engine_refuses_a_wrong_model_name_like_vllm(engine_server):
    status, body = _call(engine_server.v1 + "/completions",
                         {"model": "nope", "prompt": "hello", "max_tokens": 2})
    assert status == 404
    assert body == {"object": "error", "message": "The model `nope` does not exist.",
                    "type": "NotFoundError", "param": None, "code": 404}


def test_engine_answers_bad_input_with_a_400_in_each_format(engine_server):
    status, body = _call(engine_server.v1 + "/completions",
                         {"prompt": [1, 10**6], "max_tokens": 2, "temperature": 0})
    assert status == 400 and body["type"] == "BadRequestError"
    assert "out of vocabulary" in body["message"]
    status, body = _call(engine_server.v1 + "/completions",
                         {"prompt": "hi", "max_tokens": 5000, "temperature": 0})
    assert status == 400 and "maximum context length" in body["message"]
    status, body = _call(engine_server.url + "/generate",
                         {"text": "hi", "input_ids": [1], "sampling_params": {}})
    assert status == 400 and "message" in body["error"]
    status, body = _call(engine_server.v1 + "/chat/completions", {"messages": []})
    assert status == 400 and body["object"] == "error"


def test_engine_records_what_it_was_sent(tiny_model):
    with EngineServer(tiny_model, served_model_name="tiny") as server:
        assert _call(server.v1 + "/models")[1]["data"][0]["id"] == "tiny"
        sent = {"model": "tiny", "prompt": [1, 2, 3], "max_tokens": 1, "temperature": 0}
        assert _call(server.v1 + "/completions", sent)[0] == 200
        assert server.requests == [sent] and server.paths == ["/v1/completions"]


def test_engine_knobs(tiny_model):
    with EngineServer(tiny_model, api_key="sk-test-123", fail_after=1, refuse_token_ids=True,
                      no_logprobs=True) as server:
        assert "sk-test-123" not in repr(server)
        body = {"prompt": "hello", "max_tokens": 2, "logprobs": 1}
        assert _call(server.v1 + "/completions", body)[0] == 401
        assert _call(server.v1 + "/models", headers={"Authorization": "Bearer wrong"})[0] == 401
        auth = {"Authorization": "Bearer sk-test-123"}
        assert _call(server.url + "/health")[0] == 200
        assert _call(server.v1 + "/models", headers=auth)[0] == 200
        status, answer = _call(server.v1 + "/completions", body, auth)
        assert status == 200 and answer["choices"][0]["logprobs"] is None
        assert _call(server.v1 + "/completions", body, auth)[0] == 503  # after one request
    with EngineServer(tiny_model, refuse_token_ids=True) as server:
        status, answer = _call(server.v1 + "/completions", {"prompt": [1, 2], "max_tokens": 2})
        assert (status, answer) == (400, {"detail": "prompt must be a string."})


def test_engine_delay_ends_when_the_server_stops(tiny_model):
    server = EngineServer(tiny_model, delay_s=600).start()
    result: dict = {}

    def call() -> None:
        result["status"] = _call(server.v1 + "/completions", {"prompt": "hi", "max_tokens": 1})[0]

    worker = threading.Thread(target=call)
    worker.start()
    # The request is in the server, waiting out its delay.
    assert server.request_received.wait(30)
    server.stop()
    worker.join(30)
    assert result == {"status": 503}


def test_engine_stop_closes_kept_alive_connections(tiny_model):
    import http.client

    server = EngineServer(tiny_model, fast=True).start()
    connection = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]),
                                            timeout=30)
    connection.request("GET", "/health")
    assert connection.getresponse().read() == b""  # the connection stays open (HTTP/1.1)
    server.stop()
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        connection.request("GET", "/health")
        connection.getresponse()
    connection.close()


def test_engine_kill_drops_requests_in_flight(tiny_model):
    server = EngineServer(tiny_model, fast=True, delay_s=600).start()
    result: dict = {}

    def call() -> None:
        try:
            result["status"] = _call(server.v1 + "/completions", {"prompt": "hi"})[0]
        except (urllib.error.URLError, ConnectionError) as exc:
            result["error"] = exc

    worker = threading.Thread(target=call)
    worker.start()
    assert server.request_received.wait(30)
    server.kill()
    worker.join(30)
    assert "status" not in result and "error" in result


def test_engine_fast_mode_answers_without_a_model(tiny_model):
    with EngineServer(tiny_model, fast=True) as server:
        status, body = _call(server.v1 + "/completions",
                             {"prompt": "hello", "max_tokens": 5, "logprobs": 1})
        assert status == 200 and body["usage"]["completion_tokens"] == 5
        assert body["choices"][0]["text"] == " the answer is 4"
        status, body = _call(server.url + "/generate", {
            "input_ids": [1, 2], "sampling_params": {"max_new_tokens": 3}})
        assert status == 200 and len(body["output_ids"]) == 3


def test_engine_server_runs_in_its_own_process(tiny_model):
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.engine_server", str(tiny_model), "--fast",
         "--served-model-name", "bench"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("engine-server ready http://127.0.0.1:"), line
        status, body = _call(line.split()[-1] + "/v1/models")
        assert status == 200 and body["data"][0]["id"] == "bench"
    finally:
        process.stdin.close()  # the documented way to stop it
        assert process.wait(timeout=30) == 0


def test_engine_serves_another_model_folder(engine_server_perturbed, tiny_model,
                                            tiny_model_perturbed):
    ids = _prompt_ids(tiny_model, {"prompt": "what is 2 plus 3 ?"})
    status, body = _call(engine_server_perturbed.v1 + "/completions", {
        "prompt": ids, "max_tokens": MAX_NEW, "temperature": 0, "return_token_ids": True})
    assert status == 200
    assert body["choices"][0]["token_ids"] == _greedy(tiny_model_perturbed, ids)[0]
    assert body["choices"][0]["token_ids"] != _greedy(tiny_model, ids)[0]


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
