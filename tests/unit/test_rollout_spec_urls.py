"""A rollout check's URLs: one that cannot work is a usage error (SpecError) before anything
starts, never a traceback from ``urlparse`` or the HTTP client; none shows its password."""

from __future__ import annotations

import pytest

from rltui.checks.rollout.spec import RolloutSpec, SpecError, is_url
from rltui.checks.urls import looks_like_url, url_problem


def spec(**kw) -> RolloutSpec:
    kw.setdefault("server", "http://127.0.0.1:8000/v1")
    return RolloutSpec(dataset="d.jsonl", reference=kw.pop("reference", "/models/m"), **kw)


@pytest.mark.parametrize("url, problem", [
    ("http://[::1/v1", "Invalid IPv6 URL"),
    ("http://127.0.0.1:99999/v1", "Port out of range 0-65535"),
    ("http://h:abc/v1", "Port could not be cast to integer value as 'abc'"),
    ("http:///v1", "no host"),
    ("ftp://h/v1", "not an http(s) URL"),
    ("127.0.0.1:8000/v1", "not an http(s) URL"),
    ("https://[::1]:8000/v1", None),
    ("http://u:p@h/v1?api_key=k", None),
])
def test_url_problem(url, problem):
    assert url_problem(url) == problem


def test_other_schemes_pass_when_only_parsing_counts():
    assert url_problem("unix:///run/s.sock", http_only=False) is None
    assert url_problem("unix://h:99999/", http_only=False) == "Port out of range 0-65535"


def test_what_looks_like_a_url():
    assert looks_like_url("http://[::1") and looks_like_url(" HTTPS://h")
    assert not looks_like_url("/models/m") and not looks_like_url("models/http:x")


def test_is_url_says_no_to_a_url_that_does_not_parse():
    assert is_url("http://h/v1") and not is_url("http://[::1") and not is_url("/models/m")


@pytest.mark.parametrize("kw, message", [
    ({"server": "http://[::1/v1"}, "--server must be an http(s) URL such as "
                                   "http://127.0.0.1:8000/v1 (got 'http://[::1/v1': Invalid "
                                   "IPv6 URL)"),
    ({"server": "http://127.0.0.1:99999/v1"}, "Port out of range"),
    ({"server": "http://u:pw-5151@h:0x1/v1"}, "(got 'http://u:***@h:0x1/v1': Port could not"),
    ({"reference": "http://[::1"}, "--reference must be a local model folder or an http(s) URL "
                                   "(got 'http://[::1': Invalid IPv6 URL)"),
    ({"reference": "http://u:pw-5252@h:70000/v1", "tokenizer": "/t"},
     "(got 'http://u:***@h:70000/v1': Port out of range"),
    ({"reference": "ftp://h/m"}, "not an http(s) URL"),
])
def test_a_url_that_cannot_work_is_a_spec_error(kw, message):
    with pytest.raises(SpecError) as info:
        spec(**kw).validate()
    assert message in str(info.value)
    assert "pw-5151" not in str(info.value) and "pw-5252" not in str(info.value)


def test_settings_and_repr_never_show_a_password_even_of_a_url_that_does_not_parse():
    s = spec(reference="http://u:pw-5353@[::1/v1", server="http://u:pw-5454@[::1/v1")
    shown = repr(s) + str(s.settings())
    assert "pw-5353" not in shown and "pw-5454" not in shown
    assert s.settings()["reference"] == "http://u:***@[::1/v1"
