"""The HTTP clients and what their failures mean to a user.

OpenAI-compatible endpoints (``/v1/models``, ``/v1/completions``, ``/v1/chat/completions``) are
asked through the openai SDK (``AsyncOpenAI``, no retries: a failure is a finding, not
something to hide); SGLang's native ``/generate`` (and its ``/health``) through the HTTP client
the SDK brings: ``httpx2`` in current releases, ``httpx`` in older ones, with the same API. The
SDK sends its requests through that same client (``http_client``), so both share one pool, the
credentials, the limits below and the hostile-server guards. Both are imported on first use.

Every request is bounded: the whole of it (connect, send, the answer to its last byte) within
the timeout, whatever pace the server sends at, and the answer's body to ``MAX_BODY`` bytes.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, unquote_plus, urlparse, urlunparse

from rltui.redact import MIN_SECRET_LEN, hide_secrets, redact_url, url_secrets

# Secrets shorter than this are left to rltui.redact's patterns: replacing every "ab" in a
# message would make it unreadable and hide nothing worth hiding (as the workflow check does).


# The most of one answer read (bytes on the wire): a long greedy answer with log-probs is a few
# MB; a server that sends more is refused, not buffered without end.
MAX_BODY = 64 << 20


class EndpointError(Exception):
    """A request that failed. ``kind``: connection | timeout | auth | model | refused | http |
    protocol | missing (a package the check needs is not installed). ``status`` is the HTTP
    status when there was one."""

    def __init__(self, kind: str, message: str, status: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.status = status


class HostileAnswer(Exception):
    """An answer not read: over ``MAX_BODY`` bytes, or compressed though none was asked for
    (its size once decoded would be unbounded)."""


_HTTP: list = []


def http_module() -> Any:
    """The HTTP client module: the one the openai SDK is built on when it is installed (its
    ``http_client`` must be of that kind: httpx2 for current releases, httpx for older ones,
    whichever else is installed too), else httpx2 or httpx."""
    if _HTTP:
        return _HTTP[0]
    try:
        import openai
        sdk_client = openai.DefaultAsyncHttpxClient
    except (ImportError, AttributeError):
        sdk_client = None
    found = None
    for name in ("httpx2", "httpx"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if sdk_client is None or issubclass(sdk_client, module.AsyncClient):
            found = module
            break
    if found is None:
        raise EndpointError("missing", "the rollout check needs the openai package (it "
                            "brings the HTTP client, httpx2 or httpx), which is not "
                            "installed: install rltui[rollout] (or pip install openai)")
    _HTTP.append(found)
    return found


def openai_module() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise EndpointError("missing", f"an OpenAI-compatible endpoint needs the openai package "
                                       f"({exc}): install rltui[rollout] (or pip install "
                                       "openai)") from None
    return openai


_LIMITED: dict[Any, type] = {}


def _limited(httpx: Any, stream: Any, limit: int) -> Any:
    """``stream`` (an answer's body), raising HostileAnswer past ``limit`` bytes."""
    cls = _LIMITED.get(httpx)
    if cls is None:
        class Limited(httpx.AsyncByteStream):
            def __init__(self, stream: Any, limit: int) -> None:
                self.stream, self.limit = stream, limit

            async def __aiter__(self):  # type: ignore[override]
                seen = 0
                async for chunk in self.stream:
                    seen += len(chunk)
                    if seen > self.limit:
                        raise HostileAnswer(f"answered too much: the answer is over "
                                            f"{self.limit >> 20} MiB; not read further")
                    yield chunk

            async def aclose(self) -> None:
                await self.stream.aclose()
        cls = _LIMITED[httpx] = Limited
    return cls(stream, limit)


def make_http_client(urls: ServerURLs, api_key: str | None, *, timeout_s: float,
                     concurrency: int, max_body: int | None = None) -> Any:
    """The HTTP client for one server: the key as a Bearer header, else the URL's user-info as
    Basic auth; the URL's query string on every request; no proxy from the environment (none
    may sit between the two sides); no redirects; uncompressed answers (the size limit counts
    what is read); each answer's body cut at ``max_body`` bytes."""
    httpx = http_module()
    limit = max_body or MAX_BODY
    headers = {"Accept-Encoding": "identity"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    # the URL's user:password@ as Basic auth, only without an API key: both would go in the
    # one Authorization header, and the key is what the user gave for this server
    credentials = urls.credentials
    auth = httpx.BasicAuth(*credentials) if credentials and not api_key else None

    async def limit_body(response: Any) -> None:
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):  # the client closes the response
            raise HostileAnswer(f"answered with a compressed body (Content-Encoding: "
                                f"{encoding[:40]}) though none was asked for; not read")
        response.stream = _limited(httpx, response.stream, limit)

    return httpx.AsyncClient(
        headers=headers, auth=auth, params=dict(urls.params) or None,
        timeout=http_timeout(httpx, timeout_s),
        limits=httpx.Limits(max_connections=concurrency + 4,
                            max_keepalive_connections=concurrency + 4),
        follow_redirects=False, trust_env=False, event_hooks={"response": [limit_body]})


def http_timeout(httpx: Any, timeout_s: float) -> Any:
    return httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))


