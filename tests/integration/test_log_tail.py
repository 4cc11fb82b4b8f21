"""FileTail against real files that another process writes while the tail reads them.

The writer is a child Python process that takes one JSON command per line on stdin and answers
"ok" on stdout once the bytes are written; the test reads only after that answer, so every
step is ordered by the protocol, not by sleeps. Line numbers are checked exactly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

import pytest

from rltui.model import DENIED, ERROR, OK, UNAVAILABLE
from rltui.sources.tail import DELETED, LOOKS_BINARY, MISSING, RENAMED, ROTATED, TRUNCATED, FileTail

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

# The writer: holds one file open in append mode, as a training process holds its log.
WRITER = r"""
import json, os, shutil, sys
fd = None
def line(prefix, k):
    return f"{prefix}{k}\n".encode()
for raw in sys.stdin:
    cmd = json.loads(raw)
    op = cmd["op"]
    if op == "open":
        fd = os.open(cmd["path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    elif op == "lines":
        start, n, prefix = cmd["start"], cmd["n"], cmd.get("prefix", "line ")
        os.write(fd, b"".join(line(prefix, k) for k in range(start, start + n)))
    elif op == "raw":
        os.write(fd, bytes.fromhex(cmd["hex"]))
    elif op == "long":  # one line of n bytes, written in 1 MiB pieces
        left = cmd["n"]
        while left:
            left -= os.write(fd, b"x" * min(left, 1 << 20))
        os.write(fd, b"\n")
    elif op == "rename":
        os.rename(cmd["src"], cmd["dst"])
    elif op == "copytruncate":
        shutil.copyfile(cmd["src"], cmd["dst"])
        os.ftruncate(fd, 0)
    elif op == "truncate":
        os.ftruncate(fd, 0)
    elif op == "unlink":
        os.unlink(cmd["path"])
    elif op == "close":
        os.close(fd)
        fd = None
    sys.stdout.write("ok\n")
    sys.stdout.flush()
"""


class Writer:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.proc = subprocess.Popen([sys.executable, "-c", WRITER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def do(self, op: str, **args) -> None:
        """Send one command and wait for the child to say it is done."""
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer == "ok\n", f"writer failed on {op}: {answer!r}"

    def open(self, path: Path | None = None) -> None:
        self.do("open", path=str(path or self.path))

    def lines(self, start: int, n: int, prefix: str = "line ") -> None:
        self.do("lines", start=start, n=n, prefix=prefix)

    def raw(self, data: bytes) -> None:
        self.do("raw", hex=data.hex())

    def stop(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture
def log(tmp_path):
    writers: list[Writer] = []

    def make(name: str = "train.log") -> Writer:
        writer = Writer(tmp_path / name)
        writers.append(writer)
        return writer

    yield make
    for writer in writers:
        writer.stop()


def expect(start: int, stop: int, prefix: str = "line ") -> list[tuple[int, str, bool]]:
    """Lines start..stop-1 as ``Writer.lines`` writes them, numbered as they are."""
    return [(k, f"{prefix}{k}", False) for k in range(start, stop)]


def test_appended_lines_arrive_in_order_with_exact_numbers(log):
    w = log()
    w.open()
    w.lines(1, 100)
    tail = FileTail(str(w.path))
    first = tail.read()
    assert first.status == OK and first.history and not first.reset
    assert first.lines == expect(1, 101) and first.line_base_known
    assert tail.read().lines == []  # nothing new
    w.lines(101, 250)
    again = tail.read()
    assert again.lines == expect(101, 351) and not again.history
    assert again.size == w.path.stat().st_size


def test_partial_line_waits_for_its_newline(log):
    w = log()
    w.open()
    tail = FileTail(str(w.path))
    assert tail.read().lines == []
    w.raw(b"abc")
    assert tail.read().lines == []
    w.raw(b"def\nghi")
    assert tail.read().lines == [(1, "abcdef", False)]
    w.raw(b"\r\n")  # CRLF endings: the \r is not part of the text
    assert tail.read().lines == [(2, "ghi", False)]


def test_rename_rotation_reads_the_old_file_to_its_end_first(log, tmp_path):
    w = log()
    w.open()
    w.lines(1, 50)
    tail = FileTail(str(w.path))
    assert tail.read().lines == expect(1, 51)
    # The logger renames its file, keeps writing the old one a little, then opens a new one.
    w.do("rename", src=str(w.path), dst=str(tmp_path / "train.log.1"))
    w.lines(51, 10)
    w.raw(b"unfinished")
    moved = tail.read()  # the path names nothing yet: keep following the old file
    assert moved.lines == expect(51, 61) and moved.message == RENAMED and not moved.ended
    w.raw(b" and done\nlast")
    w.do("close")
    w.open()
    w.lines(1, 5, prefix="new ")
    old = tail.read()
    assert old.lines == [(61, "unfinished and done", False), (62, "last", False)]
    assert old.ended and not old.reset and old.message == ROTATED
    new = tail.read()
    assert new.reset and new.lines == expect(1, 6, prefix="new ")
    w.lines(6, 3, prefix="new ")
    assert tail.read().lines == expect(6, 9, prefix="new ")


def test_rotation_noticed_only_after_the_new_file_exists(log, tmp_path):
    w = log()
    w.open()
    w.lines(1, 10)
    tail = FileTail(str(w.path))
    tail.read()
    w.do("rename", src=str(w.path), dst=str(tmp_path / "train.log.1"))
    w.lines(11, 10)
    w.do("close")
    w.open()
    w.lines(1, 3, prefix="new ")
    old = tail.read()
    assert old.lines == expect(11, 21) and old.ended
    new = tail.read()
    assert new.reset and new.lines == expect(1, 4, prefix="new ")


def test_copytruncate_starts_over(log, tmp_path):
    w = log()
    w.open()
    w.lines(1, 100)
    tail = FileTail(str(w.path))
    assert len(tail.read().lines) == 100
    w.raw(b"half a li")
    assert tail.read().lines == []  # held until its newline, or the end of this file
    w.do("copytruncate", src=str(w.path), dst=str(tmp_path / "train.log.1"))
    w.lines(1, 5, prefix="after ")
    end = tail.read()
    assert end.ended and end.message == TRUNCATED and end.lines == [(101, "half a li", False)]
    again = tail.read()
    assert again.reset and again.lines == expect(1, 6, prefix="after ")


def test_truncated_and_rewritten_past_the_offset_still_starts_over(log):
    w = log()
    w.open()
    w.lines(1, 10, prefix="a")
    tail = FileTail(str(w.path))
    tail.read()
    w.do("truncate")
    longer = "b" * 44 + " "  # more bytes than before the truncation
    w.lines(1, 20, prefix=longer)
    assert tail.read().ended
    again = tail.read()
    assert again.reset and again.lines == expect(1, 21, longer)


@pytest.mark.parametrize("after", [20, 10])  # past the offset read; exactly to it
def test_truncation_with_fixed_length_lines_is_noticed(log, after):
    # Every line is 4 bytes, so the byte before the offset is a newline in both generations:
    # only the first bytes (and the last line read, "a19" against "b19") tell.
    w = log()
    w.open()
    w.lines(10, 10, prefix="a")
    tail = FileTail(str(w.path))
    assert [text for _, text, _ in tail.read().lines] == [f"a{k}" for k in range(10, 20)]
    w.do("truncate")
    w.lines(10, after, prefix="b")
    end = tail.read()
    assert end.ended and end.truncated and end.message == TRUNCATED
    assert tail.truncations == 1
    again = tail.read()
    assert again.reset and [text for _, text, _ in again.lines] == [
        f"b{k}" for k in range(10, 10 + after)]


def test_deleted_file_is_read_to_its_end_then_unavailable_then_recreated(log):
    w = log()
    w.open()
    w.lines(1, 10)
    tail = FileTail(str(w.path))
    tail.read()
    w.do("unlink", path=str(w.path))
    w.lines(11, 5)  # still written through the open descriptor
    last = tail.read()
    assert last.lines == expect(11, 16) and last.ended and last.message == DELETED
    gone = tail.read()
    assert gone.status == UNAVAILABLE and gone.message == DELETED and gone.lines == []
    w.do("close")
    w.open()
    w.lines(1, 3)
    back = tail.read()
    assert back.status == OK and back.reset and back.lines == expect(1, 4)


def test_file_that_appears_after_start_is_picked_up(log):
    w = log()
    tail = FileTail(str(w.path))
    missing = tail.read()
    assert missing.status == UNAVAILABLE and missing.message == MISSING
    w.open()
    w.lines(1, 7)
    found = tail.read()
    assert found.status == OK and not found.reset and found.lines == expect(1, 8)


def test_a_directory_is_an_error(tmp_path):
    read = FileTail(str(tmp_path)).read()
    assert read.status == ERROR and "is a directory" in read.message


def test_invalid_utf8_and_nul_bytes_do_not_crash(log):
    w = log()
    w.open()
    w.raw(b"ok \xff\xfe end\n\x00\x00bin\x00\n\xe2\x82\n")
    read = FileTail(str(w.path)).read()
    assert read.status == OK and LOOKS_BINARY in read.message
    assert [n for n, _, _ in read.lines] == [1, 2, 3]
    assert read.lines[0][1] == "ok \ufffd\ufffd end"
    assert read.lines[1][1] == "\ufffd\ufffdbin\ufffd" and "\x00" not in read.lines[1][1]
    assert read.lines[2][1] == "\ufffd"


NOBODY = 65534
READER = """
import json, os, sys
from rltui.sources.tail import FileTail
os.setgroups([]); os.setgid(NOBODY); os.setuid(NOBODY)
seen = []
for path in sys.argv[1:]:
    read = FileTail(path).read()
    seen.append({"status": read.status, "message": read.message, "lines": len(read.lines)})
print(json.dumps(seen))
""".replace("NOBODY", str(NOBODY))


@pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0,
                    reason="needs root to drop to an unprivileged user")
def test_permission_denied_as_an_unprivileged_reader(tmp_path):
    shared = Path(tempfile.mkdtemp(prefix="rltui-denied-"))  # traversable by everyone
    try:
        shared.chmod(0o755)
        secret = shared / "root.log"
        secret.write_text("step:1 - loss:1\n")
        secret.chmod(0o600)
        closed = shared / "private"  # a directory the reader may not enter
        closed.mkdir(mode=0o700)
        (closed / "rank0.log").write_text("hello\n")
        code = tmp_path / "reader.py"
        code.write_text(READER)
        out = subprocess.run([sys.executable, str(code), str(secret), str(closed / "rank0.log")],
                             check=False, capture_output=True, text=True,
                             env={"PYTHONPATH": str(REPO)}, cwd="/", timeout=60)
        assert out.returncode == 0, out.stderr
        file_denied, dir_denied = json.loads(out.stdout)
        assert file_denied["status"] == DENIED and file_denied["lines"] == 0
        assert "permission denied" in file_denied["message"] and "0600" in file_denied["message"]
        assert dir_denied["status"] == DENIED and "directory" in dir_denied["message"]
    finally:
        shutil.rmtree(shared)


def test_a_10_mb_line_is_cut_and_marked_with_bounded_memory(log):
    w = log()
    w.open()
    tail = FileTail(str(w.path))  # defaults: lines cut at 1 MiB, reads of 8 MiB at most
    tail.read()
    w.lines(1, 2)
    w.do("long", n=10 << 20)
    w.lines(4, 2)
    got = []
    for _ in range(3):  # 10 MB at 8 MiB per read
        got.extend(tail.read().lines)
    assert [(n, cut) for n, _, cut in got] == [(1, False), (2, False), (3, True), (4, False),
                                               (5, False)]
    assert got[2][1] == "x" * (1 << 20) and got[3][1] == "line 4"


def test_long_line_memory_stays_near_the_read_limit(log):
    w = log()
    w.open()
    tail = FileTail(str(w.path), max_line_bytes=64 << 10, max_read_bytes=1 << 20)
    tail.read()
    w.do("long", n=10 << 20)
    w.lines(2, 1)
    tracemalloc.start()
    try:
        got = []
        for _ in range(12):
            got.extend(tail.read().lines)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(n, len(t), cut) for n, t, cut in got] == [(1, 64 << 10, True), (2, 6, False)]
    assert peak < 4 << 20, f"peak {peak} bytes while reading a 10 MB line"


@pytest.mark.slow
def test_a_300_mb_file_is_opened_from_its_end_and_counted_in_the_background(log, tmp_path):
    w = log("big.log")
    w.open()
    total = 0
    block = 200_000  # lines per write; 3.6 M lines of ~89 bytes: ~320 MB
    pad = "p" * 80
    while total < 3_600_000:
        w.lines(total + 1, block, prefix=f"{pad} ")
        total += block
    size = w.path.stat().st_size
    assert size > 300 << 20
    tail = FileTail(str(w.path))
    first = tail.read()
    assert first.history and not first.line_base_known and first.line_shift == 0
    assert len(first.lines) < 50_000  # the last 4 MiB, not the whole file
    window_start = total - len(first.lines)  # lines before the window
    # Relative numbers, and the text shows which absolute line each one is.
    assert first.lines[0] == (1, f"{pad} {window_start + 1}", False)
    assert first.lines[-1] == (len(first.lines), f"{pad} {total}", False)
    reads = 0
    shift = 0
    seen = len(first.lines)
    while True:
        w.lines(total + 1, 3, prefix=f"{pad} ")  # the job keeps writing meanwhile
        total += 3
        read = tail.read()
        reads += 1
        if read.line_shift:
            shift = read.line_shift
            assert read.line_base_known
            # This read's own lines are already absolute.
            assert read.lines == expect(total - 2, total + 1, prefix=f"{pad} ")
            break
        assert not read.line_base_known
        assert read.lines == [(seen + k + 1, f"{pad} {total - 2 + k}", False) for k in range(3)]
        seen += 3
        assert reads < 10
    assert reads == 2  # 256 MiB counted per read: ~300 MiB before the window take two
    assert shift == window_start
    w.lines(total + 1, 1, prefix=f"{pad} ")
    after = tail.read()
    assert after.lines == expect(total + 1, total + 2, prefix=f"{pad} ")
    assert after.line_base_known and after.line_shift == 0
