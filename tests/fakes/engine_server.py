"""A real HTTP inference server on 127.0.0.1 that speaks vLLM's and SGLang's documented formats.

vLLM and SGLang need a GPU and cannot run here, so this server stands in for them: a real
transformers model (``tinylm.LocalModel``: float32, CPU, greedy ``generate``) behind real
sockets, answering
vLLM's OpenAI-compatible ``/v1/completions`` and ``/v1/chat/completions`` (with the ``logprobs``,
``return_tokens_as_token_ids`` and ``return_token_ids`` extensions) and SGLang's native
``/generate`` (``input_ids`` or ``text``, ``sampling_params``, ``return_logprob``). Log-probs are
``log_softmax`` of the raw logits at the chosen token, as both engines report them by default.

Knobs make it misbehave on purpose: an API key, extra latency, refusing after N requests,
refusing token-id prompts (as ``transformers serve`` does), refusing request fields outside
OpenAI's schema (``strict_openai``, as the OpenAI API and ``transformers serve`` do), ignoring
log-prob requests, and a ``fast`` mode with no model at all (to measure a client's own
overhead). The answers themselves are built in engine_formats.py.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.fakes.engine_formats import EngineFormats, HTTPError, refuse_unknown_fields, vllm_error
from tests.fakes.tinylm import Generation, InputError, LocalModel

FAST_SENTENCE = " the answer is 4 ."


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


class EngineServer(EngineFormats):
    """``with EngineServer(folder, **knobs) as server:`` ... ``server.v1``; see the module doc."""

    def __init__(self, model_folder: Path | str, *, served_model_name: str | None = None,
                 api_key: str | None = None, delay_s: float = 0.0, fail_after: int | None = None,
                 refuse_token_ids: bool = False, no_logprobs: bool = False,
                 strict_openai: bool = False, fast: bool = False) -> None:
        self.model_folder = Path(model_folder)
        # vLLM serves a model under its path unless --served-model-name says otherwise.
        self.served_model_name = served_model_name or str(model_folder)
        self.api_key = api_key
        self.delay_s = delay_s
        self.fail_after = fail_after
        self.refuse_token_ids = refuse_token_ids
        self.no_logprobs = no_logprobs
        self.strict_openai = strict_openai
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

    def start(self) -> EngineServer:
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

    def __enter__(self) -> EngineServer:
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
        if self.strict_openai:
            refuse_unknown_fields(path, body)
        try:
            return 200, routes[path](body)
        except InputError as exc:
            if path == "/generate":
                raise HTTPError(400, {"error": {"message": str(exc)}}) from None
            raise vllm_error(400, str(exc), "BadRequestError") from None


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
    parser.add_argument("--strict-openai", action="store_true")
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