def make_openai_client(http_client: Any, base_url: str, api_key: str | None, *,
                       timeout_s: float) -> tuple[Any, dict]:
    """``AsyncOpenAI`` on ``http_client`` (which carries the credentials), without retries,
    and the headers each request adds: the SDK's own ``Authorization`` left out when there is
    no key (the client's Basic auth, or nothing), and the organisation and project it would
    read from the environment (``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID``), which are no
    business of a local server."""
    openai = openai_module()
    omit = openai.Omit()
    client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key or "no-key",
                                max_retries=0, timeout=http_timeout(http_module(), timeout_s),
                                http_client=http_client)
    headers = {"OpenAI-Organization": omit, "OpenAI-Project": omit}
    if not api_key:
        headers["Authorization"] = omit
    return client, headers


@dataclass(frozen=True)
class ServerURLs:
    """The two bases a server can have: the OpenAI one (``.../v1``) and the native root.
    A query string in the given URL (``?api_key=...`` for a gateway) is kept apart in
    ``params`` and sent with every request. So is the user-info (``user:password@``, decoded,
    in ``credentials``): the bases never carry it, because the HTTP client would turn it into
    a Basic ``Authorization`` header that replaces the API key's Bearer one; the endpoint sends
    it as Basic auth only when no API key is given."""
    v1: str
    root: str
    native_generate: bool   # the URL named /generate itself
    params: tuple[tuple[str, str], ...] = ()
    credentials: tuple[str, str] | None = field(default=None, repr=False)

    @property
    def generate(self) -> str:
        return self.root + "/generate"


def server_urls(url: str) -> ServerURLs:
    parsed = urlparse(url.strip())
    path = parsed.path.rstrip("/")
    native = path.endswith("/generate") or path == "/generate"
    if native:
        path = path[: -len("/generate")]
    if path.endswith("/v1"):
        root_path, v1_path = path[:-3], path
    else:
        root_path, v1_path = path, path + "/v1"

    userinfo, at, host = parsed.netloc.rpartition("@")
    credentials = None
    if at:
        user, _, password = userinfo.partition(":")
        credentials = (unquote(user), unquote(password))

    def build(p: str) -> str:
        return urlunparse((parsed.scheme, host, p, "", "", "")).rstrip("/")
    return ServerURLs(v1=build(v1_path), root=build(root_path), native_generate=native,
                      params=tuple(parse_qsl(parsed.query, keep_blank_values=True)),
                      credentials=credentials)


def secrets_of(url: str, api_key: str | None) -> tuple[str, ...]:
    """What a server's messages must never show: the API key, and what its URL carries (the
    user-info's password or lone user name, secret-named query values), as written in the URL
    and decoded (a server echoes what it received), longest first so that a secret holding
    another is hidden whole."""
    found = {api_key}
    for value in url_secrets(url):
        found.update((value, unquote(value), unquote_plus(value)))
    credentials = server_urls(url).credentials
    if credentials:
        found.add(credentials[1] or credentials[0])
    return tuple(sorted((s for s in found if s and len(s) >= MIN_SECRET_LEN), key=len,
                        reverse=True))


def scrub(text: str, secrets: str | Iterable[str] | None) -> str:
    """Never let a key through, even when a server echoes it in an error: each secret itself
    (``secrets_of``), then whatever ``rltui.redact`` hides (passwords in URLs, ``api_key=...``,
    token shapes)."""
    return hide_secrets(text, (secrets,) if isinstance(secrets, str) else secrets or ())


def error_detail(response: Any) -> str:
    """The server's own words for a failed request: OpenAI/vLLM ``{"error": {"message"}}``,
    FastAPI ``{"detail"}``, SGLang/transformers ``{"error": "..."}``, else the start of the body."""
    try:
        body = response.json()
    except (ValueError, json.JSONDecodeError):
        text = (response.text or "").strip()
        return text[:300] or response.reason_phrase or ""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        for key in ("error", "detail", "message"):
            if body.get(key):
                value = body[key]
                return (value if isinstance(value, str) else json.dumps(value))[:300]
    return json.dumps(body)[:300]


