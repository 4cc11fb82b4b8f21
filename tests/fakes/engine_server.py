"""A real HTTP inference server on 127.0.0.1 that speaks vLLM's and SGLang's documented formats.

vLLM and SGLang need a GPU and cannot run here, so this server stands in for them: a real
transformers model (``tinylm.LocalModel``: float32, CPU, greedy ``generate``) behind real
sockets, answering
vLLM's OpenAI-compatible ``/v1/completions`` and ``/v1/chat/completions`` (with the ``logprobs``,
``return_tokens_as_token_ids`` and ``return_token_ids`` extensions) and SGLang's native
``/generate`` (``input_ids`` or ``text``, ``sampling_params``, ``return_logprob``). Log-probs are
``log_softmax`` of the raw logits at the chosen token, as both engines report them by default.

Knobs make it misbehave on purpose: an API key, extra latency, refusing after N requests,
refusing token-id prompts (as ``transformers serve`` does), ignoring log-prob requests, and a
``fast`` mode with no model at all (to measure a client's own overhead).
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.fakes.tinylm import Generation, InputError, LocalModel

MAX_LOGPROBS = 20  # vLLM's default --max-logprobs
FAST_SENTENCE = " the answer is 4 ."


class HTTPError(Exception):
    def __init__(self, status: int, body: dict) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


def vllm_error(status: int, message: str, kind: str) -> HTTPError:
    """vLLM's ErrorResponse body (the OpenAI-style object it returns for a bad request)."""
    return HTTPError(status, {"object": "error", "message": message, "type": kind,
                              "param": None, "code": status})


class _FastEngine:
    """``fast=True``: no model, a fixed completion; only the tokenizer file is read."""

    eos_id = None

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        self._raw = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._ids = self._raw.encode(FAST_SENTENCE, add_special_tokens=False).ids

    def encode(self, text: str) -> list[int]:
        return self._raw.encode(text, add_special_tokens=False).ids

    def chat_ids(self, messages: list[dict]) -> list[int]:
        return self.encode(" ".join(str(m.get("content", "")) for m in messages))

    def decode(self, ids: list[int]) -> str:
        return self._raw.decode(ids, skip_special_tokens=True)

    def token_text(self, token_id: int) -> str:
        return self._raw.decode([token_id], skip_special_tokens=False)

    def generate(self, prompt_ids: list[int], max_new_tokens: int, temperature: float = 0.0,
                 top_p: float | None = None, top_n: int = 0) -> Generation:
        ids = [self._ids[i % len(self._ids)] for i in range(max_new_tokens)]
        return Generation(prompt_ids, ids, [-0.5] * len(ids), [[(i, -0.5)] for i in ids], False)


