"""The HTTP client and what its failures mean to a user.

The client comes with the openai package: ``httpx2`` in current releases, ``httpx`` in older
ones; both have the same API. It is imported on first use.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable
from urllib.parse import parse_qsl, unquote, unquote_plus, urlparse, urlunparse

from rltui.redact import MIN_SECRET_LEN, hide_secrets, redact_url, url_secrets

# Secrets shorter than this are left to rltui.redact's patterns: replacing every "ab" in a
# message would make it unreadable and hide nothing worth hiding (as the workflow check does).


class EndpointError(Exception):
    """A request that failed. ``kind``: connection | timeout | auth | model | refused | http |
    protocol. ``status`` is the HTTP status when there was one."""

    def __init__(self, kind: str, message: str, status: int | None = None):
        super().__init__(message)
        self.kind = kind
        self.status = status


def http_module() -> Any:
    try:
        import httpx2 as httpx
    except ImportError:
        try:
            import httpx
        except ImportError:
            raise EndpointError("protocol", "the rollout check needs an HTTP client (httpx or "
                                "httpx2, which come with openai): install rltui[rollout]"
                                ) from None
    return httpx


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
    """Map a client exception to what it means (``url`` is shown without its secrets)."""
    httpx = http_module()
    url = redact_url(url)
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


async def request_json(client: Any, method: str, url: str, *, timeout_s: float,
                       secret: str | Iterable[str] | None, role: str,
                       body: dict | None = None) -> Any:
    """One request; the JSON answer or an EndpointError (401/403 as ``auth``, other 4xx/5xx as
    ``http`` with the server's message)."""
    try:
        response = await client.request(method, url, json=body)
    except Exception as exc:  # noqa: BLE001 - mapped to a message below
        err = classify(exc, url, timeout_s)
        raise EndpointError(err.kind, scrub(str(err), secret)) from None
    if response.status_code in (401, 403):
        raise EndpointError("auth", auth_message(role), response.status_code)
    if response.status_code >= 400:
        detail = scrub(error_detail(response), secret)
        raise EndpointError("http", f"{role} answered HTTP {response.status_code} for "
                                    f"{urlparse(url).path}: {detail}", response.status_code)
    try:
        return response.json()
    except (ValueError, json.JSONDecodeError):
        raise EndpointError("protocol", f"{role} answered {urlparse(url).path} with something "
                                        "that is not JSON") from None
