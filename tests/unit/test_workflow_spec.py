"""The check's input: shape validation, the dataset, the kwargs every run gets."""

from __future__ import annotations

import pytest

from rltui.checks.workflow.spec import (
    SpecError,
    WorkflowSpec,
    batch_rows,
    load_rows,
    parse_json_object,
    run_kwargs,
    validate,
)


def spec(**kw):
    kw.setdefault("prompt", "hi")
    return WorkflowSpec(target=kw.pop("target", "pkg.mod:Agent"), **kw)


def test_default_shape_is_the_rl_batch():
    s = spec()
    validate(s)
    assert (s.local_bs, s.requested) == (64, 512)


@pytest.mark.parametrize("kw, message", [
    ({"target": "no_colon"}, "expected module:Class"),
    ({"target": "a:b:c"}, "expected module:Class"),
    ({"global_bs": 10, "rollout_dp_size": 4}, "not divisible"),
    ({"group_size": 0}, "--group-size 0: must be a positive integer"),
    ({"global_bs": -8}, "--global-bs -8"),
    ({"rollout_dp_size": True}, "--rollout-dp-size True"),
    ({"concurrency": 0}, "--concurrency 0"),
    ({"timeout": 0}, "--timeout 0"),
    ({"loop_block_s": -1}, "--loop-block -1"),
    ({"prompt": None}, "give --data FILE"),
    ({"paths": ("/definitely/not/here",)}, "--path /definitely/not/here: not a folder"),
    ({"extra_kwargs": {"x": object()}}, "not JSON data"),
])
def test_bad_specs_name_the_flag(kw, message):
    with pytest.raises(SpecError, match=None) as info:
        validate(spec(**kw))
    assert message in str(info.value)


def test_bad_dataset_lines_are_skipped_and_named(tmp_path):
    """Each line that is a JSON object is a row as it is, whatever its keys; the others are
    skipped with their line number, and only a file with no row left is an error."""
    path = tmp_path / "d.jsonl"
    path.write_text('{"question": "a"}\n\n{"prompt": \n["not", "a", "dict"]\n{"q": "b\u2028c"}\n',
                    encoding="utf-8")
    rows, skipped = load_rows(spec(dataset=str(path)))
    assert rows == [{"question": "a"}, {"q": "b\u2028c"}]
    assert [str(s).split(" (")[0] for s in skipped] == [
        "line 3: not JSON", "line 4: a JSON list, not an object"]


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"),
    ("\n\n", "holds no samples (empty file)"),
    ('[1]\n"x"\n', "holds no valid sample: line 1: a JSON list, not an object; line 2: a JSON "
                    "str, not an object"),
    (b"\xff\xfe\x00", "is not UTF-8 text"),
])
def test_a_dataset_with_no_row_left_is_an_input_error(tmp_path, content, message):
    path = tmp_path / "d.jsonl"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load_rows(spec(dataset=str(path)))
    assert message in str(info.value)


def test_only_the_rows_of_one_batch_are_read(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(f'{{"i": {i}}}\n' for i in range(10)) + "bad\n", encoding="utf-8")
    rows, skipped = load_rows(spec(dataset=str(path), global_bs=8, rollout_dp_size=2))
    assert [r["i"] for r in rows] == [0, 1, 2, 3] and skipped == []


def test_rows_come_from_rows_then_dataset_then_prompt(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "a"}\n\n{"prompt": "b"}\n')
    assert load_rows(spec(rows=[{"x": 1}], dataset=str(path))) == ([{"x": 1}], [])
    assert load_rows(spec(dataset=str(path))) == ([{"prompt": "a"}, {"prompt": "b"}], [])
    assert load_rows(spec(prompt="hello")) == (
        [{"prompt": "hello", "messages": [{"role": "user", "content": "hello"}]}], [])


def test_a_short_dataset_repeats_with_a_note():
    rows = [{"i": 0}, {"i": 1}]
    batch, note = batch_rows(rows, 5)
    assert [r["i"] for r in batch] == [0, 1, 0, 1, 0] and "repeat" in note
    assert batch_rows(rows * 3, 4) == (rows * 2, None)