def classify(exc: BaseException, url: str, timeout_s: float) -> EndpointError:
    """Map a client exception (the HTTP client's, the openai SDK's, the request's deadline, the
    body limit) to what it means (``url`` is shown without its secrets)."""
    httpx = http_module()
    url = redact_url(url)
    openai = sys.modules.get("openai")
    if openai is not None and isinstance(exc, openai.APIConnectionError):
        # the SDK's wrapping of the HTTP client's exception (APITimeoutError included)
        cause = exc.__cause__
        if cause is not None and not isinstance(cause, openai.APIConnectionError):
            return classify(cause, url, timeout_s)
        if isinstance(exc, openai.APITimeoutError):
            return EndpointError("timeout", f"no answer from {url} within {timeout_s:g} s")
        return EndpointError("connection", f"cannot reach {url} ({exc})")
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):  # the whole request's deadline
        # (a slow drip included); asyncio's is its own class before 3.11
        return EndpointError("timeout", f"no answer from {url} within {timeout_s:g} s")
    if isinstance(exc, HostileAnswer):
        return EndpointError("protocol", f"{url} {exc}")
    if isinstance(exc, httpx.TimeoutException):
        if isinstance(exc, httpx.ConnectTimeout):
            return EndpointError("connection", f"cannot connect to {url}: connect timed out")
        return EndpointError("timeout", f"no answer from {url} within {timeout_s:g} s")
    if isinstance(exc, (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError,
                        httpx.WriteError)):
        reason = str(exc) or type(exc).__name__
        return EndpointError("connection", f"cannot reach {url} ({reason})")
    if isinstance(exc, httpx.HTTPError):
        return EndpointError("connection", f"request to {url} failed: {type(exc).__name__}: "
                                           f"{exc}")
    return EndpointError("protocol", f"request to {url} failed: {type(exc).__name__}: {exc}")


def auth_message(role: str) -> str:
    flag = "--api-key or OPENAI_API_KEY" if role == "server" else "--reference-api-key"
    return f"the {role} wants an API key ({flag}), or refused the one given"


def status_error(response: Any, url: str, *, secret: str | Iterable[str] | None,
                 role: str) -> EndpointError:
    """An answer with an error status: 401/403 as ``auth``, other 4xx/5xx as ``http`` with
    the server's message (without any secret it echoed)."""
    status = response.status_code
    if status in (401, 403):
        return EndpointError("auth", auth_message(role), status)
    detail = scrub(error_detail(response), secret)
    return EndpointError("http", f"{role} answered HTTP {status} for {urlparse(url).path}: "
                                 f"{detail}", status)


def parse_json(raw: bytes, url: str, role: str) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, json.JSONDecodeError):
        raise EndpointError("protocol", f"{role} answered {urlparse(url).path} with something "
                                        "that is not JSON") from None


def failure(exc: BaseException, url: str, *, timeout_s: float,
            secret: str | Iterable[str] | None) -> EndpointError:
    err = classify(exc, url, timeout_s)
    return EndpointError(err.kind, scrub(str(err), secret))


async def request_json(client: Any, method: str, url: str, *, timeout_s: float,
                       secret: str | Iterable[str] | None, role: str,
                       body: dict | None = None) -> Any:
    """One request with the HTTP client itself (SGLang's native routes); the JSON answer or an
    EndpointError."""
    try:
        response = await asyncio.wait_for(client.request(method, url, json=body), timeout_s)
    except Exception as exc:  # noqa: BLE001 - mapped to a message below
        raise failure(exc, url, timeout_s=timeout_s, secret=secret) from None
    if response.status_code >= 400:
        raise status_error(response, url, secret=secret, role=role)
    return parse_json(response.content, url, role)


async def sdk_json(call: Any, url: str, *, timeout_s: float,
                   secret: str | Iterable[str] | None, role: str) -> Any:
    """One request through the openai SDK. ``call()`` opens it: a ``with_streaming_response``
    method of the SDK (the SDK builds and sends the request, maps its failures; the answer's
    bytes are read here, as JSON, and not made into the SDK's typed objects: the check reads
    fields they do not have, such as vLLM's token ids). The JSON answer or an EndpointError,
    the same as ``request_json``'s."""
    openai = openai_module()

    async def read() -> bytes:
        async with call() as response:
            return await response.read()

    try:
        raw = await asyncio.wait_for(read(), timeout_s)  # asyncio.timeout is 3.11's
    except openai.APIStatusError as exc:
        raise status_error(exc.response, url, secret=secret, role=role) from None
    except Exception as exc:  # noqa: BLE001 - mapped to a message below
        raise failure(exc, url, timeout_s=timeout_s, secret=secret) from None
    return parse_json(raw, url, role)
