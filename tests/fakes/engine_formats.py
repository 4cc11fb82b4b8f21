"""The answers of the engine server (engine_server.py) in vLLM's and SGLang's documented formats.

``EngineFormats`` is mixed into ``EngineServer``: it builds vLLM's OpenAI-compatible
``/v1/models``, ``/v1/completions`` and ``/v1/chat/completions`` answers (with the ``logprobs``,
``return_tokens_as_token_ids`` and ``return_token_ids`` extensions) and SGLang's native
``/generate`` answer, from the server's engine (``_engine``: a real tiny model, or the fast one)
and its knobs (``served_model_name``, ``model_folder``, ``refuse_token_ids``, ``no_logprobs``).
Errors are raised as ``HTTPError`` with the body each server sends.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.fakes.tinylm import Generation

MAX_LOGPROBS = 20  # vLLM's default --max-logprobs

# The request fields of OpenAI's own schema (openai-python's CompletionCreateParams and
# ChatCompletionCreateParams). ``strict_openai`` servers refuse any other field, as the OpenAI
# API and ``transformers serve`` do (422 "Unexpected fields in the request"); vLLM and SGLang
# take their extensions (top_k, min_p, repetition_penalty, return_token_ids...).
OPENAI_FIELDS = {
    "/v1/completions": frozenset({
        "model", "prompt", "best_of", "echo", "frequency_penalty", "logit_bias", "logprobs",
        "max_tokens", "n", "presence_penalty", "seed", "stop", "stream", "stream_options",
        "suffix", "temperature", "top_p", "user"}),
    "/v1/chat/completions": frozenset({
        "messages", "model", "audio", "frequency_penalty", "function_call", "functions",
        "logit_bias", "logprobs", "max_completion_tokens", "max_tokens", "metadata",
        "modalities", "n", "parallel_tool_calls", "prediction", "presence_penalty",
        "reasoning_effort", "response_format", "seed", "service_tier", "stop", "store", "stream",
        "stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user",
        "web_search_options"}),
}


class HTTPError(Exception):
    def __init__(self, status: int, body: dict) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


def vllm_error(status: int, message: str, kind: str) -> HTTPError:
    """vLLM's ErrorResponse body (the OpenAI-style object it returns for a bad request)."""
    return HTTPError(status, {"object": "error", "message": message, "type": kind,
                              "param": None, "code": status})


