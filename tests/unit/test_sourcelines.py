"""read_source: lines around a frame's line, bounded, cached, and never an exception."""

from __future__ import annotations

import os

import pytest

from rltui.sources import sourcelines
from rltui.sources.sourcelines import read_source

CODE = "".join(f"line {n}\n" for n in range(1, 21))


@pytest.fixture
def src(tmp_path):
    path = tmp_path / "pkg" / "mod.py"
    path.parent.mkdir()
    path.write_text(CODE)
    return path


def test_lines_around_the_frame_line(src):
    assert read_source(str(src), 10) == [(8, "line 8"), (9, "line 9"), (10, "line 10"),
                                         (11, "line 11"), (12, "line 12")]
    assert read_source(str(src), 10, context=0) == [(10, "line 10")]


def test_context_is_clipped_at_both_ends(src):
    assert [n for n, _ in read_source(str(src), 1)] == [1, 2, 3]
    assert [n for n, _ in read_source(str(src), 20)] == [18, 19, 20]


def test_a_short_name_is_found_under_a_root(src, tmp_path):
    # py-spy's short filename is relative to a sys.path entry.
    assert read_source("pkg/mod.py", 5, roots=[str(tmp_path / "nowhere"), str(tmp_path)]) \
        == [(3, "line 3"), (4, "line 4"), (5, "line 5"), (6, "line 6"), (7, "line 7")]


def test_a_short_name_is_found_under_the_working_directory(src, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert read_source("pkg/mod.py", 2, context=0) == [(2, "line 2")]


def test_a_full_path_from_another_machine_is_found_by_its_tail(src, tmp_path):
    assert read_source("/opt/job/checkout/pkg/mod.py", 4, context=0,
                       roots=[str(tmp_path)]) == [(4, "line 4")]


@pytest.mark.parametrize("path, line", [
    ("<frozen runpy>", 198), ("<string>", 1), ("", 1), ("/no/such/file.py", 3),
])
def test_no_file_gives_none(path, line):
    assert read_source(path, line) is None


def test_a_line_past_the_end_or_not_positive_gives_none(src):
    assert read_source(str(src), 21) is None
    assert read_source(str(src), 0) is None
    assert read_source(str(src), -4) is None


def test_binary_gives_none(tmp_path):
    path = tmp_path / "lib.so"
    path.write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    assert read_source(str(path), 1) is None


def test_huge_file_gives_none(tmp_path, monkeypatch):
    path = tmp_path / "big.py"
    path.write_text("x = 1\n" * 100)
    monkeypatch.setattr(sourcelines, "MAX_BYTES", 50)
    assert read_source(str(path), 1) is None


def test_a_directory_or_fifo_gives_none(tmp_path):
    assert read_source(str(tmp_path), 1) is None
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    assert read_source(str(fifo), 1) is None  # and does not block


def test_control_characters_tabs_and_long_lines_are_made_safe(tmp_path):
    path = tmp_path / "odd.py"
    path.write_bytes(b"\tx = '\x1b[31m'\r\ny = 2\x0c3\n" + b"z" * 1000 + b"\n\xff\xfe\n")
    lines = dict(read_source(str(path), 2, context=5))
    assert lines[1] == "    x = '\ufffd[31m'"
    assert lines[2] == "y = 2\ufffd3"  # a form feed does not start a line (as in Python)
    assert len(lines[3]) == sourcelines.MAX_LINE
    assert lines[4] == "\ufffd\ufffd"  # undecodable bytes are replaced


def test_an_edited_file_is_read_again(src):
    assert read_source(str(src), 1, context=0) == [(1, "line 1")]
    src.write_text("changed here\n" + CODE)
    st = src.stat()
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert read_source(str(src), 1, context=0) == [(1, "changed here")]


def test_a_file_is_read_once_while_unchanged(src, monkeypatch):
    read_source(str(src), 3)
    calls = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: calls.append(a) or real_open(*a, **k))
    read_source(str(src), 7)
    assert calls == []


def test_never_raises(monkeypatch):
    def boom(*_a, **_k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(sourcelines.os, "stat", boom)
    assert read_source("/x/y.py", 1) is None
    assert read_source(None, 1) is None  # type: ignore[arg-type]
