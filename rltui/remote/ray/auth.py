"""Ray's token authentication (Ray 2.52 and later, ``RAY_AUTH_MODE=token``): where the token is,
found the way Ray's own clients find it, and never shown.

Precedence (Ray's documentation, "Token Authentication"): ``RAY_AUTH_TOKEN`` when set and not
empty; else the file ``RAY_AUTH_TOKEN_PATH`` names; else ``~/.ray/auth_token``. The dashboard
takes it as ``Authorization: Bearer <token>``. rltui sends it only after Ray's own token check
asked for it (its 401 "Missing authentication token": a dashboard without authentication, or
another server at a mistyped address, never sees it), and names where it came from, never the
token itself. A token that is not one word of printable ASCII is not sent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

MAX_TOKEN_BYTES = 4096  # a token is a few dozen characters; a bigger file is not one
DEFAULT_PATH = "~/.ray/auth_token"
WHERE_TO_PUT_IT = ("set RAY_AUTH_TOKEN, or RAY_AUTH_TOKEN_PATH to the token's file, or put it "
                   f"in {DEFAULT_PATH} (`ray get-auth-token` prints the cluster's token)")


@dataclass(frozen=True)
class Token:
    value: str = field(repr=False)
    source: str  # where it was found, for messages: "RAY_AUTH_TOKEN", a file's path


def find_token(env: Mapping[str, str] | None = None, home: str | None = None
               ) -> tuple[Token | None, str]:
    """(the token or None, why none when None: "" when nowhere was it set)."""
    env = os.environ if env is None else env
    value = (env.get("RAY_AUTH_TOKEN") or "").strip()
    if value:
        if not _one_word(value):
            return None, "RAY_AUTH_TOKEN is not one word of printable ASCII"
        return Token(value, "RAY_AUTH_TOKEN"), ""
    named = env.get("RAY_AUTH_TOKEN_PATH")
    path = named or os.path.join(home if home is not None else os.path.expanduser("~"),
                                 ".ray", "auth_token")
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_TOKEN_BYTES + 1)
    except FileNotFoundError:
        return None, f"RAY_AUTH_TOKEN_PATH names {path}, which does not exist" if named else ""
    except OSError as exc:
        return None, f"cannot read the token file {path}: {exc.strerror or exc}"
    if len(raw) > MAX_TOKEN_BYTES:
        return None, f"the token file {path} is over {MAX_TOKEN_BYTES} bytes: not a token"
    value = raw.decode("utf-8", "replace").strip()
    if not value or not _one_word(value):
        return None, f"the token file {path} holds no token"
    return Token(value, path), ""


def _one_word(value: str) -> bool:
    """What an HTTP header can carry whole: printable ASCII, no space (a newline inside would
    make http.client raise with the whole header, token included, in its message)."""
    return value.isascii() and all(c.isprintable() and not c.isspace() for c in value)
