"""rollout-check against servers that answer badly on purpose, through the openai SDK's
routes (/v1/models, /v1/completions) and the native /generate: a body without end, a body
dripped a byte at a time, an answer that is not JSON; and the check's own needs: what the SDK
sends (the neutral fields in the body, no Authorization without a key), and the message when
the openai package is not installed."""

from __future__ import annotations

import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rltui.checks.rollout import httpclient, run
from rltui.checks.rollout.endpoints import NEUTRAL
from tests.integration.test_rollout_check import spec

pytestmark = pytest.mark.integration

MODEL = "hostile-model"
CHUNK = b"x" * 65536
BOMB = gzip.compress(bytes(16 << 20))  # 16 KB on the wire, 16 MiB decoded


class HostileServer:
    """Answers ``/v1/models`` with one model and ``/health`` with 200, unless ``bad_path`` is
    that path; at ``bad_path`` it misbehaves as ``mode`` says:

    - ``endless``: HTTP ``status`` and a body that never ends (no Content-Length, chunks until
      the client hangs up); ``sent`` counts the bytes it got out;
    - ``drip``: HTTP 200 announcing 1,000 bytes and sending one each 50 ms;
    - ``html``: HTTP 200, an HTML page;
    - ``gzip``: HTTP 200, a gzip body of 16 KB that decodes to 16 MiB of zeros, though the
      client asked for no compression.

    Every request's path, headers and JSON body are recorded in ``seen``."""

    def __init__(self, mode: str, bad_path: str, status: int = 200) -> None:
        self.seen: list[tuple[str, dict, dict | None]] = []
        self.sent = 0
        self.stop = threading.Event()
        self.done = threading.Event()   # the misbehaving answer ended (the client left)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw.startswith(b"{") else None
                path = self.path.split("?")[0]
                owner.seen.append((path, dict(self.headers), body))
                if path != bad_path:
                    data = json.dumps({"object": "list", "data": [{"id": MODEL}]}
                                      if path == "/v1/models" else {}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                try:
                    owner.misbehave(self)
                except OSError:
                    pass  # the client hung up: what it should do
                finally:
                    owner.done.set()
                    self.close_connection = True

            do_GET = do_POST = _answer

            def log_message(self, *args) -> None:
                pass

        self.mode, self.status = mode, status
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def misbehave(self, h: BaseHTTPRequestHandler) -> None:
        h.send_response(self.status)
        h.send_header("Content-Type", "application/json")
        if self.mode == "endless":
            h.send_header("Connection", "close")
            h.end_headers()
            while not self.stop.is_set():
                h.wfile.write(CHUNK)
                self.sent += len(CHUNK)
        elif self.mode == "drip":
            h.send_header("Content-Length", "1000")
            h.end_headers()
            for _ in range(1000):
                if self.stop.wait(0.05):
                    return
                h.wfile.write(b" ")
                h.wfile.flush()
        elif self.mode == "gzip":
            h.send_header("Content-Encoding", "gzip")
            h.send_header("Content-Length", str(len(BOMB)))
            h.end_headers()
            h.wfile.write(BOMB)
        else:
            page = b"<html><body>502 Bad Gateway</body></html>"
            h.send_header("Content-Length", str(len(page)))
            h.end_headers()
            h.wfile.write(page)

    def __enter__(self) -> HostileServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def small_limit(monkeypatch):
    monkeypatch.setattr(httpclient, "MAX_BODY", 1 << 20)
    return 1 << 20


def _one(dataset, reference, url, **kw):
    return run(spec(dataset, reference, url, limit=1, max_consecutive_failures=1, **kw))


@pytest.mark.parametrize("status", [200, 500])
@pytest.mark.parametrize("bad_path, api", [("/v1/models", "auto"),
                                           ("/v1/completions", "completions"),
                                           ("/generate", "generate")])
def test_an_endless_body_is_cut_at_the_limit(tiny_model, rollout_dataset, small_limit,
                                             bad_path, api, status):
    with HostileServer("endless", bad_path, status) as server:
        url = server.url + ("/generate" if api == "generate" else "/v1")
        report = _one(rollout_dataset, tiny_model, url, api=api, model=MODEL)
        # the client hung up: the server's write failed and its loop ended
        assert server.done.wait(30)
    message = report.error if bad_path == "/v1/models" else report.results[0].error
    assert "answered too much: the answer is over 1 MiB; not read further" in message, \
        report.to_text()
    assert bad_path in message
    # what the client took in before it hung up: the limit, and what the socket buffers held
    assert server.sent < small_limit + (16 << 20)
    assert report.exit_code() == 3


@pytest.mark.parametrize("bad_path, api", [("/v1/models", "auto"),
                                           ("/v1/completions", "completions"),
                                           ("/generate", "generate")])
def test_a_dripping_answer_ends_at_the_timeout(tiny_model, rollout_dataset, bad_path, api):
    """One byte each 50 ms never lets a read time out: the whole request's deadline ends it."""
    with HostileServer("drip", bad_path) as server:
        url = server.url + ("/generate" if api == "generate" else "/v1")
        report = _one(rollout_dataset, tiny_model, url, api=api, model=MODEL, timeout_s=1.0)
        assert server.done.wait(30)
    message = report.error if bad_path == "/v1/models" else report.results[0].error
    assert f"no answer from {server.url}{bad_path} within 1 s" in message, report.to_text()
    assert report.exit_code() == 3


@pytest.mark.parametrize("bad_path, api", [("/v1/models", "auto"),
                                           ("/v1/completions", "completions"),
                                           ("/generate", "generate")])
def test_a_compressed_answer_not_asked_for_is_not_decoded(tiny_model, rollout_dataset,
                                                         small_limit, bad_path, api):
    """The limit counts bytes on the wire: a compressed answer (asked with
    ``Accept-Encoding: identity``) is refused, not decoded to whatever size it holds (here 16
    times the limit, from 16 KB)."""
    with HostileServer("gzip", bad_path) as server:
        url = server.url + ("/generate" if api == "generate" else "/v1")
        report = _one(rollout_dataset, tiny_model, url, api=api, model=MODEL)
    message = report.error if bad_path == "/v1/models" else report.results[0].error
    assert (f"{server.url}{bad_path} answered with a compressed body (Content-Encoding: gzip) "
            "though none was asked for; not read") in message, report.to_text()


@pytest.mark.parametrize("bad_path, api", [("/v1/models", "auto"),
                                           ("/v1/completions", "completions"),
                                           ("/generate", "generate")])
def test_an_answer_that_is_not_json(tiny_model, rollout_dataset, bad_path, api):
    with HostileServer("html", bad_path) as server:
        url = server.url + ("/generate" if api == "generate" else "/v1")
        report = _one(rollout_dataset, tiny_model, url, api=api, model=MODEL)
    message = report.error if bad_path == "/v1/models" else report.results[0].error
    assert f"answered {bad_path} with something that is not JSON" in message, report.to_text()


def test_what_the_sdk_sends(tiny_model, rollout_dataset, monkeypatch):
    """OpenAI's fields and the others (extra_body) in one body; no Authorization without a
    key, the key as Bearer with one; nothing from the environment's OpenAI settings."""
    monkeypatch.setenv("OPENAI_ORG_ID", "org-from-env")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-from-env")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # must not be used
    for key in (None, "sk-hostile-test-5151"):
        with HostileServer("html", "/v1/completions") as server:
            _one(rollout_dataset, tiny_model, server.url + "/v1", api="completions",
                 api_key=key)
        (models, mh, _), (path, headers, body) = server.seen
        assert (models, path) == ("/v1/models", "/v1/completions")
        for h in (mh, headers):
            lower = {k.lower(): v for k, v in h.items()}
            assert lower.get("authorization") == (f"Bearer {key}" if key else None)
            assert "openai-organization" not in lower and "openai-project" not in lower
            assert lower["accept-encoding"] == "identity"
        assert {k: body[k] for k in NEUTRAL} == NEUTRAL
        assert body["model"] == MODEL and body["temperature"] == 0 and body["logprobs"] == 1
        assert body["return_tokens_as_token_ids"] is True and body["ignore_eos"] is False
        assert isinstance(body["prompt"], list) and body["stream"] is False


def test_without_the_openai_package_the_check_says_so(tiny_model, rollout_dataset,
                                                      monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` raises ImportError
    with HostileServer("html", "/nothing") as server:
        report = _one(rollout_dataset, tiny_model, server.url + "/v1")
        native = _one(rollout_dataset, tiny_model, server.url + "/generate")
    assert report.error_kind == "usage" and report.exit_code() == 2
    assert "needs the openai package" in report.error
    assert "install rltui[rollout]" in report.error
    # a native /generate needs only the HTTP client (installed here): it gets that far
    assert "openai" not in (native.error or "") and native.results


def test_cancel_during_a_dripping_answer_keeps_the_report(tiny_model, rollout_dataset):
    """Cancelling while the SDK waits on a server that drips (its answer would take 50 s, the
    timeout is 60 s): the run ends with a partial report and no error, and the connection is
    dropped (the server's drip ends)."""
    cancel = threading.Event()

    def progress(p) -> None:
        if p.message == "sending":
            cancel.set()

    with HostileServer("drip", "/v1/completions") as server:
        report = run(spec(rollout_dataset, tiny_model, server.url + "/v1", timeout_s=60),
                     progress=progress, cancel=cancel)
        assert server.done.wait(30)
    assert report.cancelled and report.partial and report.error is None
    assert report.results == []