def as_int(value: Any, default: int, name: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise vllm_error(400, f"{name} must be a non-negative integer, got {value!r}",
                         "BadRequestError")
    return value


def refuse_unknown_fields(path: str, body: dict) -> None:
    """What a strict OpenAI server answers to a field outside its schema (transformers serve's
    words and status)."""
    allowed = OPENAI_FIELDS.get(path)
    unexpected = set(body) - allowed if allowed is not None else set()
    if unexpected:
        raise HTTPError(422, {"detail": f"Unexpected fields in the request: {sorted(unexpected)}"})


class EngineFormats:
    """The answers; see the module doc for the attributes it reads."""

    served_model_name: str
    model_folder: Any
    refuse_token_ids: bool
    no_logprobs: bool
    _engine: Any

    def _models(self) -> dict:
        return {"object": "list", "data": [{
            "id": self.served_model_name, "object": "model", "created": int(time.time()),
            "owned_by": "vllm", "root": str(self.model_folder), "parent": None,
            "max_model_len": 1024,
        }]}

    def _check_model(self, body: dict) -> None:
        model = body.get("model")
        if model and model != self.served_model_name:
            raise vllm_error(404, f"The model `{model}` does not exist.", "NotFoundError")

    def _refuse_ids(self) -> None:
        if self.refuse_token_ids:
            # What transformers serve answers (FastAPI's HTTPException body).
            raise HTTPError(400, {"detail": "prompt must be a string."})

    def _sampling(self, body: dict, max_key: str, default_max: int) -> tuple[int, float, Any]:
        if body.get("stream"):
            raise vllm_error(400, "stream is not supported by this test server",
                             "BadRequestError")
        if body.get("n", 1) != 1:
            raise vllm_error(400, "n must be 1 on this test server", "BadRequestError")
        max_tokens = as_int(body.get(max_key), default_max, max_key)
        temperature = body.get("temperature")
        return max_tokens, 1.0 if temperature is None else float(temperature), body.get("top_p")

    def _usage(self, results: list[Generation]) -> dict:
        prompt = sum(len(r.prompt_ids) for r in results)
        completion = sum(len(r.ids) for r in results)
        return {"prompt_tokens": prompt, "total_tokens": prompt + completion,
                "completion_tokens": completion, "prompt_tokens_details": None}

    def _token(self, token_id: int, as_id: bool) -> str:
        return f"token_id:{token_id}" if as_id else self._engine.token_text(token_id)

    def _completions(self, body: dict) -> dict:
        self._check_model(body)
        max_tokens, temperature, top_p = self._sampling(body, "max_tokens", 16)
        k = body.get("logprobs")
        if k is not None:
            k = as_int(k, 0, "logprobs")
            if k > MAX_LOGPROBS:
                raise vllm_error(400, f"Requested sample logprobs of {k}, which is greater than "
                                 f"max allowed: {MAX_LOGPROBS}", "BadRequestError")
        if self.no_logprobs:
            k = None
        prompt = body.get("prompt")
        # vLLM accepts a string, a list of token ids, or a batch of either.
        if isinstance(prompt, str) or (isinstance(prompt, list) and prompt
                                       and all(isinstance(t, int) for t in prompt)):
            prompts = [prompt]
        elif isinstance(prompt, list) and prompt and all(isinstance(p, (str, list))
                                                         for p in prompt):
            prompts = prompt
        else:
            raise vllm_error(400, "prompt must be a string, a list of token ids, or a list of "
                             "either", "BadRequestError")
        as_id = bool(body.get("return_tokens_as_token_ids"))
        choices, results = [], []
        for index, one in enumerate(prompts):
            if isinstance(one, list):
                self._refuse_ids()
                ids = list(one)
            else:
                ids = self._engine.encode(one)
            result = self._engine.generate(ids, max_tokens, temperature, top_p, k or 0)
            results.append(result)
            choice = {"index": index, "text": self._engine.decode(result.ids),
                      "logprobs": None if k is None else self._completion_logprobs(
                          result, k, as_id),
                      "finish_reason": "stop" if result.stopped else "length",
                      "stop_reason": None, "prompt_logprobs": None}
            if body.get("return_token_ids"):
                choice["prompt_token_ids"] = result.prompt_ids
                choice["token_ids"] = result.ids
            choices.append(choice)
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion",
                "created": int(time.time()), "model": self.served_model_name,
                "choices": choices, "usage": self._usage(results)}

    def _completion_logprobs(self, result: Generation, k: int, as_id: bool) -> dict:
        tokens, offsets, top_logprobs = [], [], []
        offset = 0
        for token_id, logprob, top in zip(result.ids, result.logprobs, result.top):
            token = self._token(token_id, as_id)
            tokens.append(token)
            offsets.append(offset)
            offset += len(token)
            # vLLM: the chosen token first, then the top-k, keeping k + 1 distinct entries.
            entries = {token_id: logprob}
            for other, value in top[:k]:
                entries.setdefault(other, value)
            top_logprobs.append({self._token(t, as_id): max(v, -9999.0)
                                 for t, v in list(entries.items())[:k + 1]})
        return {"text_offset": offsets, "token_logprobs": [max(v, -9999.0)
                                                           for v in result.logprobs],
                "tokens": tokens, "top_logprobs": top_logprobs}

    def _chat(self, body: dict) -> dict:
        self._check_model(body)
        key = "max_completion_tokens" if body.get("max_completion_tokens") is not None \
            else "max_tokens"
        max_tokens, temperature, top_p = self._sampling(body, key, 64)
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise vllm_error(400, "messages must be a non-empty list", "BadRequestError")
        flat = []
        for message in messages:
            content = message.get("content")
            if isinstance(content, list):  # OpenAI content parts: keep the text ones
                content = "".join(p.get("text", "") for p in content if p.get("type") == "text")
            flat.append({"role": message.get("role", "user"), "content": content or ""})
        want = bool(body.get("logprobs")) and not self.no_logprobs
        top_n = as_int(body.get("top_logprobs"), 0, "top_logprobs") if want else 0
        result = self._engine.generate(self._engine.chat_ids(flat), max_tokens, temperature,
                                       top_p, top_n)
        as_id = bool(body.get("return_tokens_as_token_ids"))
        logprobs = None
        if want:
            content = []
            for token_id, logprob, top in zip(result.ids, result.logprobs, result.top):
                token = self._token(token_id, as_id)
                content.append({
                    "token": token, "logprob": max(logprob, -9999.0),
                    "bytes": list(token.encode("utf-8", errors="replace")),
                    "top_logprobs": [
                        {"token": self._token(t, as_id), "logprob": max(v, -9999.0),
                         "bytes": list(self._token(t, as_id).encode("utf-8", errors="replace"))}
                        for t, v in top[:top_n]],
                })
            logprobs = {"content": content}
        choice = {"index": 0, "message": {"role": "assistant",
                                          "content": self._engine.decode(result.ids),
                                          "reasoning_content": None, "tool_calls": []},
                  "logprobs": logprobs, "finish_reason": "stop" if result.stopped else "length",
                  "stop_reason": None}
        response = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion",
                    "created": int(time.time()), "model": self.served_model_name,
                    "choices": [choice], "usage": self._usage([result]), "prompt_logprobs": None}
        if body.get("return_token_ids"):
            choice["token_ids"] = result.ids
            response["prompt_token_ids"] = result.prompt_ids
        return response

    def _generate(self, body: dict) -> dict:
        """SGLang's native /generate: one prompt, text or input_ids, non-streaming."""
        started = time.monotonic()
        text, input_ids = body.get("text"), body.get("input_ids")
        if (text is None) == (input_ids is None):
            raise HTTPError(400, {"error": {"message": "Either text or input_ids should be "
                                            "provided, not both or neither."}})
        if input_ids is not None:
            if not (isinstance(input_ids, list) and input_ids
                    and all(isinstance(t, int) for t in input_ids)):
                raise HTTPError(400, {"error": {"message": "input_ids must be one list of "
                                                "token ids on this test server"}})
            self._refuse_ids()
            ids = list(input_ids)
        elif isinstance(text, str):
            ids = self._engine.encode(text)
        else:
            raise HTTPError(400, {"error": {"message": "text must be one string on this test "
                                            "server"}})
        params = body.get("sampling_params") or {}
        max_new = as_int(params.get("max_new_tokens"), 128, "max_new_tokens")
        temperature = float(params.get("temperature", 1.0))
        want = bool(body.get("return_logprob")) and not self.no_logprobs
        top_n = as_int(body.get("top_logprobs_num"), 0, "top_logprobs_num") if want else 0
        result = self._engine.generate(ids, max_new, temperature, params.get("top_p"), top_n)
        with_text = bool(body.get("return_text_in_logprobs"))

        def entry(logprob: float | None, token_id: int) -> list:
            return [logprob, token_id, self._engine.token_text(token_id) if with_text else None]

        finish = ({"type": "stop", "matched": result.ids[-1]} if result.stopped
                  else {"type": "length", "length": len(result.ids)})
        meta = {"id": uuid.uuid4().hex, "finish_reason": finish,
                "prompt_tokens": len(ids), "completion_tokens": len(result.ids),
                "cached_tokens": 0}
        if want:
            meta["input_token_logprobs"] = [entry(None, ids[-1])]
            meta["output_token_logprobs"] = [entry(lp, t)
                                             for t, lp in zip(result.ids, result.logprobs)]
            if top_n:
                meta["output_top_logprobs"] = [[entry(v, t) for t, v in top[:top_n]]
                                               for top in result.top]
        meta["e2e_latency"] = time.monotonic() - started
        return {"text": self._engine.decode(result.ids), "output_ids": result.ids,
                "meta_info": meta}
