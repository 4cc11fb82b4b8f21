"""Credentials in a server URL (``user:password@``, ``?api_key=``) through ``rltui rollout-check``:
the API key is what goes in the Authorization header when one is given (the URL's user-info is
Basic auth only without a key), and nothing the URL carries shows when a server echoes it."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from rltui.cli import main
from tests.fakes.engine_server import EngineServer

pytestmark = pytest.mark.integration

KEY = "sk-cred-test-9090"
PASSWORD = "pw-cred-test-8080"
QUERY_KEY = "qk-cred-test-7070"


class EchoServer:
    """Answers every request with HTTP 500 and a vLLM-style error that repeats, bare, what it
    was given: the Basic user and password (decoded), the query string's key and the Bearer
    key, as a careless gateway does. Records each request's path and Authorization header."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                auth = self.headers.get("Authorization", "")
                owner.seen.append((self.path, auth))
                scheme, _, value = auth.partition(" ")
                if scheme == "Basic":
                    value = base64.b64decode(value).decode().replace(":", " ")
                query = parse_qs(urlsplit(self.path).query).get("api_key", [""])[0]
                body = json.dumps({"error": {"message": f"rejected {value} with {query}"}})
                self.send_response(500)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> EchoServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def args(dataset, server, *more) -> list[str]:
    return ["rollout-check", "--dataset", str(dataset), "--server", server,
            "--max-new-tokens", "4", "--limit", "1", *more]


@pytest.fixture
def no_env_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_without_a_key_the_url_user_info_is_basic_auth_and_never_shows(
        tiny_model, rollout_dataset, capsys, no_env_key):
    with EchoServer() as server:
        url = f"http://user1:{PASSWORD}@{server.host}/v1?api_key={QUERY_KEY}"
        code = main(args(rollout_dataset, url, "--reference", url, "--tokenizer",
                         str(tiny_model), "--json"))
    out, err = capsys.readouterr()
    assert code == 3, err
    path, auth = server.seen[0]
    assert path == f"/v1/models?api_key={QUERY_KEY}"
    assert auth == "Basic " + base64.b64encode(f"user1:{PASSWORD}".encode()).decode()
    # the server's words reach the user, without what it echoed
    assert "server answered HTTP 500 for /v1/models: rejected user1 *** with ***" in err
    for text in (out, err):
        assert PASSWORD not in text and QUERY_KEY not in text


def test_with_a_key_the_key_is_sent_and_the_url_password_is_not(
        tiny_model, rollout_dataset, capsys, no_env_key):
    with EchoServer() as server:
        url = f"http://user1:{PASSWORD}@{server.host}/v1"
        code = main(args(rollout_dataset, url, "--reference", str(tiny_model),
                         "--api-key", KEY))
    out, err = capsys.readouterr()
    assert code == 3, err
    assert server.seen[0] == ("/v1/models", f"Bearer {KEY}")
    assert "rejected *** with" in err
    for text in (out, err):
        assert PASSWORD not in text and KEY not in text


def test_a_url_password_no_longer_replaces_the_key(tiny_model, rollout_dataset, capsys,
                                                   no_env_key):
    """A server that wants the key, reached through a URL with a user-info: the check runs
    (the client used to send Basic auth from the URL instead of the key: a 401)."""
    with EngineServer(tiny_model, api_key=KEY) as server:
        host = server.v1.split("://", 1)[1]
        code = main(args(rollout_dataset, f"http://user1:{PASSWORD}@{host}", "--reference",
                         str(tiny_model), "--api-key", KEY, "--json"))
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["agreement_rate"] == 1.0
    assert any("user-info of the URL (user:password@) was not sent" in line
               for line in doc["limits"])
    for text in (out, err):
        assert PASSWORD not in text and KEY not in text