def _as_int(value: Any, default: int, name: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise vllm_error(400, f"{name} must be a non-negative integer, got {value!r}",
                         "BadRequestError")
    return value


class EngineServer:
    """``with EngineServer(folder, **knobs) as server:`` ... ``server.v1``; see the module doc."""

    def __init__(self, model_folder: Path | str, *, served_model_name: str | None = None,
                 api_key: str | None = None, delay_s: float = 0.0, fail_after: int | None = None,
                 refuse_token_ids: bool = False, no_logprobs: bool = False,
                 fast: bool = False) -> None:
        self.model_folder = Path(model_folder)
        # vLLM serves a model under its path unless --served-model-name says otherwise.
        self.served_model_name = served_model_name or str(model_folder)
        self.api_key = api_key
        self.delay_s = delay_s
        self.fail_after = fail_after
        self.refuse_token_ids = refuse_token_ids
        self.no_logprobs = no_logprobs
        self.fast = fast
        self.url: str | None = None
        self.v1: str | None = None
        self.requests: list[dict] = []
        self.paths: list[str] = []
        # Set when a generation request has been recorded: a test waits on it (then clears it)
        # to act while a request is in flight, e.g. cancel during ``delay_s``.
        self.request_received = threading.Event()
        self._generation_count = 0
        self._count_lock = threading.Lock()
        self._stopping = threading.Event()
        # Open client connections and requests being answered, so that stopping really ends
        # the server: idle keep-alive connections would otherwise keep being served.
        self._connections: set = set()
        self._in_flight = 0
        self._state = threading.Condition()
        self._engine: LocalModel | _FastEngine | None = None
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:  # never shows the API key
        return f"EngineServer({self.served_model_name!r}, url={self.url!r})"

    # ----- lifecycle -----

    def start(self) -> "EngineServer":
        self._stopping.clear()
        self._engine = _FastEngine(self.model_folder) if self.fast else LocalModel(
            self.model_folder)
        server = self

        class Handler(_Handler):
            owner = server

        httpd = _QuietServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        httpd.daemon_threads = True
        httpd.request_queue_size = 256  # 64+ concurrent clients must not see refused connects
        httpd.server_bind()
        httpd.server_activate()
        self._httpd = httpd
        port = httpd.server_address[1]
        self.url = f"http://127.0.0.1:{port}"
        self.v1 = self.url + "/v1"
        self._thread = threading.Thread(target=httpd.serve_forever, name="engine-server",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, *, drain_s: float = 10.0) -> None:
        """Stop accepting, let requests being answered finish (pending delays end at once with
        a 503) for up to ``drain_s``, then close every client connection."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        with self._state:
            self._state.wait_for(lambda: self._in_flight == 0, timeout=drain_s)
        self._drop_connections()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def kill(self) -> None:
        """Like a crashed server: drop every connection now, answered or not."""
        self._drop_connections()  # before stop(), which would answer pending delays with 503
        self.stop(drain_s=0)

    def _drop_connections(self) -> None:
        with self._state:
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def track(self, connection, opened: bool) -> None:
        with self._state:
            (self._connections.add if opened else self._connections.discard)(connection)

    def busy(self, delta: int) -> bool:
        """Count a request in or out; False (refuse it) once the server is stopping."""
        with self._state:
            if delta > 0 and self._stopping.is_set():
                return False
            self._in_flight += delta
            self._state.notify_all()
            return True

    def __enter__(self) -> "EngineServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----- request handling (called from handler threads) -----

    def handle(self, method: str, path: str, headers, body: dict | None) -> tuple[int, Any]:
        if method == "GET" and path == "/health":
            return 200, None
        if self.api_key is not None:
            if headers.get("Authorization", "") != f"Bearer {self.api_key}":
                return 401, {"error": "Unauthorized"}
        if method == "GET" and path == "/v1/models":
            return 200, self._models()
        routes = {"/v1/completions": self._completions,
                  "/v1/chat/completions": self._chat, "/generate": self._generate}
        if method != "POST" or path not in routes:
            return 404, {"detail": "Not Found"}
        if not isinstance(body, dict):
            raise vllm_error(400, "The request body must be a JSON object.", "BadRequestError")
        self.requests.append(body)
        self.paths.append(path)
        self.request_received.set()
        with self._count_lock:
            self._generation_count += 1
            count = self._generation_count
        if self.fail_after is not None and count > self.fail_after:
            raise vllm_error(503, "The server is shutting down.", "ServiceUnavailableError")
        if self.delay_s > 0 and self._stopping.wait(self.delay_s):
            raise vllm_error(503, "The server is shutting down.", "ServiceUnavailableError")
        try:
            return 200, routes[path](body)
        except InputError as exc:
            if path == "/generate":
                raise HTTPError(400, {"error": {"message": str(exc)}}) from None
            raise vllm_error(400, str(exc), "BadRequestError") from None

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
        max_tokens = _as_int(body.get(max_key), default_max, max_key)
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
            k = _as_int(k, 0, "logprobs")
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
        top_n = _as_int(body.get("top_logprobs"), 0, "top_logprobs") if want else 0
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
        max_new = _as_int(params.get("max_new_tokens"), 128, "max_new_tokens")
        temperature = float(params.get("temperature", 1.0))
        want = bool(body.get("return_logprob")) and not self.no_logprobs
        top_n = _as_int(body.get("top_logprobs_num"), 0, "top_logprobs_num") if want else 0
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


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        pass  # a client that hung up, or a connection closed by stop(): nothing to report


class _Handler(BaseHTTPRequestHandler):
    owner: EngineServer
    protocol_version = "HTTP/1.1"  # keep-alive: the clients pool their connections
    timeout = 120

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read their own output
        pass

    def setup(self) -> None:
        super().setup()
        self.owner.track(self.connection, True)

    def finish(self) -> None:
        self.owner.track(self.connection, False)
        super().finish()

    def do_GET(self) -> None:
        self._serve("GET", None)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            self._send(400, {"object": "error", "message": "The request body is not JSON.",
                             "type": "BadRequestError", "param": None, "code": 400})
            return
        self._serve("POST", body)

    def _serve(self, method: str, body: Any) -> None:
        if not self.owner.busy(+1):
            self.close_connection = True
            return
        try:
            path = self.path.split("?", 1)[0]
            try:
                status, payload = self.owner.handle(method, path, self.headers, body)
            except HTTPError as exc:
                status, payload = exc.status, exc.body
            except Exception as exc:  # a bug here must reach the test as a 500, not a hang
                status, payload = 500, {"object": "error", "message": repr(exc),
                                        "type": "InternalServerError", "param": None,
                                        "code": 500}
            self._send(status, payload)
        finally:
            self.owner.busy(-1)

    def _send(self, status: int, payload: Any) -> None:
        data = b"" if payload is None else json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main(argv: list[str] | None = None) -> None:
    """``python -m tests.fakes.engine_server FOLDER [--fast] [--delay-s S] ...``: the server in
    its own process (a benchmark's client then does not share a GIL with it). Prints
    ``engine-server ready <url>`` once serving; stops when stdin closes or on SIGTERM."""
    import argparse
    import signal
    import sys

    parser = argparse.ArgumentParser(prog="engine_server")
    parser.add_argument("model_folder")
    parser.add_argument("--served-model-name")
    parser.add_argument("--api-key")
    parser.add_argument("--delay-s", type=float, default=0.0)
    parser.add_argument("--fail-after", type=int)
    parser.add_argument("--refuse-token-ids", action="store_true")
    parser.add_argument("--no-logprobs", action="store_true")
    parser.add_argument("--fast", action="store_true")
    args = vars(parser.parse_args(argv))
    server = EngineServer(args.pop("model_folder"), **args).start()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # unwinds to the finally below
    print(f"engine-server ready {server.url}", flush=True)
    try:
        sys.stdin.read()  # returns when the parent closes our stdin
    finally:
        server.stop()


if __name__ == "__main__":
    main()
