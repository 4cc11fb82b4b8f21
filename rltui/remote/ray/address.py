"""``--ray ADDRESS`` -> the dashboard's base URL. Pure.

rltui reads a Ray cluster through its dashboard's HTTP API, which listens on the head node,
port 8265 by default. Accepted: ``HOST`` (port 8265), ``HOST:8265``, ``[fe80::1]:8265``, and
URLs taken as URLs: ``http://HOST:8265``, ``https://ray.example.com/ray`` (a dashboard behind
a proxy: the scheme's own port, 443 here, and the path kept). The
addresses people confuse it with are refused with what to give instead: the GCS port (6379,
what ``ray start --address`` and ``ray.init(address=...)`` take) and Ray Client
(``ray://HOST:10001``) speak gRPC, not HTTP.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

DASHBOARD_PORT = 8265
GCS_PORT = 6379
CLIENT_PORT = 10001
_HOST = re.compile(r"[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.%A-Za-z]+\]")

NEEDS_DASHBOARD = (f"rltui reads the Ray dashboard's HTTP API (port {DASHBOARD_PORT} of the "
                   f"head node by default): --ray HEAD:{DASHBOARD_PORT}")


class AddressError(ValueError):
    """ADDRESS cannot name a Ray dashboard; the message says why and what to give instead."""


@dataclass(frozen=True, slots=True)
class DashboardAddress:
    url: str  # base URL without a trailing slash: http://HOST:PORT[/prefix]
    host: str  # as written (an IPv6 address keeps its brackets)
    port: int

    @property
    def label(self) -> str:
        """``HOST:PORT`` for the header and messages."""
        return f"{self.host}:{self.port}"


def parse_address(text: str) -> DashboardAddress:
    raw = text.strip()
    if not raw:
        raise AddressError(f"no Ray address given; {NEEDS_DASHBOARD}")
    if raw.lower().startswith("ray://"):
        raise AddressError(f"{raw!r} is a Ray Client address (gRPC, port {CLIENT_PORT}); "
                           f"{NEEDS_DASHBOARD}")
    if raw.lower() == "auto":
        raise AddressError(f"'auto' lets ray.init find a local cluster; rltui needs the "
                           f"address itself: {NEEDS_DASHBOARD}")
    bare = "://" not in raw
    parts = urlsplit(f"http://{raw}" if bare else raw)
    if parts.scheme not in ("http", "https"):
        raise AddressError(f"{raw!r}: the dashboard speaks http or https, not "
                           f"{parts.scheme}; {NEEDS_DASHBOARD}")
    if parts.username or parts.password:
        # not echoed: the address holds a password
        raise AddressError("credentials in the Ray address are not supported: give "
                           "HOST:PORT of the dashboard")
    default = DASHBOARD_PORT if bare else 443 if parts.scheme == "https" else 80
    host, port = _split_netloc(parts.netloc, raw, default)
    if port == GCS_PORT:
        raise AddressError(f"{raw!r} is the port of Ray's GCS ({GCS_PORT}: what `ray start "
                           f"--address` and ray.init take), which speaks gRPC; "
                           f"{NEEDS_DASHBOARD}")
    if port == CLIENT_PORT:
        raise AddressError(f"{raw!r} is the Ray Client port ({CLIENT_PORT}, gRPC); "
                           f"{NEEDS_DASHBOARD}")
    # The dashboard's UI routes are fragments (http://head:8265/#/overview): drop them, keep
    # a path prefix (a dashboard served under /ray/ by a proxy). The prefix is percent-encoded
    # (what is already escaped stays): http.client refuses spaces in a request line, and the
    # stack command pasted into a shell (stacks.traceback_command) must hold no braces.
    prefix = quote(parts.path.rstrip("/"), safe="/%:@!$&'()*+,;=~")
    return DashboardAddress(url=f"{parts.scheme}://{host}:{port}{prefix}", host=host,
                            port=port)


def _split_netloc(netloc: str, raw: str, default: int) -> tuple[str, int]:
    if netloc.startswith("["):
        end = netloc.find("]")
        host, rest = (netloc[:end + 1], netloc[end + 1:]) if end > 0 else (netloc, "")
    elif netloc.count(":") > 1:  # a bare IPv6 address: no room for a port
        host, rest = f"[{netloc}]", ""
    else:
        host, _, port_text = netloc.partition(":")
        rest = f":{port_text}" if _ else ""
    if not host or not _HOST.fullmatch(host):
        raise AddressError(f"{raw!r}: no host name or address in it; {NEEDS_DASHBOARD}")
    if not rest:
        return host, default
    if not rest.startswith(":") or not rest[1:].isdigit() or not 0 < int(rest[1:]) < 65536:
        raise AddressError(f"{raw!r}: the port must be a number from 1 to 65535")
    return host, int(rest[1:])
