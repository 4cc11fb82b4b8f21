"""Whether a URL from the user can be used, said before anything starts. Standard library only.

``urlparse`` raises ValueError for some malformed URLs (``http://[::1``: "Invalid IPv6 URL")
and only when ``.port`` is read for others (``:99999``, ``:abc``); left to the HTTP client or a
socket call, they would surface as an internal error or a traceback instead of a usage error.
"""

from __future__ import annotations

import re
from urllib.parse import urlparse

HTTP_SCHEMES = ("http", "https")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")


def looks_like_url(text: str) -> bool:
    """``scheme://...``: meant as a URL, valid or not (a folder path never looks like this)."""
    return bool(_SCHEME.match(text.strip()))


def url_problem(url: str, *, http_only: bool = True) -> str | None:
    """Why ``url`` cannot be used (a short reason without the URL itself), or None.
    ``http_only``: anything but an http(s) URL with a host is a problem; else only a URL that
    does not parse, or an http(s) one without a host or with a bad port."""
    try:
        parsed = urlparse(url.strip())
        parsed.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as exc:
        return str(exc) or "not a valid URL"
    if parsed.scheme not in HTTP_SCHEMES:
        return "not an http(s) URL" if http_only else None
    if not parsed.hostname:
        return "no host"
    return None