def test_run_kwargs_pass_url_key_and_temperature_zero(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    assert run_kwargs(spec()) == {"base_url": "http://env/v1", "api_key": "env-key",
                                  "temperature": 0}
    kw = run_kwargs(spec(base_url="http://flag/v1", api_key="flag-key",
                         extra_kwargs={"model": "m", "temperature": 0.7}))
    assert kw == {"base_url": "http://flag/v1", "api_key": "flag-key", "temperature": 0.7,
                  "model": "m"}
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert run_kwargs(spec()) == {"temperature": 0}


def test_the_key_is_not_in_the_spec_repr():
    assert "sk-secret" not in repr(spec(api_key="sk-secret"))


def test_json_object_flags():
    assert parse_json_object('{"a": 1}', "--kwargs") == {"a": 1}
    with pytest.raises(SpecError, match="--kwargs: not JSON"):
        parse_json_object("{a: 1}", "--kwargs")
    with pytest.raises(SpecError, match="expected a JSON object, got list"):
        parse_json_object("[1]", "--init-kwargs")


@pytest.mark.parametrize("url, message", [
    ("http://[::1/v1", "--base-url 'http://[::1/v1': not a usable URL (Invalid IPv6 URL)"),
    ("http://127.0.0.1:99999/v1", "(Port out of range 0-65535)"),
    ("http://h:abc/v1", "Port could not be cast to integer"),
    ("http:///v1", "(no host)"),
    ("http://bob:pw-secret-77@[::1/v1", "'http://bob:***@[::1/v1'"),
])
def test_a_base_url_that_cannot_work_is_an_input_error(monkeypatch, url, message):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(SpecError) as info:
        validate(spec(base_url=url))
    assert message in str(info.value) and "pw-secret-77" not in str(info.value)


def test_the_base_url_from_the_environment_is_checked_and_named(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:70000/v1")
    with pytest.raises(SpecError, match="^OPENAI_BASE_URL 'http://127.0.0.1:70000/v1'"):
        validate(spec())
    # another scheme is the workflow's business (the probe says it cannot test it)
    monkeypatch.setenv("OPENAI_BASE_URL", "unix:///run/llm.sock")
    validate(spec())


def test_the_repr_hides_the_url_password_and_secret_named_kwargs(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "env-key-never-shown")
    shown = repr(spec(
        base_url="http://bob:url-pass-4242@h:8000/v1?api_key=q-key-4343",
        api_key="flag-key-4444",
        extra_kwargs={"api_key": "kw-key-4545", "model": "qwen", "input_key": "question",
                      "client": {"authToken": "nested-4646"},
                      "headers": [{"Authorization": "Bearer tok-4747"}],
                      "note": "Bearer free-text-4848"},
        init_kwargs={"hf_token": "hf-init-4949", "max_tokens": 9}))
    for secret in ("url-pass-4242", "q-key-4343", "flag-key-4444", "env-key-never-shown",
                   "kw-key-4545", "nested-4646", "tok-4747", "free-text-4848", "hf-init-4949"):
        assert secret not in shown
    # what is not secret stays readable
    assert "base_url='http://bob:***@h:8000/v1?api_key=***'" in shown
    assert "'model': 'qwen'" in shown and "'input_key': 'question'" in shown
    assert "'max_tokens': 9" in shown and shown.startswith("WorkflowSpec(target='pkg.mod:Agent'")


@pytest.mark.parametrize("url, error", [
    ("http://[::1/v1", "not a valid URL (Invalid IPv6 URL)"),
    ("http://127.0.0.1:99999/v1", "not a valid URL (Port out of range 0-65535)"),
    ("ftp://h/v1", "not an http(s) URL"),
])
def test_the_probe_reports_a_url_it_cannot_use_instead_of_raising(url, error):
    from rltui.checks.workflow.process import probe

    assert probe(url) == {"url": url, "reachable": False, "error": error}


def test_the_check_itself_reports_a_malformed_base_url_as_input(monkeypatch):
    """The app calls run() without the CLI's validate(): still an input error, no internal
    error and no worker started."""
    from rltui.checks.workflow.runner import run

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    report = run(spec(base_url="http://u:pw-7171@[::1/v1"))
    assert report.setup_error["kind"] == "input"
    assert "Invalid IPv6 URL" in report.setup_error["message"]
    assert report.worker_end is None and "pw-7171" not in str(report.to_json())
