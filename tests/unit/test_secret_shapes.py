"""The corpus of secret shapes (tests/data/secret_shapes.toml: fake values in the shapes of
OpenAI, Anthropic, HF, W&B, AWS, GCP, GitHub, Slack keys, JWTs, Bearer headers, basic-auth
URLs, PEM private keys) is hidden whichever way it is written, and the ids that make a report
useful are not."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rltui.redact import REDACTED, redact_argv, redact_env, scrub_text
from rltui.scrub import outgoing_text, scrub
from tests.compat import tomllib

SHAPES = tomllib.loads((Path(__file__).resolve().parents[1] / "data" / "secret_shapes.toml")
                       .read_text(encoding="utf-8"))["shape"]
IDS = [s["name"] for s in SHAPES]


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_the_corpus_is_well_formed(shape):
    assert shape["secret"] in shape["written"]


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_hidden_in_free_text(shape):
    line = f"2026-01-01 12:00:00 INFO {shape['written']} (step 3)"
    assert shape["secret"] not in scrub_text(line)
    assert shape["secret"] not in outgoing_text(line + "\n" + line)


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_hidden_in_a_command_line(shape):
    argv = ["python", "train.py", *shlex.split(shape["written"]), "--epochs", "3"]
    out = redact_argv(argv)
    assert shape["secret"] not in " ".join(out)
    assert out[-2:] == ("--epochs", "3")


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_hidden_in_an_environment_value_and_a_structure(shape):
    assert shape["secret"] not in str(redact_env({"JOB_NOTE": shape["written"]}))
    doc = {"ranks": [{"cmdline": ["x", shape["written"]], "threads": (shape["written"],)}],
           shape["written"]: 1}
    assert shape["secret"] not in repr(scrub(doc))


@pytest.mark.parametrize("text", [
    "commit 0123456789abcdef0123456789abcdef01234567",  # a git hash: 40 hex, like a W&B key
    "worker_id=3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c",  # a Ray worker id
    "actor_id: 5e4f0c2a8d5b9f7e01000000",
    "node 10.0.3.17:6379 job 02000000",
    "tokenizer=Qwen/Qwen2.5-7B pad_token=<|endoftext|> max_token_len=8192",
    "data.prompt_key=prompt data.response_key=answer",
    "PWD=/home/trainer/run",
    "ssh trainer@node-03.example.com",
    "http://node-03:8265/api/jobs/raysubmit_abc123",
    "http://host:8080/path/to@file",
    "step 12 | loss 0.31 | reward/mean 0.52 | sk-learn 1.4",
])
def test_ids_and_settings_stay_readable(text):
    assert REDACTED not in scrub_text(text)


# Fuzzing: a bounded run in the normal suite, RLTUI_FUZZ_LONG=1 for a long one.
FUZZ = settings(max_examples=2000 if os.environ.get("RLTUI_FUZZ_LONG") else 150,
                deadline=None)
AROUND = st.text(alphabet=st.characters(codec="utf-8"), max_size=60)


@FUZZ
@given(before=AROUND, shape=st.sampled_from(SHAPES), after=AROUND)
def test_a_shape_anywhere_in_a_line_is_hidden(before, shape, after):
    line = f"{before} {shape['written']} {after}"
    assert shape["secret"] not in scrub_text(line)
    assert shape["secret"] not in outgoing_text(line)


@FUZZ
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=300))
def test_outgoing_text_has_no_control_character_but_line_breaks(text):
    out = outgoing_text(text)
    assert all(c in "\n\t" or (c.isprintable() or c == " ") for c in out if ord(c) < 0xa0)
    assert "\x1b" not in out and "\x9b" not in out
