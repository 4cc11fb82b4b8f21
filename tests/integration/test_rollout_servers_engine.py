"""The engine server of tests/fakes, proved: it speaks vLLM's and SGLang's documented formats,
generates what local transformers generates, and its knobs misbehave as documented. (The tiny
model and ``transformers serve``: test_rollout_servers.py.)
"""

from __future__ import annotations

import threading
import urllib.error

import pytest

from tests.fakes.engine_server import EngineServer
from tests.integration.test_rollout_servers import (
    MAX_NEW,
    _call,
    _greedy,
    _prompt_ids,
    _records,
    _tokenizer,
)

pytestmark = pytest.mark.integration


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


def test_engine_strict_openai_refuses_fields_outside_openais_schema(tiny_model):
    with EngineServer(tiny_model, strict_openai=True, fast=True) as server:
        status, body = _call(server.v1 + "/completions", {
            "prompt": [1, 2], "max_tokens": 2, "temperature": 0, "top_k": -1, "min_p": 0,
            "return_token_ids": True})
        assert status == 422
        assert body == {"detail": "Unexpected fields in the request: ['min_p', "
                                  "'return_token_ids', 'top_k']"}
        status, _ = _call(server.v1 + "/chat/completions", {
            "messages": [{"role": "user", "content": "hi"}], "repetition_penalty": 1})
        assert status == 422
        status, _ = _call(server.v1 + "/completions", {
            "prompt": [1, 2], "max_tokens": 2, "temperature": 0, "top_p": 1, "logprobs": 1,
            "frequency_penalty": 0, "presence_penalty": 0})
        assert status == 200
        status, _ = _call(server.url + "/generate", {
            "input_ids": [1, 2], "sampling_params": {"max_new_tokens": 2, "top_k": -1}})
        assert status == 200  # SGLang's native API has no OpenAI schema to keep to
        assert len(server.requests) == 4  # refused requests are recorded too
