"""The check's input: shape validation, the dataset, the kwargs every run gets."""

from __future__ import annotations

import pytest

from rltui.checks.workflow.spec import (SpecError, WorkflowSpec, batch_rows, load_rows,
                                        parse_json_object, run_kwargs, validate)


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
