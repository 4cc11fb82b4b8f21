"""The Ray dashboard's HTTP API, with the standard library only (``pip install rltui`` needs no
Ray and no HTTP package).

Every failure is a ``DashboardError`` with a ``kind`` and one sentence for the person at the
terminal, naming the address and what to do: nothing listening (the dashboard binds to
127.0.0.1 on the head unless told otherwise), a port that does not speak HTTP/1.1 (the GCS or
Ray Client, both gRPC), a web server that is not a Ray dashboard, a Ray without the state API,
HTTP errors, a redirect to another host, an answer that is not JSON (or nested too deeply, or
too big), no answer in time.

Requests go straight to the address given: no proxy from the environment (http_proxy and
the like are for the way out of a network; the dashboard is on the cluster's own network or
at the near end of an ssh tunnel, and a tunnel's 127.0.0.1 sent to a proxy would reach the
proxy's own machine), and no redirect to another host (what rltui reads must come from the
dashboard it was pointed at).

A dashboard behind Ray's token authentication answers 401: the request is made once more with
the token Ray's own clients would use (rltui.remote.ray.auth), which is then sent with every
later request to that dashboard; a dashboard that did not ask never sees it.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

from rltui import __version__
from rltui.redact import redact_url, scrub_text
from rltui.remote.ray.address import NEEDS_DASHBOARD, DashboardAddress
from rltui.remote.ray.stacks import TRACEBACK_PATH, traceback_params

MAX_BODY = 64 << 20  # bytes of one answer; a state list of 10,000 workers is a few MB
LIST_LIMIT = 10_000  # the most rows the state API hands out (RAY_MAX_LIMIT_FROM_API_SERVER)
SHOWN = 200  # characters of a body quoted in a message

REFUSED, UNREACHABLE, TIMEOUT, NOT_HTTP = "refused", "unreachable", "timeout", "not-http"
NOT_RAY, NO_STATE_API, HTTP, BAD_JSON = "not-ray", "no-state-api", "http", "bad-json"
KINDS = (REFUSED, UNREACHABLE, TIMEOUT, NOT_HTTP, NOT_RAY, NO_STATE_API, HTTP, BAD_JSON)

BIND_REMEDY = ("The dashboard listens on the head node's 127.0.0.1 unless Ray was started with "
               "`ray start --head --dashboard-host 0.0.0.0`; from another machine, tunnel it: "
               "`ssh -N -L 8265:127.0.0.1:8265 HEAD`, then --ray 127.0.0.1:8265. The dashboard "
               "comes with `pip install 'ray[default]'` on the head (plain `ray` has none).")
TIMEOUT_REMEDY = ("Is the head node up and reachable? A busy dashboard answers slowly: raise the "
                  "timeout of each request with --connect-timeout S.")
REDIRECT_REMEDY = ("rltui follows redirects only within the address given: give --ray the "
                   "dashboard's own address. A redirect to a login page is an authenticating "
                   "proxy, which rltui cannot pass (the only credential it sends is Ray's own "
                   "token, to a dashboard that asks for it).")
# Ray's token middleware (ray/_private/authentication/http_token_authentication.py) answers a
# request without a token with 401 and these words; only such a 401 gets the token, so a
# mistyped address that happens to answer 401 (another web app, a proxy) never sees it.
RAY_ASKS_FOR_TOKEN = "Missing authentication token"


class DashboardError(Exception):
    def __init__(self, kind: str, message: str, remedy: str = "",
                 status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.remedy = remedy
        self.status = status  # the HTTP status, when there was one


class DashboardClient:
    """Blocking GETs against one dashboard; safe to use from several threads at once (each
    call opens its own connection)."""

    def __init__(self, address: DashboardAddress, timeout: float = 10.0) -> None:
        self.address = address
        self.timeout = timeout
        # ProxyHandler({}): no proxy from the environment (the module's docstring says why).
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                                   _SameOrigin(address))
        self._headers = {"User-Agent": f"rltui/{__version__}", "Accept": "application/json"}
        self.token_source: str | None = None  # where the token sent came from, once one is
        self._no_token = ""  # why none could be sent, after a 401
        self._token_lock = threading.Lock()  # the client is shared by the feed's threads

    # -- raw

    def get(self, path: str, params: Iterable[tuple[str, Any]] | Mapping[str, Any] = (),
            timeout: float | None = None) -> tuple[int, str, str]:
        """(HTTP status, content type, body) of ``GET path?params``. HTTP error statuses are
        returned, not raised; a transport failure raises ``DashboardError``."""
        query = urlencode(list(params.items()) if isinstance(params, Mapping) else list(params))
        url = f"{self.address.url}{path}" + (f"?{query}" if query else "")
        wait = self.timeout if timeout is None else max(0.1, timeout)
        headers = self._headers  # read once: another thread may add the token meanwhile
        answer = self._get(url, path, wait, headers)
        if answer[0] == 401 and "Authorization" not in headers \
                and RAY_ASKS_FOR_TOKEN in answer[2] and self._take_token():
            answer = self._get(url, path, wait, self._headers)
        return answer

    def _take_token(self) -> bool:
        """Find Ray's token after Ray asked for it (once for all threads); True when one is
        known (and sent from now on)."""
        with self._token_lock:
            if self.token_source is not None:
                return True  # another thread found it first
            from rltui.remote.ray.auth import find_token
            token, why = find_token()
            if token is None:
                self._no_token = why
                return False
            self._headers = dict(self._headers, Authorization=f"Bearer {token.value}")
            self.token_source = token.source
            return True

    def _get(self, url: str, path: str, wait: float, headers: dict) -> tuple[int, str, str]:
        request = urllib.request.Request(url, headers=headers)
        try:
            with self._opener.open(request, timeout=wait) as answer:
                return answer.status, answer.headers.get_content_type(), _body(answer, path)
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, exc.headers.get_content_type(), _body(exc, path)
        except urllib.error.URLError as exc:
            raise self._transport(exc.reason, wait) from None
        except (http.client.HTTPException, OSError) as exc:
            raise self._transport(exc, wait) from None
        except ValueError:  # a header http.client refuses: never quote it (it holds the token)
            raise DashboardError(HTTP, f"the request to {self.address.label} could not be sent: "
                                       "a header value is not valid",
                                 "Check RAY_AUTH_TOKEN: a token is one word of printable "
                                 "ASCII.") from None

    def _transport(self, cause: object, wait: float) -> DashboardError:
        where = self.address.label
        if isinstance(cause, ConnectionRefusedError):
            return DashboardError(REFUSED, f"nothing listens at {where} (connection refused): "
                                           "no Ray dashboard there", BIND_REMEDY)
        if isinstance(cause, (TimeoutError, socket.timeout)):
            return DashboardError(TIMEOUT, f"the Ray dashboard at {where} did not answer within "
                                           f"{wait:g} s", TIMEOUT_REMEDY)
        if isinstance(cause, socket.gaierror):
            return DashboardError(UNREACHABLE, f"{self.address.host} does not resolve "
                                               f"({cause.strerror or cause})", NEEDS_DASHBOARD)
        if isinstance(cause, ssl.SSLError):
            return DashboardError(UNREACHABLE, f"TLS with {where} failed: {cause}",
                                  "Use http:// unless the dashboard sits behind a TLS proxy.")
        if isinstance(cause, (http.client.RemoteDisconnected, ConnectionResetError)):
            return DashboardError(NOT_HTTP, f"{where} closed the connection without an HTTP "
                                            "answer: not a Ray dashboard?", NEEDS_DASHBOARD)
        if isinstance(cause, http.client.BadStatusLine):
            return DashboardError(NOT_HTTP, f"{where} does not speak HTTP/1.1: it answered "
                                            "with binary data, as Ray's gRPC ports do (the "
                                            "GCS, 6379 by default, and Ray Client, 10001)",
                                  NEEDS_DASHBOARD)
        if isinstance(cause, http.client.HTTPException):
            return DashboardError(NOT_HTTP, f"{where} answered with broken HTTP "
                                            f"({type(cause).__name__}): not a Ray dashboard",
                                  NEEDS_DASHBOARD)
        if isinstance(cause, OSError):
            return DashboardError(UNREACHABLE, f"cannot reach {where}: "
                                               f"{cause.strerror or cause}", BIND_REMEDY)
        return DashboardError(UNREACHABLE, f"cannot reach {where}: {cause}", BIND_REMEDY)

    # -- JSON

    def get_json(self, path: str, params: Iterable[tuple[str, Any]] = (),
                 timeout: float | None = None) -> Any:
        """The JSON body of a 200 answer; anything else raises ``DashboardError``."""
        status, ctype, body = self.get(path, params, timeout)
        if status == 404:
            raise self._not_found(path, ctype, body)
        if status in (401, 403):
            raise DashboardError(HTTP, f"the Ray dashboard at {self.address.label} refuses "
                                       f"rltui (HTTP {status} on {path}): "
                                       f"{_envelope_msg(body) or _quote(body)}",
                                 self._refusal_remedy(status, body), status)
        if status != 200:
            # The state API says what went wrong in its envelope's "msg", with 4xx and 5xx.
            said = _envelope_msg(body) or _quote(body)
            raise DashboardError(HTTP, f"the Ray dashboard at {self.address.label} answered "
                                       f"{path} with HTTP {status}: {said}",
                                 "Ray's dashboard log (dashboard.log in the session's logs "
                                 "folder on the head) says more.", status)
        try:
            return json.loads(body)
        except ValueError:
            raise DashboardError(BAD_JSON, f"{self.address.label} answered {path} with "
                                           f"{ctype or 'a body'} that is not JSON: "
                                           f"{_quote(body)}", NEEDS_DASHBOARD, status) from None
        except RecursionError:  # a JSON answer nested deeper than Python's parser goes
            raise DashboardError(BAD_JSON, f"{self.address.label} answered {path} with JSON "
                                           "nested too deeply to read: not a Ray dashboard's "
                                           "answer", NEEDS_DASHBOARD, status) from None

    def _refusal_remedy(self, status: int, body: str) -> str:
        from rltui.remote.ray.auth import WHERE_TO_PUT_IT
        if self.token_source is None and RAY_ASKS_FOR_TOKEN not in body:
            return ("Not Ray's own token check: an authenticating proxy or another web server "
                    "answers there, which rltui cannot pass; give --ray the dashboard's own "
                    "address (rltui sends Ray's token only when Ray asks for it).")
        if self.token_source is not None:
            return (f"The Ray auth token rltui sent (from {self.token_source}) was refused: "
                    "it is not this cluster's token; " + WHERE_TO_PUT_IT + ".")
        why = f" ({self._no_token})" if self._no_token else ""
        return ("The dashboard asks for Ray's auth token (RAY_AUTH_MODE=token) and rltui found "
                f"none{why}: {WHERE_TO_PUT_IT}. An authenticating proxy in front of the "
                "dashboard cannot be passed.")

    def _not_found(self, path: str, ctype: str, body: str) -> DashboardError:
        version = self.ray_version()
        if version is not None:
            return DashboardError(NO_STATE_API, f"the Ray {version} dashboard at "
                                                f"{self.address.label} has no {path}: its state "
                                                "API is missing", "rltui needs Ray 2.0 or "
                                                                  "newer on the cluster.", 404)
        return DashboardError(NOT_RAY, f"{self.address.label} answers HTTP but is not a Ray "
                                       f"dashboard ({path}: 404 Not Found, "
                                       f"{ctype or 'no content type'})", NEEDS_DASHBOARD, 404)

    def ray_version(self) -> str | None:
        """The cluster's Ray version (``/api/version``), None when it says none."""
        try:
            status, _, body = self.get("/api/version")
            data = json.loads(body) if status == 200 else None
        except (DashboardError, ValueError, RecursionError):
            return None
        version = data.get("ray_version") if isinstance(data, dict) else None
        return version if isinstance(version, str) else None

    def state_list(self, kind: str, *, filters: Iterable[tuple[str, str, str]] = (),
                   detail: bool = False, timeout: float | None = None) -> tuple[list, str]:
        """Rows of ``/api/v0/<kind>`` (nodes, actors, workers) and a note when the list is
        partial (truncated, or some raylet did not answer)."""
        params: list[tuple[str, Any]] = [("limit", LIST_LIMIT), ("detail", int(detail))]
        wait = self.timeout if timeout is None else timeout
        # The state API's own deadline for the raylets it asks, inside ours.
        params.append(("timeout", max(1, int(wait))))
        for key, predicate, value in filters:
            params += [("filter_keys", key), ("filter_predicates", predicate),
                       ("filter_values", value)]
        data = self.get_json(f"/api/v0/{kind}", params, timeout)
        return unwrap_list(data, kind, self.address.label)

    def node_summary(self, timeout: float | None = None) -> list:
        """``/nodes?view=summary``: what each node's dashboard agent reports (host name, GPUs
        with utilisation and processes, the raylet's workers)."""
        data = self.get_json("/nodes", [("view", "summary")], timeout)
        summary = data.get("data", {}).get("summary") if isinstance(data, dict) else None
        if not isinstance(summary, list):
            raise DashboardError(BAD_JSON, f"{self.address.label}: /nodes?view=summary has no "
                                           "summary list")
        return summary

    def traceback(self, node_id: str, ip: str, pid: int, timeout: float | None = None
                  ) -> tuple[int, str]:
        """(HTTP status, text) of ``/worker/traceback``: py-spy's dump of ``pid``, run by
        the dashboard agent on the node, or its error. The query is the one the round's
        ``StackPoll.command`` shows (stacks.traceback_params)."""
        status, _, body = self.get(TRACEBACK_PATH, traceback_params(node_id, ip, pid), timeout)
        return status, body


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Redirects within the dashboard's scheme, host and port are followed (a proxy adding a
    trailing slash); one to anywhere else is a ``DashboardError``."""

    def __init__(self, address: DashboardAddress) -> None:
        super().__init__()
        self._address = address
        self._origin = _origin(address.url)

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if _origin(newurl) != self._origin:
            fp.close()  # urllib closes it only for a redirect it follows
            path = urlsplit(req.full_url).path
            raise DashboardError(HTTP, f"{self._address.label} redirects {path} to another "
                                       f"host ({redact_url(newurl)}, HTTP {code}): not "
                                       "followed", REDIRECT_REMEDY, code)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # a port that is no number: not the dashboard's
        port = -1
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def unwrap_list(data: Any, kind: str, where: str) -> tuple[list, str]:
    """The rows of a state API list answer, and a note when it is partial.

    The envelope: ``{"result": true, "msg": "", "data": {"result": {"total": N,
    "num_after_truncation": M, "result": [rows], "partial_failure_warning": "", ...}}}``.
    """
    if not isinstance(data, dict) or not isinstance(data.get("data"), dict):
        raise DashboardError(BAD_JSON, f"{where}: /api/v0/{kind} is not a state API answer")
    if data.get("result") is False:
        raise DashboardError(HTTP, f"{where}: the state API refused /api/v0/{kind}: "
                                   f"{data.get('msg') or 'no reason given'}")
    inner = data["data"].get("result")
    rows = inner.get("result") if isinstance(inner, dict) else None
    if not isinstance(rows, list):
        raise DashboardError(BAD_JSON, f"{where}: /api/v0/{kind} holds no list of {kind}")
    notes = []
    total = inner.get("total")
    if isinstance(total, int) and total > len(rows):
        notes.append(f"{len(rows)} of {total} {kind} listed (the state API's limit)")
    warning = inner.get("partial_failure_warning")
    if isinstance(warning, str) and warning.strip():
        notes.append(scrub_text(warning.strip().splitlines()[0])[:SHOWN])
    return rows, "; ".join(notes)


def _body(answer: Any, path: str) -> str:
    data = answer.read(MAX_BODY + 1)
    if len(data) > MAX_BODY:
        raise DashboardError(BAD_JSON, f"{path}: the answer is over {MAX_BODY >> 20} MiB; not "
                                       "read")
    return data.decode("utf-8", "replace")


def _envelope_msg(body: str) -> str:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return ""
    msg = data.get("msg") if isinstance(data, dict) else None
    return _quote(msg) if isinstance(msg, str) else ""


def _quote(text: str) -> str:
    """A body's start on one line, for a message."""
    flat = " ".join(text.split())
    return repr(scrub_text(flat[:SHOWN]) + ("..." if len(flat) > SHOWN else ""))
