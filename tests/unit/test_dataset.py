"""The shared JSONL dataset reader: good lines become samples, bad lines are skipped with their
line number and a reason, and a file with nothing usable is an error that says why."""

from __future__ import annotations

import json

import pytest

from rltui.checks.dataset import (
    DatasetError,
    Sample,
    SkippedLine,
    load_dataset,
    parse_line,
    read_objects,
)


@pytest.mark.parametrize("text, reason", [
    ("{not json", "not JSON"),
    ("[1, 2]", "a JSON list, not an object"),
    ('"hello"', "a JSON str, not an object"),
    ('{"answer": "4"}', "has none of 'prompt', 'messages' and 'input_ids'"),
    ('{"prompt": 5}', "'prompt' must be a string, not int"),
    ('{"messages": "hi"}', "'messages' must be a non-empty list"),
    ('{"messages": []}', "'messages' must be a non-empty list"),
    ('{"messages": ["hi"]}', "'messages'[0] is not an object"),
    ('{"messages": [{"content": "hi"}]}', "'messages'[0] has no string 'role'"),
    ('{"messages": [{"role": "user", "content": 3}]}', "'messages'[0].content must be"),
    ('{"prompt": "x", "answer": [1]}', "'answer' must be a string or a number"),
    ('{"input_ids": []}', "'input_ids' must be a non-empty list"),
    ('{"input_ids": [1, -2]}', "'input_ids' must be a non-empty list of non-negative ints"),
    ('{"input_ids": [1, true]}', "'input_ids' must be a non-empty list of non-negative ints"),
    ('{"input_ids": [1, 2.0]}', "'input_ids' must be a non-empty list of non-negative ints"),
])
def test_a_bad_line_is_skipped_with_its_reason(text, reason):
    parsed = parse_line(text, line=7, index=0)
    assert isinstance(parsed, SkippedLine)
    assert parsed.line == 7
    assert reason in parsed.reason
    assert str(parsed).startswith("line 7: ")


@pytest.mark.parametrize("obj, expected", [
    ({"prompt": "2+2?", "answer": 4}, dict(prompt="2+2?", answer="4")),
    ({"prompt": "ok?", "answer": True}, dict(prompt="ok?", answer="true")),
    ({"prompt": "x", "answer": 0.5}, dict(prompt="x", answer="0.5")),
    ({"messages": [{"role": "user", "content": "hi"}]},
     dict(messages=({"role": "user", "content": "hi"},), answer=None)),
    ({"input_ids": [5, 6]}, dict(input_ids=(5, 6), prompt=None, messages=None)),
    ({"prompt": "p", "input_ids": [1]}, dict(prompt="p", input_ids=(1,))),
])
def test_a_good_line_becomes_a_sample(obj, expected):
    parsed = parse_line(json.dumps(obj), line=3, index=2)
    assert isinstance(parsed, Sample)
    assert (parsed.line, parsed.index) == (3, 2)
    for key, value in expected.items():
        assert getattr(parsed, key) == value


def test_other_keys_are_kept_and_data_round_trips():
    obj = {"prompt": "p", "answer": "a", "id": 17, "meta": {"k": [1]}}
    sample = parse_line(json.dumps(obj), 1, 0)
    assert sample.extra == {"id": 17, "meta": {"k": [1]}}
    assert sample.data == obj


def test_file_with_good_bad_and_blank_lines(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "a"}\n\n   \nnot json\n{"prompt": "b", "answer": "1"}\r\n'
                    '{"answer": 1}\n', encoding="utf-8")
    data = load_dataset(path)
    assert [s.prompt for s in data.samples] == ["a", "b"]
    assert [(s.index, s.line) for s in data.samples] == [(0, 1), (1, 5)]
    assert [(s.line, s.reason.split(" (")[0]) for s in data.skipped] == [
        (4, "not JSON"), (6, "has none of 'prompt', 'messages' and 'input_ids'")]
    assert not data.truncated


def test_limit_counts_valid_samples(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(['bad'] + [json.dumps({"prompt": str(i)}) for i in range(5)]),
                    encoding="utf-8")
    data = load_dataset(path, limit=2)
    assert [s.prompt for s in data.samples] == ["0", "1"]
    assert data.truncated and len(data.skipped) == 1


def test_a_line_separator_inside_a_string_does_not_split_the_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "a\u2028b"}\n', encoding="utf-8")
    assert load_dataset(path).samples[0].prompt == "a\u2028b"


def test_utf8_bom_is_accepted(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"prompt": "x"}\n')
    assert load_dataset(path).samples[0].prompt == "x"


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"),
    ("", "holds no samples (empty file)"),
    ("\n\n", "holds no samples (empty file)"),
    ("nope\n{}\n", "holds no valid sample: line 1: not JSON"),
    (b"\xff\xfe\x00", "is not UTF-8 text"),
])
def test_unusable_files_are_errors_that_say_why(tmp_path, content, message):
    path = tmp_path / "d.jsonl"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_dataset(path)


def test_a_folder_and_a_bad_limit_are_errors(tmp_path):
    with pytest.raises(DatasetError, match="is a folder"):
        load_dataset(tmp_path)
    with pytest.raises(DatasetError, match="--limit must be at least 1"):
        load_dataset(tmp_path / "x", limit=0)


def test_many_bad_lines_are_summarised(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("x\n" * 5, encoding="utf-8")
    with pytest.raises(DatasetError, match=r"\(and 2 more\)"):
        load_dataset(path)


def test_read_objects_keeps_whole_objects_and_skips_bad_lines(tmp_path):
    """The workflow check's reader: any JSON object is a row, whatever its keys; the same line
    splitting and the same reasons as the sample reader."""
    path = tmp_path / "d.jsonl"
    path.write_text('{"question": "q", "n": 1}\n\nnot json\n[1]\n{"prompt": "a\u2028b"}\r\n',
                    encoding="utf-8")
    rows, skipped = read_objects(path)
    assert rows == [(1, {"question": "q", "n": 1}), (5, {"prompt": "a\u2028b"})]
    assert [str(s) for s in skipped] == [
        "line 3: not JSON (Expecting value at column 1)", "line 4: a JSON list, not an object"]


def test_read_objects_stops_at_the_limit(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('bad\n{"i": 0}\n{"i": 1}\nbad again\n{"i": 2}\n', encoding="utf-8")
    rows, skipped = read_objects(path, limit=2)
    assert [obj["i"] for _, obj in rows] == [0, 1]
    assert [s.line for s in skipped] == [1], "lines past the limit are not read"


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"),
    ("\n", "holds no samples (empty file)"),
    ("nope\n[2]\n", "holds no valid sample: line 1: not JSON"),
])
def test_read_objects_fails_only_when_nothing_is_left(tmp_path, content, message):
    path = tmp_path / "d.jsonl"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_objects(path)


def test_objects_that_are_not_samples_are_skipped_in_line_order(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"answer": 1}\nbad\n{"prompt": "p"}\n', encoding="utf-8")
    data = load_dataset(path)
    assert [s.line for s in data.skipped] == [1, 2]
    assert [s.line for s in data.samples] == [3]


def test_a_limit_met_exactly_is_not_truncated_and_later_lines_are_not_skipped(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": "b"}\n', encoding="utf-8")
    assert not load_dataset(path, limit=2).truncated
    path.write_text('{"prompt": "a"}\n{"prompt": "b"}\nbad\n', encoding="utf-8")
    data = load_dataset(path, limit=2)
    assert data.truncated and data.skipped == ()
