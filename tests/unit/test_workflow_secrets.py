"""What the workflow check hides in everything the worker says: the API key, secret-named values
from --kwargs and --init-kwargs (at any depth), the base URL's password."""

from __future__ import annotations

import pytest

from rltui.checks.workflow import scrub as scrub_module
from rltui.checks.workflow.scrub import Scrubber, secrets_of
from rltui.checks.workflow.spec import WorkflowSpec
from rltui.redact import url_secrets


def spec(**kw):
    return WorkflowSpec(target="m:A", prompt="hi", **kw)


def test_secret_named_values_are_collected_and_others_are_not(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    s = spec(api_key="flag-key-1234",
             extra_kwargs={"api_key": "plainkey1234567", "model": "qwen", "temperature": 0,
                           "input_key": "question",
                           "client": {"authToken": "nested-token-1", "timeout": 5},
                           "headers": [{"x_api_key": "in-a-list-99"}]},
             init_kwargs={"hf_token": "hf-init-token-77", "db_password": "pw-init-42",
                          "tokenizer_path": "/models/tok", "max_tokens": 9},
             base_url="http://bob:p%40ss-word-88@127.0.0.1:8000/v1")
    found = set(secrets_of(s))
    assert found == {"flag-key-1234", "plainkey1234567", "nested-token-1", "in-a-list-99",
                     "hf-init-token-77", "pw-init-42", "p%40ss-word-88", "p@ss-word-88"}


def test_the_environment_key_counts_and_odd_kwargs_do_not_break_it(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "env-key-5678")
    assert secrets_of(spec(extra_kwargs=["not", "a", "dict"], init_kwargs={1: "x"})) == [
        "env-key-5678"]


def test_the_scrubber_hides_every_secret_everywhere():
    scrub = Scrubber(["plainkey1234567", "plainkey", "abc", None, ""])
    msg = {"message": "refused plainkey1234567 and plainkey", "tail": ["x plainkey y"],
           "n": 3, "abc": "abc stays: too short to hide safely"}
    assert scrub(msg) == {"message": "refused *** and ***", "tail": ["x *** y"], "n": 3,
                          "abc": "abc stays: too short to hide safely"}
    assert scrub.text("Bearer sk-abcdefghijklmnopqrstu") == "Bearer ***"


@pytest.mark.parametrize("url, secrets", [
    ("http://127.0.0.1:8000/v1", []),
    ("http://bob:p%40ss-word@host:8000/v1", ["p%40ss-word"]),
    ("http://bob:pa/ss-word@host/v1", ["pa/ss-word"]),        # not moved into the path
    ("https://tok-abcdef123@host/v1", ["tok-abcdef123"]),      # a lone user-info
    ("http://host/v1?api_key=q-secret-1&model=m", ["q-secret-1"]),
    ("no scheme at all", []),
])
def test_what_a_base_url_carries(url, secrets):
    assert url_secrets(url) == secrets


def test_url_secrets_moved_to_redact_and_still_importable_from_scrub():
    assert scrub_module.url_secrets is url_secrets
