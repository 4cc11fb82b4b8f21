"""``redact_url``: a URL as it may be shown, without the password in its user-info, a lone
user name (often a token) or the values of query parameters with secret names."""

from __future__ import annotations

import pytest

from rltui.redact import redact_url


@pytest.mark.parametrize("url, shown", [
    ("http://user:sk-abcdefghijklmnopqrstuv@host:8000/v1", "http://user:***@host:8000/v1"),
    ("http://user:p%40ss@host/v1", "http://user:***@host/v1"),
    # an unescaped / or # in the password must not move it into the path or fragment
    ("http://user:pa/ss@host/v1", "http://user:***@host/v1"),
    ("http://user:pa#ss@host/v1", "http://user:***@host/v1"),
    ("https://ghp-like-token@host/v1", "https://***@host/v1"),
    ("http://host/v1?api_key=abc123&model=m", "http://host/v1?api_key=***&model=m"),
    ("http://host/v1?model=m&access_token=a%20b", "http://host/v1?model=m&access_token=***"),
    ("http://host/v1?Api-Key=x&key=y", "http://host/v1?Api-Key=***&key=***"),
    ("https://u:p@h/generate?key=1#frag", "https://u:***@h/generate?key=***"),
    # nothing secret: unchanged
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ("http://host/v1?model=m&input_key=prompt", "http://host/v1?model=m&input_key=prompt"),
    ("http://host/v1?", "http://host/v1?"),
    # not a URL: scrubbed like any text
    ("/models/Qwen2.5-7B", "/models/Qwen2.5-7B"),
    ("127.0.0.1:8000 sk-abcdefghijklmnopqrstuvwx", "127.0.0.1:8000 ***"),
])
def test_redact_url(url, shown):
    assert redact_url(url) == shown


def test_a_token_shape_anywhere_in_the_url_is_hidden():
    assert redact_url("http://h/v1/hf_abcdefghijklmnopqrstuvwxyz/x") == "http://h/v1/***/x"


@pytest.mark.parametrize("url, secrets", [
    ("http://u:p%40ss@h/v1?Api-Key=k-1&model=m", ["p%40ss", "k-1"]),
    ("http://h/v1?api%5Fkey=k-2", ["k-2"]),                 # an escaped secret name
    ("http://h/v1?input_key=prompt", []),
    ("http://[::1/v1", []),                                  # does not parse: nothing to raise
])
def test_url_secrets(url, secrets):
    from rltui.redact import url_secrets

    assert url_secrets(url) == secrets
